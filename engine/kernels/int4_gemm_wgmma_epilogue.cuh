// The kWgmma kernel's epilogue (int4_gemm_wgmma.cu alone includes this):
// an output tile's sums through shared memory, so that y is written by a
// short loop of 16-byte stores. The consumers' sums sit in the wgmma
// accumulator layout, two x rows and two W rows apart a thread; written
// from there straight to y, each thread's kN / 2 outputs took as many
// unrolled stores with their row checks, once a tile, and a served 70B
// gate_up at 128 rows spent about a fifth of its consumers' time in that
// code, most of it waiting for its instructions to be fetched (ncu's
// no_inst stalls: bench/results, the 4-bit page). Here:
//   1. every consumer thread waits for all (both warpgroups' wgmmas have
//      read their last x stage; the stage buffers are free),
//   2. a residual add's y chunks are requested into shared memory
//      (cp.async), one 16-byte chunk at a time,
//   3. each thread stores its sums into a [kN][kSumStride] fp32 tile (x
//      row, W row; the padding makes the stores conflict-free),
//   4. and after a second barrier every thread writes chunks of 8
//      consecutive outputs of one x row: the same roundings as before
//      (StoreY's, StoreSiluMul's), so the bytes do not change.
// The direct epilogue stays as LaunchSettings::int4_wgmma_staged_epilogue's
// comparison arm (DirectEpilogue).
#ifndef ONECARD_ENGINE_KERNELS_INT4_GEMM_WGMMA_EPILOGUE_CUH_
#define ONECARD_ENGINE_KERNELS_INT4_GEMM_WGMMA_EPILOGUE_CUH_

#include <cstdint>

#include "engine/kernels/cuda_common.cuh"
#include "engine/kernels/cuda_pipeline.cuh"
#include "engine/kernels/int4_codes.cuh"

namespace onecard::engine::int4_wgmma {

using int4::YKind;

inline constexpr int kEpilogueThreads = 256;  // the consumer warpgroups
inline constexpr int kSumStride = 128 + 4;    // floats a staged x row

// Shared memory the epilogue takes from the block's stage buffers: the sums,
// then a residual's bf16 [kN][128].
template <int kN>
inline constexpr int kEpilogueBytes = kN* kSumStride * 4 + kN * 128 * 2;

// Writes output tile (row group rg, x rows xrow0 ..) of y from the
// consumers' sums v (thread of warp rt, lane 4 gr + t4: x rows
// 8 j + 2 t4 + {0, 1}, W rows 16 rt + gr + {0, 8}); g: the row group's row
// tiles in W. Every consumer thread calls it; `smem`: kEpilogueBytes<kN> of
// free stage buffers (16-byte aligned).
template <int kN, typename Args>
__device__ __forceinline__ void StagedEpilogue(const Args& a, unsigned char* smem, int32_t rg,
                                               int32_t g, int32_t xrow0, const float (&v)[kN / 2]) {
  const int tid = threadIdx.x, rt = tid >> 5, lane = tid & 31, gr = lane >> 2, t4 = lane & 3;
  float* sums = reinterpret_cast<float*>(smem);
  cuda::bf16* residual = reinterpret_cast<cuda::bf16*>(smem + kN * kSumStride * 4);
  const int32_t rows = min(kN, a.rows - xrow0);  // x rows of the tile in y
  const int64_t col0 = int64_t{rg} * 128;        // the tile's first W row
  cuda::NamedBarrier(1, kEpilogueThreads);
  if (a.y_kind == YKind::kBf16Add) {
    const cuda::bf16* y = static_cast<const cuda::bf16*>(a.y);
#pragma unroll 1
    for (int i = tid; i < kN * 16; i += kEpilogueThreads) {
      const int m = i >> 4, c = (i & 15) * 8;
      if (m < rows && c < 16 * g) {
        cuda::CpAsync16(residual + m * 128 + c, y + int64_t{xrow0 + m} * a.n + col0 + c);
      }
    }
  }
#pragma unroll
  for (int j = 0; j < kN / 8; ++j) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      sums[(8 * j + 2 * t4 + (i & 1)) * kSumStride + 16 * rt + gr + 8 * (i >> 1)] = v[4 * j + i];
    }
  }
  cuda::CpAsyncWaitAll();
  cuda::NamedBarrier(1, kEpilogueThreads);
  if (a.y_kind == YKind::kSiluMul) {  // 8 outputs: a row tile's gate rows and then its up rows
    cuda::bf16* y = static_cast<cuda::bf16*>(a.y);
#pragma unroll 1
    for (int i = tid; i < kN * 8; i += kEpilogueThreads) {
      const int m = i >> 3, b = i & 7;
      if (m >= rows || b >= g) continue;
      const float4* s = reinterpret_cast<const float4*>(sums + m * kSumStride + 16 * b);
      const float4 g0 = s[0], g1 = s[1], u0 = s[2], u1 = s[3];
      const float gate[8] = {g0.x, g0.y, g0.z, g0.w, g1.x, g1.y, g1.z, g1.w};
      const float up[8] = {u0.x, u0.y, u0.z, u0.w, u1.x, u1.y, u1.z, u1.w};
      float out[8];
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        const float gv = cuda::RoundTo<cuda::bf16>(gate[e]), uv = cuda::RoundTo<cuda::bf16>(up[e]);
        out[e] = gv / (1.0f + expf(-gv)) * uv;
      }
      *reinterpret_cast<uint4*>(y + int64_t{xrow0 + m} * (a.n / 2) + rg * 64 + 8 * b) =
          cuda::Pack8(out);
    }
    return;
  }
#pragma unroll 1
  for (int i = tid; i < kN * 16; i += kEpilogueThreads) {
    const int m = i >> 4, c = (i & 15) * 8;
    if (m >= rows || c >= 16 * g) continue;
    const float4* s = reinterpret_cast<const float4*>(sums + m * kSumStride + c);
    const float4 s0 = s[0], s1 = s[1];
    float out[8] = {s0.x, s0.y, s0.z, s0.w, s1.x, s1.y, s1.z, s1.w};
    const int64_t o = int64_t{xrow0 + m} * a.n + col0 + c;
    if (a.y_kind == YKind::kF32) {
      float4* y = reinterpret_cast<float4*>(static_cast<float*>(a.y) + o);
      y[0] = s0;
      y[1] = s1;
      continue;
    }
    if (a.y_kind == YKind::kBf16Add) {
      float r[8];
      cuda::Unpack8(*reinterpret_cast<const uint4*>(residual + m * 128 + c), r);
#pragma unroll
      for (int e = 0; e < 8; ++e) out[e] = cuda::RoundTo<cuda::bf16>(out[e]) + r[e];
    }
    *reinterpret_cast<uint4*>(static_cast<cuda::bf16*>(a.y) + o) = cuda::Pack8(out);
  }
}

// LaunchSettings::int4_wgmma_staged_epilogue = false (the comparison arm):
// writes the warp's outputs from its sums v straight from the accumulator
// layout, row tile rt of row group rg, x rows xrow0 + 8 j + 2 t4 + {0, 1}
// (the warps of row tiles past the row group's call nothing). A kBf16Add epilogue reads every value
// of y it adds to before its first store: y's loads and stores may alias,
// so loads between the stores would each wait for an L2 round trip in turn
// (kN / 2 of them a thread).
template <int kN, typename Args>
__device__ __forceinline__ void DirectEpilogue(const Args& a, int32_t rg, int32_t rt, int32_t xrow0,
                                               const float (&v)[kN / 2]) {
  const int lane = threadIdx.x & 31, gr = lane >> 2, t4 = lane & 3;
  const int64_t tile = int64_t{rg} * 8 + rt;
  auto out = [&](int j, int e, int half) {
    return int64_t{xrow0 + 8 * j + 2 * t4 + e} * a.n + tile * 16 + gr + 8 * half;
  };
  if (a.y_kind == YKind::kBf16Add) {
    cuda::bf16* y = static_cast<cuda::bf16*>(a.y);
    float residual[kN / 2];
#pragma unroll
    for (int j = 0; j < kN / 8; ++j) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int e = i & 1, half = i >> 1;
        residual[4 * j + i] =
            xrow0 + 8 * j + 2 * t4 + e < a.rows ? __bfloat162float(y[out(j, e, half)]) : 0.0f;
      }
    }
#pragma unroll
    for (int j = 0; j < kN / 8; ++j) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int e = i & 1, half = i >> 1;
        if (xrow0 + 8 * j + 2 * t4 + e >= a.rows) continue;
        y[out(j, e, half)] =
            __float2bfloat16_rn(cuda::RoundTo<cuda::bf16>(v[4 * j + i]) + residual[4 * j + i]);
      }
    }
    return;
  }
#pragma unroll
  for (int j = 0; j < kN / 8; ++j) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int32_t m = xrow0 + 8 * j + 2 * t4 + e;
      if (m >= a.rows) continue;
      if (a.y_kind == YKind::kSiluMul) {
        int4::StoreSiluMul(a, m, tile * 8 + gr, v[4 * j + e], v[4 * j + e + 2]);
        continue;
      }
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        int4::StoreY(a, out(j, e, half), v[4 * j + e + 2 * half]);
      }
    }
  }
}

}  // namespace onecard::engine::int4_wgmma

#endif  // ONECARD_ENGINE_KERNELS_INT4_GEMM_WGMMA_EPILOGUE_CUH_
