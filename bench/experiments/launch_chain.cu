// Experiment (bench/experiments/README.md): what a 4-bit projection's launch
// costs beyond its bytes when launches follow one another as in a decode
// step. In the step, Int4Gemm's one-row launches take ~10 us more than their
// weights at the copy rate (8B o: a pair of launches 27.3 us for 2 x 8.4 MB,
// timeline-int4 on an H100), which at 8B is the whole gap to the floor. A
// launch's critical path after its predecessor's end is: the dependency
// resolved, x copied, stages computed, then the split-K finish (a counter
// read, the slot stores and an atomic, the last part's slot loads and the
// residual read: two to four L2 round trips while the other blocks stream).
// This program measures the period of a chain of launches of a kernel that
// streams weights as kStream does (2 blocks an SM, a producer warp, 16 KiB
// bulk copies into 4 mbarrier stages, 8 consumer warps, the first stages'
// weights copied before griddepcontrol.wait, x after), with these finishes:
//   none     each warp stores its sums; no split-K
//   global   kStream's: groups of G consecutive blocks share a tile; a warp
//            whose group's other parts are in (acquire load) sums their
//            slots, else publishes its slot and arrives (acq_rel atomic);
//            the last sums the slots and adds to the residual y
//   cluster  the G blocks of a group form a thread block cluster; each
//            warp stores its sums into the leader block's shared memory
//            (distributed shared memory), one cluster barrier, and the
//            leader's warps sum and add to the residual y
// and `none` without programmatic dependent launch. Weights rotate over a
// 448 MiB pool, so no launch finds its weights in L2. Output: per size and
// form the period of one launch in a graph of 40 (median of 5 replays), its
// bytes over the period, and the period less the bytes at the best rate
// measured (the `none` form of the largest size).
// Build (from the repository root): nvcc -std=c++17 -O3
//   -gencode=arch=compute_90a,code=sm_90a -I. bench/experiments/launch_chain.cu -o lc
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "engine/kernels/cuda_pipeline.cuh"
#include "engine/kernels/cuda_ptx.cuh"
#include "experiment_common.cuh"

namespace cuda = onecard::engine::cuda;

constexpr int kWarps = 8;
constexpr int kThreads = 32 * (kWarps + 1);
constexpr uint32_t kChunk = 16 << 10;
constexpr int kStages = 4;
constexpr uint32_t kXBytes = 8 << 10;
constexpr int kMaxGroup = 8;

enum class Finish { kNone, kGlobal, kCluster };

struct Args {
  const char* w;
  int64_t chunks;
  const char* x;      // kXBytes the previous launch wrote
  float4* y;          // [groups][kWarps][32]: the residual, read and written
  float4* partials;   // [grid][kWarps][32]: kGlobal's slots
  int32_t* counters;  // [groups][kWarps]: kGlobal's arrivals (zero between launches)
  int group;          // G
};

struct Shared {
  uint64_t full[kStages], empty[kStages], xbar;
};

// Layout of the dynamic shared memory: barriers, stages, x, the cluster's parts.
constexpr uint32_t kStageOffset = 1024;
constexpr uint32_t kXOffset = kStageOffset + kStages * kChunk;
constexpr uint32_t kPartsOffset = kXOffset + kXBytes;  // [G][kWarps][32] float4
// Every form takes the same footprint, two blocks an SM as kStream.
constexpr int kSmem = kPartsOffset + kMaxGroup * kWarps * 32 * 16;
static_assert(2 * (kSmem + 1024) <= 228 << 10, "two blocks an SM");

__device__ __forceinline__ uint32_t ClusterRank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
__device__ __forceinline__ void ClusterArriveRelaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void ClusterWait() {
  asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void ClusterArriveRelease() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void ClusterWaitAcquire() {
  asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void StoreRemote(const void* local, uint32_t rank, float4 v) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n"
               : "=r"(remote)
               : "r"(cuda::SmemAddr(local)), "r"(rank));
  asm volatile("st.shared::cluster.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"r"(remote), "f"(v.x),
               "f"(v.y), "f"(v.z), "f"(v.w)
               : "memory");
}

template <Finish kFinish>
__global__ void __launch_bounds__(kThreads, 2) Stream(Args a) {
  extern __shared__ __align__(128) unsigned char raw[];
  Shared& sh = *reinterpret_cast<Shared*>(raw);
  unsigned char* stages = raw + kStageOffset;
  const float* xs = reinterpret_cast<const float*>(raw + kXOffset);
  float4* parts = reinterpret_cast<float4*>(raw + kPartsOffset);
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      cuda::MbarrierInit(&sh.full[s], 1);
      cuda::MbarrierInit(&sh.empty[s], kWarps);
    }
    cuda::MbarrierInit(&sh.xbar, 1);
    cuda::FenceMbarrierInit();
  }
  __syncthreads();
  if constexpr (kFinish == Finish::kCluster) ClusterArriveRelaxed();  // every block has started
  cuda::LaunchDependents();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t begin = blockIdx.x * a.chunks / gridDim.x;
  const int64_t end = (blockIdx.x + 1) * a.chunks / gridDim.x;
  if (warp == kWarps) {
    if (lane == 0) {
      int64_t i = 0;
      for (; i < kStages && begin + i < end; ++i) {
        cuda::MbarrierArriveExpectTx(&sh.full[i], kChunk);
        cuda::BulkCopy(stages + i * kChunk, a.w + (begin + i) * kChunk, kChunk, &sh.full[i]);
      }
      cuda::GridDependencyWait();
      cuda::MbarrierArriveExpectTx(&sh.xbar, kXBytes);
      cuda::BulkCopy(raw + kXOffset, a.x, kXBytes, &sh.xbar);
      for (; begin + i < end; ++i) {
        const int s = static_cast<int>(i % kStages);
        cuda::MbarrierWait(&sh.empty[s], static_cast<uint32_t>(((i / kStages) & 1) ^ 1));
        cuda::MbarrierArriveExpectTx(&sh.full[s], kChunk);
        cuda::BulkCopy(stages + s * kChunk, a.w + (begin + i) * kChunk, kChunk, &sh.full[s]);
      }
    }
    if constexpr (kFinish == Finish::kCluster) {
      __syncwarp();
      ClusterWait();  // the two cluster barriers take every thread
      ClusterArriveRelease();
      ClusterWaitAcquire();
    }
    return;
  }
  cuda::GridDependencyWait();
  cuda::MbarrierWait(&sh.xbar, 0);
  float4 acc = make_float4(xs[lane], 0.0f, 0.0f, 0.0f);
  for (int64_t i = 0; begin + i < end; ++i) {
    const int s = static_cast<int>(i % kStages);
    cuda::MbarrierWait(&sh.full[s], static_cast<uint32_t>((i / kStages) & 1));
    // A consumer's share of a stage: 64 bytes a thread, as 4 x 16 (stand-in
    // for the dequantization; the data are read, not used).
    const uint4* st = reinterpret_cast<const uint4*>(stages + s * kChunk);
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const uint4 v = st[r * 256 + warp * 32 + lane];
      acc.x += __uint_as_float(v.x & 0x3f800000u);
      acc.y += __uint_as_float(v.y & 0x3f800000u);
      acc.z += __uint_as_float(v.z & 0x3f800000u);
      acc.w += __uint_as_float(v.w & 0x3f800000u);
    }
    __syncwarp();
    if (lane == 0) cuda::MbarrierArrive(&sh.empty[s]);
  }
  const int32_t g = blockIdx.x / a.group;
  float4* yv = a.y + (int64_t{g} * kWarps + warp) * 32 + lane;
  const auto add = [](float4 p, float4 q) {
    return make_float4(p.x + q.x, p.y + q.y, p.z + q.z, p.w + q.w);
  };
  if constexpr (kFinish == Finish::kNone) {
    __stcg(a.partials + (int64_t{blockIdx.x} * kWarps + warp) * 32 + lane, acc);
  } else if constexpr (kFinish == Finish::kGlobal) {
    const int32_t first = g * a.group, last = first + a.group - 1;
    int32_t* counter = a.counters + g * kWarps + warp;
    const bool others_in = __all_sync(0xffffffffu, cuda::LoadAcquireGpu(counter) == a.group - 1);
    if (!others_in) {
      __stcg(a.partials + (int64_t{blockIdx.x} * kWarps + warp) * 32 + lane, acc);
      __syncwarp();
      int is_last = 0;
      if (lane == 0) is_last = cuda::AtomicAddAcqRelGpu(counter, 1) == a.group - 1;
      if (!__shfl_sync(0xffffffffu, is_last, 0)) return;
      __syncwarp();
    }
    float4 v[kMaxGroup];
#pragma unroll
    for (int b = 0; b < kMaxGroup; ++b) {
      const int32_t blk = first + b;
      v[b] = blk <= last && blk != static_cast<int32_t>(blockIdx.x)
                 ? __ldcg(a.partials + (int64_t{blk} * kWarps + warp) * 32 + lane)
                 : acc;
    }
    float4 sum = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
    for (int b = 0; b < kMaxGroup; ++b) {
      if (b < a.group) sum = add(sum, v[b]);
    }
    *yv = add(*yv, sum);
    if (lane == 0) *counter = 0;
  } else {
    const uint32_t rank = ClusterRank();
    // The residual's load overlaps the barrier (the leader's only).
    const float4 residual = rank == 0 ? *yv : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    ClusterWait();  // every block of the cluster has started (the arrive above)
    StoreRemote(&parts[(rank * kWarps + warp) * 32 + lane], 0, acc);
    ClusterArriveRelease();
    ClusterWaitAcquire();
    if (rank != 0) return;
    float4 sum = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (int r = 0; r < a.group; ++r) sum = add(sum, parts[(r * kWarps + warp) * 32 + lane]);
    *yv = add(residual, sum);
  }
}

struct Form {
  const char* name;
  Finish finish;
  int group;
  bool pdl;
};

template <Finish kFinish>
void Launch(const Args& a, int grid, bool pdl, cudaStream_t s) {
  cudaLaunchAttribute attr[2];
  int n = 0;
  attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[n++].val.programmaticStreamSerializationAllowed = pdl ? 1 : 0;
  if (kFinish == Finish::kCluster) {
    attr[n].id = cudaLaunchAttributeClusterDimension;
    attr[n].val.clusterDim.x = a.group;
    attr[n].val.clusterDim.y = 1;
    attr[n++].val.clusterDim.z = 1;
  }
  cudaLaunchConfig_t c = {};
  c.gridDim = dim3(grid);
  c.blockDim = dim3(kThreads);
  c.dynamicSmemBytes = kSmem;
  c.stream = s;
  c.attrs = attr;
  c.numAttrs = n;
  CK(cudaLaunchKernelEx(&c, Stream<kFinish>, a));
}

int main() {
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int grid = 2 * sms;
  CK(cudaFuncSetAttribute(Stream<Finish::kNone>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                          kSmem));
  CK(cudaFuncSetAttribute(Stream<Finish::kGlobal>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                          kSmem));
  CK(cudaFuncSetAttribute(Stream<Finish::kCluster>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                          kSmem));
  for (int g : {4, 8}) {
    cudaLaunchAttribute attr;
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = g;
    attr.val.clusterDim.y = attr.val.clusterDim.z = 1;
    cudaLaunchConfig_t c = {};
    c.gridDim = dim3(grid);
    c.blockDim = dim3(kThreads);
    c.dynamicSmemBytes = kSmem;
    c.attrs = &attr;
    c.numAttrs = 1;
    int clusters = 0;
    CK(cudaOccupancyMaxActiveClusters(&clusters, Stream<Finish::kCluster>, &c));
    printf("clusters of %d: %d resident at once (%d blocks of the grid's %d)\n", g, clusters,
           clusters * g, grid);
  }
  constexpr int64_t kPool = 448LL << 20;
  char* pool;
  CK(cudaMalloc(&pool, kPool));
  CK(cudaMemset(pool, 1, kPool));
  const int groups = grid / 4;  // the most groups of any form
  float4 *y[2], *partials;
  int32_t* counters;
  for (float4*& b : y) {
    CK(cudaMalloc(&b, int64_t{groups} * kWarps * 32 * 16));
    CK(cudaMemset(b, 0, int64_t{groups} * kWarps * 32 * 16));
  }
  CK(cudaMalloc(&partials, int64_t{grid} * kWarps * 32 * 16));
  CK(cudaMalloc(&counters, int64_t{groups} * kWarps * 4));
  CK(cudaMemset(counters, 0, int64_t{groups} * kWarps * 4));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  // The 8B and 70B products' 4-bit bytes (o, qkv, down, gate_up; 70B o and down).
  const int64_t sizes_mib[] = {8, 12, 28, 56, 64, 112};
  const Form forms[] = {
      {"none", Finish::kNone, 8, true},           {"none no-PDL", Finish::kNone, 8, false},
      {"global G=8", Finish::kGlobal, 8, true},   {"global G=4", Finish::kGlobal, 4, true},
      {"cluster G=8", Finish::kCluster, 8, true}, {"cluster G=4", Finish::kCluster, 4, true}};
  constexpr int kChain = 40;
  printf("%d SMs, %d blocks, chains of %d launches, %d KiB stages x %d\n", sms, grid, kChain,
         kChunk >> 10, kStages);
  printf("%-13s %6s %10s %8s %12s\n", "form", "MiB", "period us", "GB/s", "over us");
  double best = 0;  // bytes/us of `none` at the largest size, measured first
  for (int si = static_cast<int>(std::size(sizes_mib)) - 1; si >= 0; --si) {
    const int64_t bytes = sizes_mib[si] << 20;
    for (const Form& f : forms) {
      Args a{};
      a.chunks = bytes / kChunk;
      a.partials = partials;
      a.counters = counters;
      a.group = f.group;
      const int64_t windows = kPool / bytes;
      int64_t next = 0;
      const auto body = [&] {
        for (int l = 0; l < kChain; ++l) {
          a.w = pool + (next++ % windows) * bytes;
          a.x = reinterpret_cast<const char*>(y[l % 2]);
          a.y = y[(l + 1) % 2];
          switch (f.finish) {
            case Finish::kNone:
              Launch<Finish::kNone>(a, grid, f.pdl, s);
              break;
            case Finish::kGlobal:
              Launch<Finish::kGlobal>(a, grid, f.pdl, s);
              break;
            case Finish::kCluster:
              Launch<Finish::kCluster>(a, grid, f.pdl, s);
              break;
          }
        }
      };
      std::vector<double> us;
      for (int r = 0; r < 5; ++r) us.push_back(CaptureReplayUs(s, 5, body) / kChain);
      std::sort(us.begin(), us.end());
      const double period = us[us.size() / 2];
      const double rate = bytes / period;  // bytes/us
      if (best == 0) best = rate;
      printf("%-13s %6lld %10.2f %8.0f %12.2f\n", f.name, static_cast<long long>(sizes_mib[si]),
             period, rate * 1e-3, period - bytes / best);
    }
  }
  CK(cudaGetLastError());
  return 0;
}
