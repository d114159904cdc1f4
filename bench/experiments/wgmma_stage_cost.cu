// Experiment (bench/experiments/README.md): where Int4Gemm's kWgmma kernel
// spends a 128-row stage, whose two warpgroups' 16 m64n128k16 wgmmas take
// 1024 cycles at the tensor pipe's peak (the measured stage's cost and what
// it is not bound by: bench/results/2026-12-01-h200-int4.md). This program
// runs the stage's pieces one at a time, one block an SM, each block as
// Int4WgmmaKernel<128>: 384 threads, a producer warpgroup (setmaxnreg down to
// 56) and two consumer warpgroups (up to 224), a warpgroup's stage 8
// m64n128k16 wgmmas with A from registers and B a 128-row x tile of 32 KiB in
// shared memory (two 16 KiB panels, 128-byte swizzle descriptors as kWgmma's;
// the bytes' values do not matter to the timing). Forms:
//   mma0    the wgmmas alone (A fixed), each stage issued after
//           wgmma.wait_group 0 for the one before (ConsumeOverlap's order)
//   mma1    the same, stage s issued behind s - 1 and then wait_group 1
//           (ConsumeScaled's order)
//   deq0    mma0 + the stage's dequantization from a fixed 8 KiB code tile
//           in shared memory: four 16-byte loads, a byte_perm a word, and a
//           lop3, a bf16x2 subtraction and a bf16x2 multiply a fragment
//           register (ConsumeScaled's arithmetic)
//   deq1    the same in ConsumeScaled's order
//   bar1    deq1 + kWgmma's stage ring: 4 stages on full and empty
//           mbarriers, a stage released by the 8 consumer warps and marked
//           full again by the producer at once (no copies)
//   copy1   bar1 + the producer's copies: a stage's 8 KiB of codes from a
//           1 GiB pool (DRAM) and its 32 KiB of x from an 8-stage buffer
//           that stays in L2, bulk copies on the full barrier (kWgmma: x by
//           TMA in the swizzle)
//   copy0   copy1 in ConsumeOverlap's order
//   copym   copy1 without the dequantization (A fixed)
//   mma1w1  mma1 with one consumer warpgroup (512 cycles a stage at the
//           tensor pipe's peak): how close one warpgroup's back-to-back
//           register-A wgmmas come to it alone
// Output per form: cycles a stage (clock64 around each consumer warpgroup's
// stages, mean over the blocks), the launch's time (mean over 20 launches
// after 3) and TFLOP/s.
// Build (from the repository root): nvcc -std=c++17 -O3
//   -gencode=arch=compute_90a,code=sm_90a -I. bench/experiments/wgmma_stage_cost.cu -o wsc
// Run: wsc [stages a block, default 256].
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <type_traits>
#include <vector>

#include "engine/kernels/cuda_pipeline.cuh"
#include "engine/kernels/cuda_ptx.cuh"
#include "engine/kernels/cuda_wgmma.cuh"
#include "engine/kernels/int4_codes.cuh"
#include "experiment_common.cuh"

namespace cuda = onecard::engine::cuda;

constexpr int kThreads = 384;
constexpr int kStages = 4;
constexpr int kPanelBytes = 128 * 128;  // 128 rows of 64 bf16 columns
constexpr int kXBytes = 2 * kPanelBytes;
constexpr int kCodeBytes = 8192;  // a row group's two 64-column k tiles of codes
constexpr int kCodesAt = kStages * kXBytes;
constexpr int kBarsAt = kCodesAt + kStages * kCodeBytes;
constexpr int kSmemBytes = 1024 + kBarsAt + 2 * kStages * 8;
constexpr int64_t kPoolBytes = int64_t{1} << 30;
constexpr int kXBuffers = 8;

enum Ring { kNone, kBarriers, kCopies };

struct Args {
  const unsigned char* pool;  // codes, kPoolBytes
  const unsigned char* x;     // kXBuffers x kXBytes
  long long* cycles;          // a consumer warpgroup's stages, 2 a block
  float* sink;
  int32_t stages;
  int32_t warpgroups;  // consumer warpgroups at work, 1 (ring-less forms only) or 2
};

using onecard::engine::int4::Dequant128;
using onecard::engine::int4::MulBf16x2;
using onecard::engine::int4::SubBf16x2;

// Stage b's A fragments of the warp's row tile from the code tile, as
// ConsumeScaled's StageFragments and scaling.
__device__ __forceinline__ void Fragments(const unsigned char* smem, int b, uint32_t (&av)[8][4]) {
  const int lane = threadIdx.x & 31, warp = (threadIdx.x >> 5) & 7;
  const uint4* tile = reinterpret_cast<const uint4*>(smem + kCodesAt + b * kCodeBytes);
  uint32_t words[8];
#pragma unroll
  for (int t = 0; t < 2; ++t) {
    const uint4 lo = tile[(t * 8 + warp) * 32 + (lane >> 2) * 4 + (lane & 3) / 2];
    const uint4 hi = tile[(t * 8 + warp) * 32 + (lane >> 2) * 4 + (lane & 3) / 2 + 2];
    words[4 * t] = __byte_perm(lo.x, hi.x, 0x5410);
    words[4 * t + 1] = __byte_perm(lo.y, hi.y, 0x5410);
    words[4 * t + 2] = __byte_perm(lo.z, hi.z, 0x5410);
    words[4 * t + 3] = __byte_perm(lo.w, hi.w, 0x5410);
  }
  const uint32_t scale = reinterpret_cast<const uint32_t*>(smem + kCodesAt)[lane];
#pragma unroll
  for (int j = 0; j < 8; ++j) {
#pragma unroll
    for (int m = 0; m < 4; ++m) {
      av[j][m] = MulBf16x2(SubBf16x2(Dequant128(words[j], m), 0x43084308u), scale);
    }
  }
}

__device__ __forceinline__ void Issue(float (&acc)[64], uint32_t (&av)[8][4], uint32_t x_stage) {
  cuda::KeepOperands(av);
  cuda::KeepOperands(acc);
  cuda::WgmmaFence();
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const uint32_t at = x_stage + (j / 4) * kPanelBytes + (j % 4) * 32;
    cuda::WgmmaM64N128K16<false, 0>(acc, av[j], cuda::SmemDescriptor128B(at, 16, 1024), true);
  }
  cuda::WgmmaCommit();
}

template <bool kDeq, Ring kRing, bool kWait1>
__device__ __forceinline__ void Consume(const Args& a, unsigned char* smem, uint64_t* full,
                                        uint64_t* empty) {
  const uint32_t x_base = cuda::SmemAddr(smem);
  float acc[64] = {};
  uint32_t av[2][8][4];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
#pragma unroll
    for (int j = 0; j < 8; ++j) {
#pragma unroll
      for (int m = 0; m < 4; ++m) av[i][j][m] = 0x3F803F80u ^ (threadIdx.x << 3) ^ (j << 1) ^ m;
    }
  }
  auto release = [&](int32_t s) {
    if constexpr (kRing != kNone) {
      __syncwarp();
      if ((threadIdx.x & 31) == 0) cuda::MbarrierArrive(&empty[s % kStages]);
    }
  };
  auto stage = [&](int32_t s, auto slot, auto first) {
    constexpr int kSlot = decltype(slot)::value;
    const int b = s % kStages;
    if constexpr (kRing != kNone) cuda::MbarrierWait(&full[b], (s / kStages) & 1);
    if constexpr (kDeq) Fragments(smem, b, av[kSlot]);
    if constexpr (kWait1) {
      Issue(acc, av[kSlot], x_base + b * kXBytes);
      if constexpr (!decltype(first)::value) {
        cuda::WgmmaWait<1>();
        cuda::KeepOperands(av[1 - kSlot]);
        release(s - 1);
      }
    } else {
      if constexpr (!decltype(first)::value) {
        cuda::WgmmaWait<0>();
        cuda::KeepOperands(av[1 - kSlot]);
        cuda::KeepOperands(acc);
      }
      Issue(acc, av[kSlot], x_base + b * kXBytes);
      if constexpr (!decltype(first)::value) release(s - 1);
    }
  };
  using Zero = std::integral_constant<int, 0>;
  using One = std::integral_constant<int, 1>;
  const long long start = clock64();
  stage(0, Zero{}, std::true_type{});
  int32_t s = 1;
  for (; s + 1 < a.stages; s += 2) {
    stage(s, One{}, std::false_type{});
    stage(s + 1, Zero{}, std::false_type{});
  }
  if (s < a.stages) stage(s, One{}, std::false_type{});
  cuda::WgmmaWait<0>();
  cuda::KeepOperands(av[0]);
  cuda::KeepOperands(av[1]);
  cuda::KeepOperands(acc);
  const long long end = clock64();
  if ((threadIdx.x & 127) == 0) a.cycles[blockIdx.x * 2 + threadIdx.x / 128] = end - start;
  float sum = 0;
#pragma unroll
  for (int i = 0; i < 64; ++i) sum += acc[i];
  if (sum == 1.2345f) a.sink[threadIdx.x] = sum;  // keeps the sums live
}

template <Ring kRing>
__device__ __forceinline__ void Produce(const Args& a, unsigned char* smem, uint64_t* full,
                                        uint64_t* empty) {
  const int64_t block_pool = (int64_t{blockIdx.x} * a.stages * kCodeBytes) % kPoolBytes;
  for (int32_t s = 0; s < a.stages; ++s) {
    const int b = s % kStages;
    if (s >= kStages) cuda::MbarrierWait(&empty[b], ((s / kStages) - 1) & 1);
    if constexpr (kRing == kBarriers) {
      cuda::MbarrierArrive(&full[b]);
    } else {
      cuda::MbarrierArriveExpectTx(&full[b], kCodeBytes + kXBytes);
      const int64_t at = (block_pool + int64_t{s} * kCodeBytes) % kPoolBytes;
      cuda::BulkCopy(smem + kCodesAt + b * kCodeBytes, a.pool + at, kCodeBytes, &full[b]);
      cuda::BulkCopy(smem + b * kXBytes, a.x + (s % kXBuffers) * kXBytes, kXBytes, &full[b]);
    }
  }
}

template <bool kDeq, Ring kRing, bool kWait1>
__global__ void __launch_bounds__(kThreads, 1) StageKernel(const __grid_constant__ Args a) {
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem = reinterpret_cast<unsigned char*>(
      (reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t{1023});
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + kBarsAt);
  uint64_t* empty = full + kStages;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      cuda::MbarrierInit(&full[s], 1);
      cuda::MbarrierInit(&empty[s], 8);
    }
    cuda::FenceMbarrierInit();
  }
  __syncthreads();
  if (threadIdx.x >= 256) {
    cuda::SetMaxRegisters<false, 56>();
    if constexpr (kRing != kNone) {
      if (threadIdx.x == 256) Produce<kRing>(a, smem, full, empty);
    }
  } else {
    cuda::SetMaxRegisters<true, 224>();
    if (threadIdx.x / 128 < a.warpgroups) Consume<kDeq, kRing, kWait1>(a, smem, full, empty);
  }
}

template <bool kDeq, Ring kRing, bool kWait1>
void Run(const char* name, Args a, int blocks, long long* host_cycles) {
  auto kernel = StageKernel<kDeq, kRing, kWait1>;
  CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
  for (int i = 0; i < 3; ++i) kernel<<<blocks, kThreads, kSmemBytes>>>(a);
  CK(cudaGetLastError());
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  constexpr int kReps = 20;
  CK(cudaEventRecord(e0));
  for (int i = 0; i < kReps; ++i) kernel<<<blocks, kThreads, kSmemBytes>>>(a);
  CK(cudaEventRecord(e1));
  CK(cudaEventSynchronize(e1));
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, e0, e1));
  CK(cudaMemcpy(host_cycles, a.cycles, sizeof(long long) * 2 * blocks, cudaMemcpyDeviceToHost));
  double mean = 0;
  for (int i = 0; i < blocks; ++i) {
    for (int w = 0; w < a.warpgroups; ++w) mean += static_cast<double>(host_cycles[2 * i + w]);
  }
  mean /= static_cast<double>(a.warpgroups) * blocks;
  const double us = 1e3 * ms / kReps;
  const double flops = 2.0 * blocks * a.stages * a.warpgroups * 8 * (2.0 * 64 * 128 * 16);
  printf("%-6s %8.1f cycles a stage  %9.1f us a launch  %6.1f TFLOP/s\n", name, mean / a.stages, us,
         flops / (us * 1e-6) / 1e12);
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
}

int main(int argc, char** argv) {
  const int stages = argc > 1 ? atoi(argv[1]) : 256;
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  Args a{};
  unsigned char* pool;
  unsigned char* x;
  CK(cudaMalloc(&pool, kPoolBytes));
  CK(cudaMemset(pool, 0x5A, kPoolBytes));
  CK(cudaMalloc(&x, kXBuffers * kXBytes));
  CK(cudaMemset(x, 0x3C, kXBuffers * kXBytes));
  CK(cudaMalloc(&a.cycles, sizeof(long long) * 2 * sms));
  CK(cudaMalloc(&a.sink, sizeof(float) * kThreads));
  a.pool = pool;
  a.x = x;
  a.stages = stages;
  a.warpgroups = 2;
  std::vector<long long> host(2 * sms);
  printf(
      "%d blocks (one an SM), %d stages a block; the wgmmas alone at the tensor pipe's peak:"
      " 1024 cycles a stage\n",
      sms, stages);
  Run<false, kNone, false>("mma0", a, sms, host.data());
  Run<false, kNone, true>("mma1", a, sms, host.data());
  Run<true, kNone, false>("deq0", a, sms, host.data());
  Run<true, kNone, true>("deq1", a, sms, host.data());
  Run<true, kBarriers, true>("bar1", a, sms, host.data());
  Run<true, kCopies, true>("copy1", a, sms, host.data());
  Run<true, kCopies, false>("copy0", a, sms, host.data());
  Run<false, kCopies, true>("copym", a, sms, host.data());
  a.warpgroups = 1;
  Run<false, kNone, true>("mma1w1", a, sms, host.data());
  return 0;
}
