// Gemv with FP8 E4M3 weights (see gemv.h), the BF16 kernel's design
// (gemv.cu) with one-byte weights:
// - each lane keeps kUnroll 16-byte loads of 16 codes in flight (a warp 4096
//   codes: a whole row of an 8B's 4096-wide projections in one round), and
//   issues the next chunk's loads before it widens and sums this chunk's;
// - codes widen exactly, two at a time, E4M3 -> f16x2 (cvt.rn.f16x2.e4m3x2)
//   -> fp32, and meet x' (BF16 in shared memory) in fp32 FMAs;
// - kRow: the lanes' sums of a row times its scale, once, after the warp
//   sum; kBlock128: each 16-code load's dot times its block's scale (a lane's
//   16 codes never straddle a 128-column block).
// Tested by tests/gpu/gemv_test.cc against GemvRef.
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "engine/kernels/cuda_check.h"
#include "engine/kernels/gemv_internal.cuh"
#include "engine/kernels/launch_settings.h"

namespace onecard::engine::gemv_internal {
namespace {

constexpr int kUnroll = 8;  // 16-byte loads (16 codes) in flight per lane

// Sixteen E4M3 codes in 16 bytes, widened to fp32 (exact).
__device__ __forceinline__ void Unpack16(const uint4& v, float* out) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 lo = __half22float2(__half2(
        __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(w[i] & 0xffffu), __NV_E4M3)));
    const float2 hi = __half22float2(__half2(
        __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(w[i] >> 16), __NV_E4M3)));
    out[4 * i] = lo.x;
    out[4 * i + 1] = lo.y;
    out[4 * i + 2] = hi.x;
    out[4 * i + 3] = hi.y;
  }
}

// acc[m] += the loads' dots with x' (kBlock: each times its block's scale;
// `block_scales` is the row's 128-row band of scales).
template <int M, bool kBlock>
__device__ __forceinline__ void Accumulate(const uint4* wv, const uint4* xs, int base, int kvec,
                                           int lane, const float* block_scales, float* acc) {
  const int wvec = kvec / 2;
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const int idx = base + u * 32 + lane;
    if (idx < wvec) {
      float wf[16];
      Unpack16(wv[u], wf);
      float scale = 1.0f;
      if constexpr (kBlock) scale = __ldg(block_scales + (idx >> 3));
#pragma unroll
      for (int m = 0; m < M; ++m) {
        float xf[16];
        cuda::Unpack8(xs[m * kvec + 2 * idx], xf);
        cuda::Unpack8(xs[m * kvec + 2 * idx + 1], xf + 8);
        if constexpr (kBlock) {
          float dot = 0.0f;
#pragma unroll
          for (int e = 0; e < 16; ++e) dot = fmaf(wf[e], xf[e], dot);
          acc[m] = fmaf(scale, dot, acc[m]);
        } else {
#pragma unroll
          for (int e = 0; e < 16; ++e) acc[m] = fmaf(wf[e], xf[e], acc[m]);
        }
      }
    }
  }
}

template <int M, GemvPrologue P, Out kOut, bool kBlock>
__global__ void __launch_bounds__(kThreads, 2) GemvFp8Kernel(GemvArgs a) {
  constexpr int kParts = kOut == Out::kSiluMul ? 2 : 1;
  extern __shared__ uint4 xs[];  // [M][kvec]
  __shared__ float scratch[32];
  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  const int wvec = a.kvec / 2;
  const int64_t total_warps = static_cast<int64_t>(gridDim.x) * kWarps;
  const auto row_of = [&](int64_t j, int part) { return j + part * a.n; };
  int64_t j = static_cast<int64_t>(blockIdx.x) * kWarps + warp;  // output
  int part = 0;
  int base = 0;
  uint4 wv[kUnroll];
  if (j < a.n) LoadChunk<kUnroll>(wv, a.w + row_of(j, 0) * wvec, 0, wvec, lane);  // before the wait
  cuda::PdlEnter(a.early_dependents);  // x and y come from the previous kernel
  StageX<M, P>(a, xs, scratch);
  __syncthreads();
  float acc[M], gate[M];
#pragma unroll
  for (int m = 0; m < M; ++m) acc[m] = gate[m] = 0.0f;
  while (j < a.n) {
    const Chunk next = NextChunk<kParts>({j, part, base}, 32 * kUnroll, wvec, total_warps);
    // The next loads are in flight while this chunk's codes are widened and
    // summed.
    uint4 next_wv[kUnroll];
    if (next.j < a.n) {
      LoadChunk<kUnroll>(next_wv, a.w + row_of(next.j, next.part) * wvec, next.base, wvec, lane);
    }
    const int64_t row = row_of(j, part);
    Accumulate<M, kBlock>(wv, xs, base, a.kvec, lane, a.scales + (row / kFp8Block) * a.scale_blocks,
                          acc);
    if (next.base == 0) {  // a weight row is done
      const float scale = kBlock ? 1.0f : __ldg(a.scales + row);
      if (part + 1 < kParts) {
#pragma unroll
        for (int m = 0; m < M; ++m) {
          gate[m] = cuda::WarpSum(acc[m]) * scale;
          acc[m] = 0.0f;
        }
      } else {
        Finish<M, kOut>(a, acc, gate, j, lane, scale);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) wv[u] = next_wv[u];
    j = next.j;
    part = next.part;
    base = next.base;
  }
}

template <int M, GemvPrologue P, Out kOut, bool kBlock>
absl::Status Launch(const GemvArgs& a, cudaStream_t stream) {
  static const absl::Status allowed = [] {
    CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(GemvFp8Kernel<M, P, kOut, kBlock>,
                                              cudaFuncAttributeMaxDynamicSharedMemorySize,
                                              kMaxSmemBytes));
    return absl::OkStatus();
  }();
  RETURN_IF_ERROR(allowed);
  const int smem = M * a.kvec * 16;
  CUDA_RETURN_IF_ERROR(cuda::LaunchPdl(GemvFp8Kernel<M, P, kOut, kBlock>,
                                       dim3(static_cast<int>(GridBlocks(a.n, smem))),
                                       dim3(kThreads), smem, stream, a));
  return absl::OkStatus();
}

template <int M, GemvPrologue P, bool kBlock>
absl::Status LaunchOut(const GemvParams& p, const GemvArgs& a, cudaStream_t stream) {
  if (p.y_dtype == DType::kF32) return Launch<M, P, Out::kF32, kBlock>(a, stream);
  if (p.silu_mul_y) return Launch<M, P, Out::kSiluMul, kBlock>(a, stream);
  if (p.add_to_y) return Launch<M, P, Out::kBf16Add, kBlock>(a, stream);
  return Launch<M, P, Out::kBf16, kBlock>(a, stream);
}

template <GemvPrologue P, bool kBlock>
absl::Status LaunchRows(const GemvParams& p, const GemvArgs& a, cudaStream_t stream) {
  switch (p.num_rows) {
    case 1:
      return LaunchOut<1, P, kBlock>(p, a, stream);
    case 2:
      return LaunchOut<2, P, kBlock>(p, a, stream);
    case 3:
      return LaunchOut<3, P, kBlock>(p, a, stream);
    default:
      return LaunchOut<4, P, kBlock>(p, a, stream);
  }
}

template <bool kBlock>
absl::Status LaunchPrologue(const GemvParams& p, const GemvArgs& a, cudaStream_t stream) {
  switch (p.prologue) {
    case GemvPrologue::kRmsNorm:
      return LaunchRows<GemvPrologue::kRmsNorm, kBlock>(p, a, stream);
    case GemvPrologue::kSiluMul:
      return LaunchRows<GemvPrologue::kSiluMul, kBlock>(p, a, stream);
    default:
      return LaunchRows<GemvPrologue::kNone, kBlock>(p, a, stream);
  }
}

}  // namespace

absl::Status GemvFp8(const GemvParams& p, cudaStream_t stream) {
  GemvArgs a;
  a.x = static_cast<const cuda::bf16*>(p.x);
  a.x_row_stride = p.x_row_stride;
  a.norm_weight = static_cast<const uint4*>(p.norm_weight);
  a.eps = p.eps;
  a.w = static_cast<const uint4*>(p.w);
  a.scales = p.w_scales;
  a.y = p.y;
  a.n = p.n;
  a.kvec = static_cast<int32_t>(p.k / 8);
  a.scale_blocks = static_cast<int32_t>(cuda::CeilDiv(p.k, kFp8Block));
  a.early_dependents = GetLaunchSettings().gemv_early_dependents;
  if (p.w_scales_kind == Fp8Scales::kBlock128) return LaunchPrologue<true>(p, a, stream);
  return LaunchPrologue<false>(p, a, stream);
}

}  // namespace onecard::engine::gemv_internal
