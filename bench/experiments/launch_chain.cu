// Experiment (bench/experiments/README.md): what a 4-bit projection's launch
// costs beyond its bytes when launches follow one another as in a decode
// step, and what a persistent launch would save. Int4Gemm's one-row launches
// lose ~10 us each in the step (timeline-int4: 3-5 us from a block's start to
// its first stage, 5-13 us from the median warp's end to the last's; the 8B
// step is ~48 us a layer over its bytes on an H100). A launch's critical path
// after its predecessor's end is: the dependency resolved, x copied, stages
// computed, then the split-K finish (a counter read, the slot stores and an
// atomic, the last part's slot loads and the residual read: two to four L2
// round trips while the other blocks stream).
// The program streams weights as kStream does (2 blocks an SM, a producer
// warp, 16 KiB bulk copies into 4 mbarrier stages, 8 consumer warps reading
// each stage) in 40 launches (or phases) one after another, in these forms:
//   none          each warp stores its sums; no split-K
//   none no-PDL   the same without programmatic dependent launch
//   global G      kStream's finish: groups of G consecutive blocks share a
//                 tile; a warp whose group's other parts are in (acquire
//                 load) sums their slots, else publishes its slot and
//                 arrives (acq_rel atomic); the last sums the slots and adds
//                 to the residual y
//   cluster G     the G blocks of a group form a thread block cluster; each
//                 warp sends its sums (st.async) into the shared memory of
//                 the cluster's block of rank warp % G, which sums the G
//                 parts and adds to the residual y (Int4Gemm's
//                 FinishInCluster, --int4_cluster_split_k)
//   persist ...   one cooperative launch runs the 40 products as phases with
//                 a grid barrier between them (none, or global G); its
//                 producer streams the next phase's weights as soon as
//                 stages free up, during the previous phase's tail
// A launch of the chain forms copies its first stages' weights before
// griddepcontrol.wait and x after, as kStream. Runs: one size a run (MiB of a
// product's codes and scales), and the 8B and 70B layers' four products in
// turn. Weights rotate over a 1 GiB pool, so no launch finds its weights in
// L2. Output: per run and form the period of one launch (chain forms: a graph
// of 40, median of 5 replays; persistent: median of 5 launches, over 40),
// the bytes over the period, and the period less the bytes at the first
// run's `none` rate.
// Build (from the repository root): nvcc -std=c++17 -O3
//   -gencode=arch=compute_90a,code=sm_90a -I. bench/experiments/launch_chain.cu -o lc
// Run: lc (every form), or lc global | lc cluster | lc persist (those and `none`).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
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
  uint64_t parts;  // kCluster: the parts the other blocks send this one
};

// Layout of the dynamic shared memory: barriers, stages, x, the cluster's parts.
constexpr uint32_t kStageOffset = 1024;
constexpr uint32_t kXOffset = kStageOffset + kStages * kChunk;
// kCluster's parts: [sender rank][warp / G][lane] float4 (Int4Gemm's ClusterParts).
constexpr uint32_t kPartsOffset = kXOffset + kXBytes;
// Every form takes kStream's footprint: two blocks an SM, never three. The
// persistent form's second x buffer lies where kCluster's parts do.
constexpr int kSmem = 100 << 10;
static_assert(kPartsOffset + kWarps * 32 * 16 <= kSmem && kPartsOffset + kXBytes <= kSmem,
              "the parts and the second x buffer fit");
static_assert(2 * (kSmem + 1024) <= 228 << 10 && 3 * (kSmem + 1024) > 228 << 10,
              "two blocks an SM");

// A consumer warp's share of the i-th chunk the block streams: it waits for
// its stage, reads 64 bytes a thread (4 x 16; a stand-in for the
// dequantization, the data read, not used) and releases the stage.
__device__ __forceinline__ void Consume(Shared& sh, const unsigned char* stages, int64_t i,
                                        float4& acc) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int s = static_cast<int>(i % kStages);
  cuda::MbarrierWait(&sh.full[s], static_cast<uint32_t>((i / kStages) & 1));
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

// kGlobal's finish of a warp's sums acc: kStream's FinishSegment, y the
// residual it adds to.
__device__ __forceinline__ void GlobalFinish(float4 acc, float4* y, float4* partials,
                                             int32_t* counters, int group) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int32_t g = blockIdx.x / group, first = g * group, last = first + group - 1;
  int32_t* counter = counters + g * kWarps + warp;
  float4* yv = y + (int64_t{g} * kWarps + warp) * 32 + lane;
  const bool others_in = __all_sync(0xffffffffu, cuda::LoadAcquireGpu(counter) == group - 1);
  if (!others_in) {
    __stcg(partials + (int64_t{blockIdx.x} * kWarps + warp) * 32 + lane, acc);
    __syncwarp();
    int is_last = 0;
    if (lane == 0) is_last = cuda::AtomicAddAcqRelGpu(counter, 1) == group - 1;
    if (!__shfl_sync(0xffffffffu, is_last, 0)) return;
    __syncwarp();
  }
  float4 v[kMaxGroup];
#pragma unroll
  for (int b = 0; b < kMaxGroup; ++b) {
    const int32_t blk = first + b;
    v[b] = blk <= last && blk != static_cast<int32_t>(blockIdx.x)
               ? __ldcg(partials + (int64_t{blk} * kWarps + warp) * 32 + lane)
               : acc;
  }
  float4 sum = *yv;
#pragma unroll
  for (int b = 0; b < kMaxGroup; ++b) {
    if (b < group)
      sum = make_float4(sum.x + v[b].x, sum.y + v[b].y, sum.z + v[b].z, sum.w + v[b].w);
  }
  *yv = sum;
  if (lane == 0) *counter = 0;
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
    if constexpr (kFinish == Finish::kCluster) {
      cuda::MbarrierInit(&sh.parts, 1);
      cuda::MbarrierArriveExpectTx(&sh.parts, (a.group - 1) * (kWarps / a.group) * 32 * 16);
    }
    cuda::FenceMbarrierInit();
  }
  __syncthreads();
  if constexpr (kFinish == Finish::kCluster) cuda::ClusterArriveRelaxed();
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
      cuda::ClusterWaitAcquire();  // every thread arrives and waits once
    }
    return;
  }
  cuda::GridDependencyWait();
  cuda::MbarrierWait(&sh.xbar, 0);
  float4 acc = make_float4(xs[lane], 0.0f, 0.0f, 0.0f);
  for (int64_t i = 0; begin + i < end; ++i) {
    Consume(sh, stages, i, acc);
  }
  const int32_t g = blockIdx.x / a.group;
  float4* yv = a.y + (int64_t{g} * kWarps + warp) * 32 + lane;
  const auto add = [](float4 p, float4 q) {
    return make_float4(p.x + q.x, p.y + q.y, p.z + q.z, p.w + q.w);
  };
  if constexpr (kFinish == Finish::kNone) {
    __stcg(a.partials + (int64_t{blockIdx.x} * kWarps + warp) * 32 + lane, acc);
  } else if constexpr (kFinish == Finish::kGlobal) {
    GlobalFinish(acc, a.y, a.partials, a.counters, a.group);
  } else {
    // Int4Gemm's FinishInCluster: the warp's sums to the block of rank
    // warp % G by st.async; that block's warp sums the G parts in rank order
    // and adds to the residual.
    const uint32_t rank = cuda::ClusterRank(), finisher = warp % a.group;
    const int per = kWarps / a.group;
    cuda::ClusterWaitAcquire();  // every block has started
    if (finisher != rank) {
      cuda::StoreAsyncCluster(&parts[(rank * per + warp / a.group) * 32 + lane], &sh.parts,
                              finisher, acc);
      return;
    }
    const float4 residual = *yv;
    cuda::MbarrierWait(&sh.parts, 0);
    float4 sum = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (int r = 0; r < a.group; ++r) {
      sum = add(sum,
                r == static_cast<int>(rank) ? acc : parts[(r * per + warp / a.group) * 32 + lane]);
    }
    *yv = add(residual, sum);
  }
}

// The persistent form: one launch runs `phases` products one after another,
// each block's share of each (as the chain's), with a grid barrier between
// them in place of a launch boundary. The producer streams the next phase's
// weights as soon as stages free up, so they arrive during the previous
// phase's tail and the barrier; x comes after the barrier.
struct PersistentArgs {
  const char* pool;
  const int64_t* offsets;  // [phases]: a phase's weights in the pool (bytes)
  const int64_t* chunks;   // [phases]
  int phases;
  float4* y[2];  // phase l reads x from y[l % 2] and adds into y[(l + 1) % 2]
  float4* partials;
  int32_t* counters;
  int group;
  int32_t* arrived;  // the grid barrier's arrivals (zero before the launch)
};

// Phase l's x buffer: two, alternating phase by phase, each on its own
// mbarrier (xbar[l % 2], completing once every two phases).
__device__ __forceinline__ unsigned char* XBuffer(unsigned char* raw, int l) {
  return raw + ((l & 1) != 0 ? kPartsOffset : kXOffset);
}

template <Finish kFinish>
__global__ void __launch_bounds__(kThreads, 2) Persistent(PersistentArgs a) {
  static_assert(kFinish != Finish::kCluster, "the persistent form has no cluster finish");
  extern __shared__ __align__(128) unsigned char raw[];
  Shared& sh = *reinterpret_cast<Shared*>(raw);
  uint64_t* xbar = reinterpret_cast<uint64_t*>(raw + 512);  // [2]
  unsigned char* stages = raw + kStageOffset;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      cuda::MbarrierInit(&sh.full[s], 1);
      cuda::MbarrierInit(&sh.empty[s], kWarps);
    }
    cuda::MbarrierInit(&xbar[0], 1);
    cuda::MbarrierInit(&xbar[1], 1);
    cuda::FenceMbarrierInit();
  }
  __syncthreads();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (warp == kWarps) {
    if (lane != 0) return;
    int64_t i = 0;
    for (int l = 0; l < a.phases; ++l) {
      const int64_t n = a.chunks[l];
      const int64_t begin = blockIdx.x * n / gridDim.x, end = (blockIdx.x + 1) * n / gridDim.x;
      const char* w = a.pool + a.offsets[l];
      for (int64_t c = begin; c < end; ++c, ++i) {
        const int s = static_cast<int>(i % kStages);
        cuda::MbarrierWait(&sh.empty[s], static_cast<uint32_t>(((i / kStages) & 1) ^ 1));
        cuda::MbarrierArriveExpectTx(&sh.full[s], kChunk);
        cuda::BulkCopy(stages + s * kChunk, w + c * kChunk, kChunk, &sh.full[s]);
      }
    }
    return;
  }
  int64_t i = 0;
  for (int l = 0; l < a.phases; ++l) {
    if (threadIdx.x == 0) {
      if (l > 0) {
        while (cuda::LoadAcquireGpu(a.arrived) < l * static_cast<int32_t>(gridDim.x)) {
        }
        asm volatile("fence.proxy.async.global;\n" ::: "memory");  // x, written by other SMs
      }
      cuda::MbarrierArriveExpectTx(&xbar[l & 1], kXBytes);
      cuda::BulkCopy(XBuffer(raw, l), (l & 1) != 0 ? a.y[1] : a.y[0], kXBytes, &xbar[l & 1]);
    }
    cuda::MbarrierWait(&xbar[l & 1], static_cast<uint32_t>((l >> 1) & 1));
    const float* xs = reinterpret_cast<const float*>(XBuffer(raw, l));
    float4 acc = make_float4(xs[lane], 0.0f, 0.0f, 0.0f);
    const int64_t n = a.chunks[l];
    const int64_t begin = blockIdx.x * n / gridDim.x, end = (blockIdx.x + 1) * n / gridDim.x;
    for (int64_t c = begin; c < end; ++c, ++i) {
      Consume(sh, stages, i, acc);
    }
    float4* y = (l & 1) != 0 ? a.y[0] : a.y[1];
    if constexpr (kFinish == Finish::kNone) {
      __stcg(a.partials + (int64_t{blockIdx.x} * kWarps + warp) * 32 + lane, acc);
      __stcg(y + (int64_t{blockIdx.x / a.group} * kWarps + warp) * 32 + lane, acc);
    } else {
      GlobalFinish(acc, y, a.partials, a.counters, a.group);
    }
    cuda::NamedBarrier(1, 32 * kWarps);  // the block's phase is done
    if (threadIdx.x == 0) cuda::AtomicAddAcqRelGpu(a.arrived, 1);
  }
}

struct Form {
  const char* name;
  Finish finish;
  int group;
  bool pdl;
  bool persistent;
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

template <Finish kFinish>
void LaunchPersistent(const PersistentArgs& a, int grid, cudaStream_t s) {
  cudaLaunchAttribute attr;
  attr.id = cudaLaunchAttributeCooperative;  // every block resident: the grid barrier
  attr.val.cooperative = 1;
  cudaLaunchConfig_t c = {};
  c.gridDim = dim3(grid);
  c.blockDim = dim3(kThreads);
  c.dynamicSmemBytes = kSmem;
  c.stream = s;
  c.attrs = &attr;
  c.numAttrs = 1;
  CK(cudaLaunchKernelEx(&c, Persistent<kFinish>, a));
}

template <typename K>
void AllowSmem(K kernel) {
  CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
}

// A run: the launches' (phases') sizes in MiB, cycled.
struct Run {
  const char* name;
  std::vector<int64_t> mib;
};

int main(int argc, char** argv) {
  // argv[1]: the forms to run beside `none` (global, cluster or persist; all
  // when absent), so that a form the machine refuses ends only its own run.
  const char* only = argc > 1 ? argv[1] : nullptr;
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int grid = 2 * sms;
  AllowSmem(Stream<Finish::kNone>);
  AllowSmem(Stream<Finish::kGlobal>);
  AllowSmem(Stream<Finish::kCluster>);
  AllowSmem(Persistent<Finish::kNone>);
  AllowSmem(Persistent<Finish::kGlobal>);
  int per_sm = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, Persistent<Finish::kGlobal>, kThreads,
                                                   kSmem));
  printf("persistent: %d blocks an SM resident (the grid needs 2)\n", per_sm);
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
  constexpr int64_t kPool = 1LL << 30;
  char* pool;
  CK(cudaMalloc(&pool, kPool));
  CK(cudaMemset(pool, 1, kPool));
  const int groups = grid / 4;  // the most groups of any form
  float4 *y[2], *partials;
  int32_t *counters, *arrived;
  for (float4*& b : y) {
    CK(cudaMalloc(&b, int64_t{groups} * kWarps * 32 * 16));
    CK(cudaMemset(b, 0, int64_t{groups} * kWarps * 32 * 16));
  }
  CK(cudaMalloc(&partials, int64_t{grid} * kWarps * 32 * 16));
  CK(cudaMalloc(&counters, int64_t{groups} * kWarps * 4));
  CK(cudaMemset(counters, 0, int64_t{groups} * kWarps * 4));
  CK(cudaMalloc(&arrived, 4));
  constexpr int kChain = 40;
  int64_t *d_offsets, *d_chunks;
  CK(cudaMalloc(&d_offsets, kChain * 8));
  CK(cudaMalloc(&d_chunks, kChain * 8));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  // The 4-bit products' bytes (codes and scales, MiB): 8B qkv / o / gate_up /
  // down 12 / 8 / 56 / 28; 70B 41 / 33 / 231 / 115.
  const Run runs[] = {{"112", {112}},
                      {"56", {56}},
                      {"28", {28}},
                      {"12", {12}},
                      {"8", {8}},
                      {"8B layer", {12, 8, 56, 28}},
                      {"70B layer", {41, 33, 231, 115}}};
  const Form forms[] = {{"none", Finish::kNone, 8, true, false},
                        {"none no-PDL", Finish::kNone, 8, false, false},
                        {"global G=8", Finish::kGlobal, 8, true, false},
                        {"global G=4", Finish::kGlobal, 4, true, false},
                        {"cluster G=8", Finish::kCluster, 8, true, false},
                        {"cluster G=4", Finish::kCluster, 4, true, false},
                        {"persist none", Finish::kNone, 8, false, true},
                        {"persist G=8", Finish::kGlobal, 8, false, true},
                        {"persist G=4", Finish::kGlobal, 4, false, true}};
  printf("%d SMs, %d blocks, %d launches (or phases of one launch), %d KiB stages x %d\n", sms,
         grid, kChain, kChunk >> 10, kStages);
  printf("%-10s %-13s %10s %8s %12s\n", "MiB", "form", "period us", "GB/s", "over us");
  double best = 0;  // bytes/us of `none` in the first run
  for (const Run& run : runs) {
    std::vector<int64_t> offsets(kChain), chunks(kChain);
    int64_t at = 0, total = 0, max_bytes = 0;
    for (int64_t m : run.mib) max_bytes = std::max(max_bytes, m << 20);
    for (int l = 0; l < kChain; ++l) {
      const int64_t bytes = run.mib[l % run.mib.size()] << 20;
      if (at + bytes > kPool) at = 0;
      offsets[l] = at;
      chunks[l] = bytes / kChunk;
      at += bytes;
      total += bytes;
    }
    CK(cudaMemcpy(d_offsets, offsets.data(), kChain * 8, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(d_chunks, chunks.data(), kChain * 8, cudaMemcpyHostToDevice));
    for (const Form& f : forms) {
      if (only != nullptr && std::strncmp(f.name, "none", 4) != 0 &&
          std::strncmp(f.name, only, std::strlen(only)) != 0) {
        continue;
      }
      std::vector<double> us;
      if (f.persistent) {
        PersistentArgs a{pool,     d_offsets, d_chunks, kChain, {y[0], y[1]},
                         partials, counters,  f.group,  arrived};
        for (int r = 0; r < 6; ++r) {
          CK(cudaMemsetAsync(arrived, 0, 4, s));
          CK(cudaEventRecord(e0, s));
          if (f.finish == Finish::kNone) {
            LaunchPersistent<Finish::kNone>(a, grid, s);
          } else {
            LaunchPersistent<Finish::kGlobal>(a, grid, s);
          }
          CK(cudaEventRecord(e1, s));
          CK(cudaEventSynchronize(e1));
          float ms = 0;
          CK(cudaEventElapsedTime(&ms, e0, e1));
          if (r > 0) us.push_back(1e3 * ms / kChain);
        }
      } else {
        Args a{};
        a.partials = partials;
        a.counters = counters;
        a.group = f.group;
        const auto body = [&] {
          for (int l = 0; l < kChain; ++l) {
            a.w = pool + offsets[l];
            a.chunks = chunks[l];
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
        for (int r = 0; r < 5; ++r) us.push_back(CaptureReplayUs(s, 5, body) / kChain);
      }
      std::sort(us.begin(), us.end());
      const double period = us[us.size() / 2];
      const double rate = static_cast<double>(total) / kChain / period;  // bytes/us
      if (best == 0) best = rate;
      printf("%-10s %-13s %10.2f %8.0f %12.2f\n", run.name, f.name, period, rate * 1e-3,
             period - static_cast<double>(total) / kChain / best);
      fflush(stdout);
    }
  }
  CK(cudaGetLastError());
  return 0;
}
