// Gemv on CUDA (see gemv.h). Design for the HBM floor at decode:
// - a persistent grid (SMs x resident blocks); warp w of the grid takes
//   weight rows w, w + W, ... so every SM streams until the end (no tail wave);
// - each lane holds kUnroll 16-byte weight loads in flight (ld.global.nc,
//   no L1 allocation), and the next row's loads are issued before the
//   current row's warp reduction;
// - the first row's loads are issued before x' is staged in shared memory,
//   so the prologue (norm / SiLU) hides under the first HBM round trip; a
//   plain x is staged with cp.async (one L2 round trip, no registers);
// - silu_mul_y: a warp takes output j as two rows, gate j then up j, and
//   writes silu(gate) * up, so the down projection reads a ready activation;
// - blocks per SM: 2 by default; LaunchSettings::gemv_blocks_per_sm = 1 leaves half of
//   each SM to the next kernel, whose first weight loads then start early;
// - launched with programmatic dependent launch: those first weight loads are
//   issued before griddepcontrol.wait, while the previous kernel finishes;
//   the next kernel's launch is let go after the wait, or before it with
//   LaunchSettings::gemv_early_dependents (cuda::PdlEnter).
// Accumulation is fp32; see gemv.h for the rounding points.
// Tested by tests/gpu/gemv_test.cc against GemvRef.
#include <algorithm>
#include <cstdlib>

#include "engine/kernels/cuda_check.h"
#include "engine/kernels/cuda_common.cuh"
#include "engine/kernels/cuda_ptx.cuh"
#include "engine/kernels/gemv.h"
#include "engine/kernels/gemv_internal.cuh"
#include "engine/kernels/launch_settings.h"

namespace onecard::engine {
namespace gemv_internal {

int NumSms() {
  static const int sms = [] {
    int device = 0, count = 0;
    if (cudaGetDevice(&device) != cudaSuccess) return 132;
    if (cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
      return 132;
    }
    return count;
  }();
  return sms;
}

// LaunchSettings::gemv_blocks_per_sm: 2, or 1 in a comparison.
int64_t GridBlocks(int64_t n, int smem) {
  const int per_sm =
      std::clamp((227 * 1024) / (smem + 2048), 1, GetLaunchSettings().gemv_blocks_per_sm);
  return std::min<int64_t>(cuda::CeilDiv(n, kWarps), static_cast<int64_t>(NumSms()) * per_sm);
}

}  // namespace gemv_internal

namespace {

using namespace gemv_internal;  // NOLINT(build/namespaces): the kernel's own parts

constexpr int kUnroll = 16;  // 16-byte loads in flight per lane

template <int M>
__device__ __forceinline__ void Accumulate(const uint4* wv, const uint4* xs, int base, int kvec,
                                           int lane, float* acc) {
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const int idx = base + u * 32 + lane;
    if (idx < kvec) {
      float wf[8];
      cuda::Unpack8(wv[u], wf);
#pragma unroll
      for (int m = 0; m < M; ++m) {
        float xf[8];
        cuda::Unpack8(xs[m * kvec + idx], xf);
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[m] = fmaf(wf[e], xf[e], acc[m]);
      }
    }
  }
}

// Output j reads weight rows j (and, for kSiluMul, then n + j): `part`.
__device__ __forceinline__ const uint4* RowOf(const GemvArgs& a, int64_t j, int part) {
  return a.w + (j + part * a.n) * a.kvec;
}

template <int M, GemvPrologue P, Out kOut>
__global__ void __launch_bounds__(kThreads, 2) GemvKernel(GemvArgs a) {
  constexpr int kParts = kOut == Out::kSiluMul ? 2 : 1;
  extern __shared__ uint4 xs[];  // [M][kvec]
  __shared__ float scratch[32];
  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  const int64_t total_warps = static_cast<int64_t>(gridDim.x) * kWarps;
  int64_t j = static_cast<int64_t>(blockIdx.x) * kWarps + warp;  // output
  int part = 0;
  int base = 0;
  uint4 wv[kUnroll];
  if (j < a.n) LoadChunk<kUnroll>(wv, RowOf(a, j, 0), 0, a.kvec, lane);  // weights: before the wait
  cuda::PdlEnter(a.early_dependents);  // x and y come from the previous kernel
  StageX<M, P>(a, xs, scratch);
  __syncthreads();
  float acc[M], gate[M];
#pragma unroll
  for (int m = 0; m < M; ++m) acc[m] = gate[m] = 0.0f;
  while (j < a.n) {
    Accumulate<M>(wv, xs, base, a.kvec, lane, acc);
    const Chunk next = NextChunk<kParts>({j, part, base}, 32 * kUnroll, a.kvec, total_warps);
    if (next.j < a.n) LoadChunk<kUnroll>(wv, RowOf(a, next.j, next.part), next.base, a.kvec, lane);
    if (next.base == 0) {  // a weight row is done
      if (part + 1 < kParts) {
#pragma unroll
        for (int m = 0; m < M; ++m) {
          gate[m] = cuda::WarpSum(acc[m]);
          acc[m] = 0.0f;
        }
      } else {
        Finish<M, kOut>(a, acc, gate, j, lane, 1.0f);
      }
    }
    j = next.j;
    part = next.part;
    base = next.base;
  }
}

template <int M, GemvPrologue P, Out kOut>
absl::Status Launch(const GemvArgs& a, cudaStream_t stream) {
  static const absl::Status allowed = [] {
    CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(
        GemvKernel<M, P, kOut>, cudaFuncAttributeMaxDynamicSharedMemorySize, kMaxSmemBytes));
    return absl::OkStatus();
  }();
  RETURN_IF_ERROR(allowed);
  const int smem = M * a.kvec * 16;
  const int64_t blocks = GridBlocks(a.n, smem);
  CUDA_RETURN_IF_ERROR(cuda::LaunchPdl(GemvKernel<M, P, kOut>, dim3(static_cast<int>(blocks)),
                                       dim3(kThreads), smem, stream, a));
  return absl::OkStatus();
}

template <int M, GemvPrologue P>
absl::Status LaunchOut(const GemvParams& p, const GemvArgs& a, cudaStream_t stream) {
  if (p.y_dtype == DType::kF32) return Launch<M, P, Out::kF32>(a, stream);
  if (p.silu_mul_y) return Launch<M, P, Out::kSiluMul>(a, stream);
  if (p.add_to_y) return Launch<M, P, Out::kBf16Add>(a, stream);
  return Launch<M, P, Out::kBf16>(a, stream);
}

template <GemvPrologue P>
absl::Status LaunchRows(const GemvParams& p, const GemvArgs& a, cudaStream_t stream) {
  switch (p.num_rows) {
    case 1:
      return LaunchOut<1, P>(p, a, stream);
    case 2:
      return LaunchOut<2, P>(p, a, stream);
    case 3:
      return LaunchOut<3, P>(p, a, stream);
    default:
      return LaunchOut<4, P>(p, a, stream);
  }
}

absl::Status Validate(const GemvParams& p) {
  constexpr char kOp[] = "Gemv";
  if (p.num_rows < 1 || p.num_rows > kGemvMaxRows || p.n <= 0 || p.k <= 0 || p.k % 8 != 0 ||
      p.x_row_stride % 8 != 0 || p.num_rows * p.k > kGemvMaxRowValues ||
      (p.w_dtype == DType::kF8E4M3 && p.k % 16 != 0)) {
    return absl::UnimplementedError(cuda::Cat(
        kOp, ": num_rows=", p.num_rows, " n=", p.n, " k=", p.k, " x_row_stride=", p.x_row_stride,
        " not supported; supported: 1 <= num_rows <= ", kGemvMaxRows,
        ", k and x_row_stride multiples of 8 (FP8 weights: k of 16), num_rows * k <= ",
        kGemvMaxRowValues));
  }
  const int64_t min_stride = p.prologue == GemvPrologue::kSiluMul ? 2 * p.k : p.k;
  if (p.x_row_stride < min_stride) {
    return absl::InvalidArgumentError(
        cuda::Cat(kOp, ": x_row_stride ", p.x_row_stride, " < ", min_stride));
  }
  if (p.y_dtype != DType::kBF16 && p.y_dtype != DType::kF32) {
    return cuda::Unsupported(kOp, p.y_dtype, "y BF16, F32");
  }
  if (p.add_to_y && p.y_dtype != DType::kBF16) {
    return absl::InvalidArgumentError(cuda::Cat(kOp, ": add_to_y needs a BF16 y"));
  }
  if (p.silu_mul_y && (p.y_dtype != DType::kBF16 || p.add_to_y)) {
    return absl::InvalidArgumentError(
        cuda::Cat(kOp, ": silu_mul_y needs a BF16 y and no add_to_y"));
  }
  if (p.w_dtype != DType::kBF16 && p.w_dtype != DType::kF8E4M3) {
    return cuda::Unsupported(kOp, p.w_dtype, "w BF16, F8_E4M3");
  }
  if (p.w_dtype == DType::kF8E4M3 && p.w_scales == nullptr) {
    return absl::InvalidArgumentError(cuda::Cat(kOp, ": w_scales is null (FP8 weights)"));
  }
  if (p.prologue == GemvPrologue::kRmsNorm && p.norm_weight == nullptr) {
    return absl::InvalidArgumentError(cuda::Cat(kOp, ": norm_weight is null"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Gemv(const GemvParams& p, cudaStream_t stream) {
  RETURN_IF_ERROR(Validate(p));
  if (p.w_dtype == DType::kF8E4M3) return GemvFp8(p, stream);
  GemvArgs a;
  a.x = static_cast<const cuda::bf16*>(p.x);
  a.x_row_stride = p.x_row_stride;
  a.norm_weight = static_cast<const uint4*>(p.norm_weight);
  a.eps = p.eps;
  a.w = static_cast<const uint4*>(p.w);
  a.y = p.y;
  a.n = p.n;
  a.scales = nullptr;
  a.kvec = static_cast<int32_t>(p.k / 8);
  a.scale_blocks = 0;
  a.early_dependents = GetLaunchSettings().gemv_early_dependents;
  switch (p.prologue) {
    case GemvPrologue::kRmsNorm:
      return LaunchRows<GemvPrologue::kRmsNorm>(p, a, stream);
    case GemvPrologue::kSiluMul:
      return LaunchRows<GemvPrologue::kSiluMul>(p, a, stream);
    default:
      return LaunchRows<GemvPrologue::kNone>(p, a, stream);
  }
}

}  // namespace onecard::engine
