// Experiment (bench/experiments/README.md): Int4Gemm's one-row launches end
// 2-14 us after their median warp (timeline-int4, bench/results' int4 page),
// and the SMs that end last change from launch to launch. Is that spread the
// memory system's own, for blocks that only stream their shares, and what
// would taking the last chunks dynamically, or fewer stages in flight, leave
// of it? Not part of the build.
//
// A launch streams `bytes` of a weight as kStream does, without its
// arithmetic: 2 blocks an SM (1 with `--one`), a producer warp copying
// 16 KiB chunks with the bulk copy engine into `stages` shared-memory slots
// on mbarriers, 8 consumer warps that wait for a slot and release it. Work:
//   static   block b takes chunks [b n / grid, (b + 1) n / grid) (stream-K's
//            equal contiguous shares)
//   dynamic  the first (1 - f) of the chunks as static shares, the rest taken
//            a chunk at a time from a counter by whichever block is free
// Each block's smem is padded to kStream's (~100 KB a block at 2 an SM) so
// that no SM holds a third. Launches alternate between three copies of the
// weight (nothing stays in L2). For each form and size: the median over 7
// pairs of launches of the span (first block start to last end), the median
// block's end and the last's, the GB/s over the span, and of the tenth of
// the blocks (and of the SMs) that end last in a pair's first launch the
// share that end last in its second (chance: 0.1).
// Build (from this folder): nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -I../..
//   stream_imbalance.cu -o si
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <map>
#include <vector>

#include "engine/kernels/cuda_pipeline.cuh"
#include "experiment_common.cuh"

namespace cuda = onecard::engine::cuda;

constexpr int kWarps = 8;
constexpr int kThreads = 32 * (kWarps + 1);
constexpr uint32_t kChunk = 16 << 10;
constexpr int kMaxStages = 8;

struct Args {
  const char* src;
  int64_t chunks;         // of kChunk bytes
  int64_t static_chunks;  // the first ones, in equal shares; the rest dynamically
  int stages;
  int* counter;     // the dynamic chunks taken (zero before a launch)
  uint64_t* trace;  // [block][4]: start, first chunk landed, end, SM
};

struct Shared {
  uint64_t full[kMaxStages], empty[kMaxStages];
  int64_t chunk[kMaxStages];  // the chunk in a slot; -1: no more
  uint64_t t_first;
};

__global__ void __launch_bounds__(kThreads) Stream(Args a) {
  extern __shared__ __align__(128) unsigned char raw[];
  Shared& sh = *reinterpret_cast<Shared*>(raw);
  unsigned char* slots = raw + 1024;
  const uint64_t t0 = cuda::GlobalTimerNs();
  if (threadIdx.x == 0) {
    for (int s = 0; s < a.stages; ++s) {
      cuda::MbarrierInit(&sh.full[s], 1);
      cuda::MbarrierInit(&sh.empty[s], kWarps);
    }
    cuda::FenceMbarrierInit();
  }
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t begin = blockIdx.x * a.static_chunks / gridDim.x;
  const int64_t end = (blockIdx.x + 1) * a.static_chunks / gridDim.x;
  if (warp == kWarps) {
    if (lane != 0) return;
    int64_t next = begin;
    for (int64_t i = 0;; ++i) {
      const int s = static_cast<int>(i % a.stages);
      cuda::MbarrierWait(&sh.empty[s], static_cast<uint32_t>(((i / a.stages) & 1) ^ 1));
      int64_t c = -1;
      if (next < end) {
        c = next++;
      } else if (a.static_chunks < a.chunks) {
        const int64_t d = atomicAdd(a.counter, 1);
        if (a.static_chunks + d < a.chunks) c = a.static_chunks + d;
      }
      sh.chunk[s] = c;
      if (c < 0) {
        cuda::MbarrierArrive(&sh.full[s]);
        return;
      }
      cuda::MbarrierArriveExpectTx(&sh.full[s], kChunk);
      cuda::BulkCopy(slots + s * kChunk, a.src + c * kChunk, kChunk, &sh.full[s]);
    }
  }
  for (int64_t i = 0;; ++i) {
    const int s = static_cast<int>(i % a.stages);
    cuda::MbarrierWait(&sh.full[s], static_cast<uint32_t>((i / a.stages) & 1));
    if (i == 0 && threadIdx.x == 0) sh.t_first = cuda::GlobalTimerNs();
    const int64_t c = sh.chunk[s];
    __syncwarp();
    if (lane == 0) cuda::MbarrierArrive(&sh.empty[s]);
    if (c < 0) break;
  }
  cuda::NamedBarrier(1, 32 * kWarps);
  if (threadIdx.x == 0) {
    uint64_t* r = a.trace + blockIdx.x * 4;
    r[0] = t0;
    r[1] = sh.t_first;
    r[2] = cuda::GlobalTimerNs();
    r[3] = cuda::SmId();
  }
}

struct Launch {
  double span_us, median_end_us, last_end_us;
  std::vector<uint64_t> late_blocks, late_sms;
};

template <typename T>
T Median(std::vector<T> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

Launch Read(const std::vector<uint64_t>& t, int grid) {
  uint64_t first = UINT64_MAX, last = 0;
  std::vector<double> ends;
  std::map<uint64_t, uint64_t> sm_end;
  std::vector<std::pair<uint64_t, uint64_t>> by_end;
  for (int b = 0; b < grid; ++b) {
    first = std::min(first, t[b * 4]);
    last = std::max(last, t[b * 4 + 2]);
    sm_end[t[b * 4 + 3]] = std::max(sm_end[t[b * 4 + 3]], t[b * 4 + 2]);
    by_end.push_back({t[b * 4 + 2], static_cast<uint64_t>(b)});
  }
  for (int b = 0; b < grid; ++b) ends.push_back(static_cast<double>(t[b * 4 + 2] - first));
  Launch l;
  l.span_us = (last - first) * 1e-3;
  l.median_end_us = Median(ends) * 1e-3;
  l.last_end_us = l.span_us;
  std::sort(by_end.rbegin(), by_end.rend());
  for (size_t i = 0; i < std::max<size_t>(1, by_end.size() / 10); ++i) {
    l.late_blocks.push_back(by_end[i].second);
  }
  std::vector<std::pair<uint64_t, uint64_t>> sms;
  for (const auto& [sm, e] : sm_end) sms.push_back({e, sm});
  std::sort(sms.rbegin(), sms.rend());
  for (size_t i = 0; i < std::max<size_t>(1, sms.size() / 10); ++i) {
    l.late_sms.push_back(sms[i].second);
  }
  std::sort(l.late_blocks.begin(), l.late_blocks.end());
  std::sort(l.late_sms.begin(), l.late_sms.end());
  return l;
}

double Repeat(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b) {
  std::vector<uint64_t> both;
  std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(both));
  return static_cast<double>(both.size()) / static_cast<double>(a.size());
}

int main(int argc, char** argv) {
  const bool one = argc > 1 && std::strcmp(argv[1], "--one") == 0;
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int64_t sizes[] = {8LL << 20, 32LL << 20, 112LL << 20, 224LL << 20};
  const int64_t max_bytes = sizes[3];
  char* copies[3];
  for (char*& c : copies) {
    CK(cudaMalloc(&c, max_bytes));
    CK(cudaMemset(c, 1, max_bytes));
  }
  int* counter;
  uint64_t* trace;
  CK(cudaMalloc(&counter, sizeof(int)));
  CK(cudaMalloc(&trace, 4 * 8 * 1024));
  const int per_sm = one ? 1 : 2;
  const int grid = sms * per_sm;
  const int smem = one ? 200 << 10 : 100 << 10;  // kStream's footprint: per_sm blocks fill the SM
  CK(cudaFuncSetAttribute(Stream, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  struct Form {
    const char* name;
    int stages;
    double dynamic;
  };
  const Form forms[] = {{"static S=4", 4, 0.0},      {"static S=3", 3, 0.0},
                        {"static S=2", 2, 0.0},      {"static S=6", 6, 0.0},
                        {"dynamic 10% S=4", 4, 0.1}, {"dynamic 25% S=4", 4, 0.25},
                        {"dynamic all S=4", 4, 1.0}};
  printf("%s, %d SMs, %d blocks an SM, %d KiB chunks\n", one ? "one block an SM" : "kStream's grid",
         sms, per_sm, kChunk >> 10);
  printf("%-18s %8s %9s %10s %9s %8s %10s %10s\n", "form", "MiB", "span us", "median us",
         "last-med", "GB/s", "late blk", "late SM");
  int next = 0;
  for (const int64_t bytes : sizes) {
    for (const Form& f : forms) {
      if (f.stages * static_cast<int64_t>(kChunk) + 1024 > smem) continue;
      Args a{};
      a.chunks = bytes / kChunk;
      a.static_chunks = static_cast<int64_t>(a.chunks * (1.0 - f.dynamic));
      if (f.dynamic >= 1.0) a.static_chunks = 0;
      a.stages = f.stages;
      a.counter = counter;
      auto launch = [&](std::vector<uint64_t>* out) {
        a.src = copies[next++ % 3];
        CK(cudaMemset(counter, 0, sizeof(int)));
        CK(cudaMemset(trace, 0, 4 * 8 * grid));
        a.trace = trace;
        Stream<<<grid, kThreads, smem>>>(a);
        CK(cudaGetLastError());
        if (out != nullptr) {
          out->resize(4 * grid);
          CK(cudaMemcpy(out->data(), trace, 4 * 8 * grid, cudaMemcpyDeviceToHost));
        } else {
          CK(cudaDeviceSynchronize());
        }
      };
      for (int w = 0; w < 3; ++w) launch(nullptr);
      std::vector<double> span, med, spread, blk, sm;
      for (int p = 0; p < 7; ++p) {
        std::vector<uint64_t> ta, tb;
        launch(&ta);
        launch(&tb);
        const Launch la = Read(ta, grid), lb = Read(tb, grid);
        span.push_back(la.span_us);
        med.push_back(la.median_end_us);
        spread.push_back(la.last_end_us - la.median_end_us);
        blk.push_back(Repeat(la.late_blocks, lb.late_blocks));
        sm.push_back(Repeat(la.late_sms, lb.late_sms));
      }
      const double s = Median(span);
      printf("%-18s %8.0f %9.1f %10.1f %9.1f %8.0f %10.2f %10.2f\n", f.name, bytes / 1048576.0, s,
             Median(med), Median(spread), bytes / (s * 1e-6) / 1e9, Median(blk), Median(sm));
    }
  }
  return 0;
}
