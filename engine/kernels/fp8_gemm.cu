// Fp8Gemm on CUDA (see fp8_gemm.h), launches on the stream:
//   QuantizeRowsKernel: a block a row of x; 16-byte loads, the row's amax
//     (BlockMax; with norm_weight the row's RMSNorm first, with silu_mul_x
//     SiLU(gate) * up, each computed again for the codes), then the codes (Fp8ActivationCode:
//     fp8.h's FloatToE4m3, so the codes are the reference's bit for bit) 8 a store, and the scale;
//   then, from LaunchSettings::fp8_gemm_scaled_min_rows rows with
//   LaunchSettings::fp8_gemm_cublas_scales where cuBLASLt has the
//   algorithm: Fp8Matmul::Run's scaled form, both scales and the BF16
//   output (and the residual, beta 1) inside cuBLASLt's product, SiluMul
//   after it for silu_mul_y (its BF16 gate/up in the workspace's sums);
//   otherwise: Fp8Matmul::Run into fp32 sums, then
//   EpilogueKernel<kind>: a thread an output, the two scales and the
//     epilogue's roundings (coalesced over the sums' rows and y's).
// Tested by tests/gpu/fp8_gemm_test.cc.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "engine/kernels/cuda_check.h"
#include "engine/kernels/cuda_common.cuh"
#include "engine/kernels/fp8_gemm.h"
#include "engine/kernels/fp8_matmul.h"
#include "engine/kernels/launch_settings.h"
#include "engine/kernels/silu_mul.h"

namespace onecard::engine {
namespace {

constexpr int kQuantizeThreads = 256;
constexpr int kEpilogueThreads = 256;
constexpr int kMaxGridY = 65535;

enum class YKind { kBf16, kBf16Add, kSiluMul, kF32 };

struct QuantizeArgs {
  const cuda::bf16* x;
  int64_t x_row_stride;
  int64_t k;
  const cuda::bf16* norm_w;  // kNorm
  float eps;
  uint8_t* codes;
  float* scales;
};

// What the activations are made of: x itself, its RMSNorm, SiLU(gate) * up.
enum class XKind { kPlain, kNorm, kSiluMul };

// Eight activations from vector i of the row: x's, with kNorm
// bf16(w * (x * inv_rms)) as RmsNorm rounds them, with kSiluMul
// bf16(silu(gate) * up) as SiluMul does (the up half k / 8 vectors on).
template <XKind kX>
__device__ __forceinline__ void Activations(const QuantizeArgs& a, const uint4* row, int64_t i,
                                            float inv_rms, float (&v)[8]) {
  cuda::Unpack8(row[i], v);
  if constexpr (kX == XKind::kNorm) {
    float w[8];
    cuda::Unpack8(reinterpret_cast<const uint4*>(a.norm_w)[i], w);
#pragma unroll
    for (int e = 0; e < 8; ++e) v[e] = cuda::RoundTo<cuda::bf16>(w[e] * (v[e] * inv_rms));
  } else if constexpr (kX == XKind::kSiluMul) {
    float u[8];
    cuda::Unpack8(row[a.k / 8 + i], u);
#pragma unroll
    for (int e = 0; e < 8; ++e)
      v[e] = cuda::RoundTo<cuda::bf16>(v[e] / (1.0f + expf(-v[e])) * u[e]);
  }
}

template <XKind kX>
__global__ void QuantizeRowsKernel(QuantizeArgs a) {
  __shared__ float scratch[32];
  const int64_t m = blockIdx.x;
  const uint4* row = reinterpret_cast<const uint4*>(a.x + m * a.x_row_stride);
  const int64_t vectors = a.k / 8;
  float inv_rms = 1.0f;
  if constexpr (kX == XKind::kNorm) {  // rms_norm.cu's: fp32 mean of squares, rsqrtf
    float sum_sq = 0.0f;
    for (int64_t i = threadIdx.x; i < vectors; i += kQuantizeThreads) {
      float v[8];
      cuda::Unpack8(row[i], v);
#pragma unroll
      for (int e = 0; e < 8; ++e) sum_sq += v[e] * v[e];
    }
    inv_rms = rsqrtf(cuda::BlockSum(sum_sq, scratch) / static_cast<float>(a.k) + a.eps);
  }
  float amax = 0.0f;
  for (int64_t i = threadIdx.x; i < vectors; i += kQuantizeThreads) {
    float v[8];
    Activations<kX>(a, row, i, inv_rms, v);
#pragma unroll
    for (int e = 0; e < 8; ++e) amax = fmaxf(amax, fabsf(v[e]));
  }
  const float scale = Fp8ActivationScale(cuda::BlockMax(amax, scratch));
  if (threadIdx.x == 0) a.scales[m] = scale;
  uint2* out = reinterpret_cast<uint2*>(a.codes + m * a.k);
  for (int64_t i = threadIdx.x; i < vectors; i += kQuantizeThreads) {
    float v[8];
    Activations<kX>(a, row, i, inv_rms, v);
    uint32_t words[2] = {0, 0};
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      words[e / 4] |= uint32_t{Fp8ActivationCode(v[e], scale)} << (8 * (e % 4));
    }
    out[i] = make_uint2(words[0], words[1]);
  }
}

struct EpilogueArgs {
  const float* acc;  // [rows, acc_row_stride]
  int64_t acc_row_stride;
  const float* x_scales;  // [rows]
  const float* w_scales;  // [n]
  void* y;                // [rows, cols]
  int64_t n;
  int64_t cols;  // outputs a row: n, or n / 2 for kSiluMul
  int32_t rows;
};

__device__ __forceinline__ float Silu(float g) { return g / (1.0f + expf(-g)); }

// (acc * x_scale) * w_scale, the reference's order; no contraction to form.
__device__ __forceinline__ float Scaled(const EpilogueArgs& a, int64_t m, int64_t j) {
  return __fmul_rn(__fmul_rn(a.acc[m * a.acc_row_stride + j], a.x_scales[m]), a.w_scales[j]);
}

template <YKind kKind>
__global__ void EpilogueKernel(EpilogueArgs a) {
  const int64_t j = blockIdx.x * int64_t{kEpilogueThreads} + threadIdx.x;
  if (j >= a.cols) return;
  for (int64_t m = blockIdx.y; m < a.rows; m += gridDim.y) {
    const int64_t o = m * a.cols + j;
    if constexpr (kKind == YKind::kF32) {
      static_cast<float*>(a.y)[o] = Scaled(a, m, j);
    } else if constexpr (kKind == YKind::kBf16) {
      static_cast<cuda::bf16*>(a.y)[o] = __float2bfloat16_rn(Scaled(a, m, j));
    } else if constexpr (kKind == YKind::kBf16Add) {
      cuda::bf16* y = static_cast<cuda::bf16*>(a.y);
      y[o] =
          __float2bfloat16_rn(cuda::RoundTo<cuda::bf16>(Scaled(a, m, j)) + __bfloat162float(y[o]));
    } else {  // kSiluMul: gate j and up j, n / 2 rows of W apart
      const float g = cuda::RoundTo<cuda::bf16>(Scaled(a, m, j));
      const float u = cuda::RoundTo<cuda::bf16>(Scaled(a, m, a.cols + j));
      static_cast<cuda::bf16*>(a.y)[o] = __float2bfloat16_rn(Silu(g) * u);
    }
  }
}

template <YKind kKind>
absl::Status LaunchEpilogue(const EpilogueArgs& a, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(cuda::CeilDiv(a.cols, kEpilogueThreads)),
                  static_cast<unsigned>(std::min(a.rows, kMaxGridY)));
  EpilogueKernel<kKind><<<grid, kEpilogueThreads, 0, stream>>>(a);
  CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// The CUDA version's own checks (beyond CheckFp8GemmParams): alignment and
// the workspace.
absl::Status CheckCudaParams(const Fp8GemmParams& p, const Fp8GemmWorkspaceLayout& ws) {
  if (!Aligned16(p.w.codes) || !Aligned16(p.x) || !Aligned16(p.norm_weight)) {
    return absl::InvalidArgumentError(
        "Fp8Gemm: w.codes, x and norm_weight must be 16-byte aligned");
  }
  if (p.workspace == nullptr || p.workspace_bytes < ws.total_bytes ||
      reinterpret_cast<uintptr_t>(p.workspace) % 256 != 0) {
    return absl::InvalidArgumentError(cuda::Cat(
        "Fp8Gemm: workspace of ", p.workspace_bytes, " bytes; rows = ", p.rows, ", n = ", p.w.n,
        ", k = ", p.w.k, " need ", ws.total_bytes, ", 256-byte aligned (Fp8GemmWorkspaceBytes)"));
  }
  return absl::OkStatus();
}

Fp8MatmulArgs MatmulArgs(const Fp8GemmParams& p, const Fp8GemmWorkspaceLayout& ws) {
  char* base = static_cast<char*>(p.workspace);
  return {.x = base == nullptr ? nullptr : base + ws.codes_offset,
          .w = p.w.codes,
          .acc = base == nullptr ? nullptr : reinterpret_cast<float*>(base + ws.acc_offset),
          .m = p.rows,
          .n = p.w.n,
          .k = p.w.k,
          .acc_row_stride = ws.acc_row_stride};
}

// The product in cuBLASLt's scaled form: straight into y, or, for
// silu_mul_y, into BF16 gate/up in the workspace's sums (rows x n x 2 bytes
// of their rows x acc_row_stride x 4).
Fp8MatmulArgs ScaledArgs(const Fp8GemmParams& p, const Fp8GemmWorkspaceLayout& ws) {
  char* base = static_cast<char*>(p.workspace);
  Fp8MatmulArgs a = MatmulArgs(p, ws);
  a.acc = nullptr;
  a.scaled = true;
  a.x_scales = base == nullptr ? nullptr : reinterpret_cast<const float*>(base + ws.scales_offset);
  a.w_scales = p.w.scales;
  a.out = p.silu_mul_y ? (base == nullptr ? nullptr : base + ws.acc_offset) : p.y;
  a.out_row_stride = p.w.n;
  a.accumulate = p.add_to_y;
  return a;
}

bool WantsScaled(const Fp8GemmParams& p) {
  const LaunchSettings s = GetLaunchSettings();
  return p.y_dtype == DType::kBF16 && p.rows >= s.fp8_gemm_scaled_min_rows &&
         s.fp8_gemm_cublas_scales;
}

// Whether the scaled form serves p (planning it once): false when the
// setting is off, y is fp32 or cuBLASLt has no such algorithm here.
absl::StatusOr<bool> TakeScaled(Fp8Matmul& matmul, const Fp8GemmParams& p,
                                const Fp8GemmWorkspaceLayout& ws) {
  if (!WantsScaled(p)) return false;
  const absl::Status st = matmul.Prepare(ScaledArgs(p, ws));
  if (st.ok()) return true;
  if (st.code() == absl::StatusCode::kUnimplemented) return false;
  return st;
}

}  // namespace

absl::StatusOr<bool> Fp8GemmUsesCublasScales(Fp8Matmul& matmul, const Fp8GemmParams& p) {
  Fp8GemmParams shape = p;  // only the shape matters here
  shape.workspace = nullptr;
  return TakeScaled(matmul, shape, Fp8GemmWorkspace(p.rows, p.w.n, p.w.k));
}

absl::Status PrepareFp8Gemm(Fp8Matmul& matmul, const Fp8GemmParams& p) {
  Fp8GemmParams shape = p;  // only the shape matters here
  shape.workspace = nullptr;
  const Fp8GemmWorkspaceLayout ws = Fp8GemmWorkspace(p.rows, p.w.n, p.w.k);
  ASSIGN_OR_RETURN(const bool scaled, TakeScaled(matmul, shape, ws));
  return scaled ? absl::OkStatus() : matmul.Prepare(MatmulArgs(shape, ws));
}

absl::Status Fp8Gemm(Fp8Matmul& matmul, const Fp8GemmParams& p, cudaStream_t stream) {
  RETURN_IF_ERROR(CheckFp8GemmParams(p, "Fp8Gemm"));
  const Fp8GemmWorkspaceLayout ws = Fp8GemmWorkspace(p.rows, p.w.n, p.w.k);
  RETURN_IF_ERROR(CheckCudaParams(p, ws));
  char* base = static_cast<char*>(p.workspace);
  auto* codes = reinterpret_cast<uint8_t*>(base + ws.codes_offset);
  auto* x_scales = reinterpret_cast<float*>(base + ws.scales_offset);
  const QuantizeArgs q{.x = static_cast<const cuda::bf16*>(p.x),
                       .x_row_stride = p.x_row_stride,
                       .k = p.w.k,
                       .norm_w = static_cast<const cuda::bf16*>(p.norm_weight),
                       .eps = p.eps,
                       .codes = codes,
                       .scales = x_scales};
  const auto quantize = p.norm_weight != nullptr ? QuantizeRowsKernel<XKind::kNorm>
                        : p.silu_mul_x           ? QuantizeRowsKernel<XKind::kSiluMul>
                                                 : QuantizeRowsKernel<XKind::kPlain>;
  quantize<<<static_cast<unsigned>(p.rows), kQuantizeThreads, 0, stream>>>(q);
  CUDA_RETURN_IF_ERROR(cudaGetLastError());
  // During graph capture nothing is planned: a shape PrepareFp8Gemm found no
  // scaled algorithm for has its fp32 form prepared, and an unprepared one
  // is refused by Fp8Matmul::Run.
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  CUDA_RETURN_IF_ERROR(cudaStreamIsCapturing(stream, &capture));
  bool scaled = false;
  if (capture == cudaStreamCaptureStatusNone) {
    ASSIGN_OR_RETURN(scaled, TakeScaled(matmul, p, ws));
  } else {
    scaled = WantsScaled(p) && matmul.Prepared(ScaledArgs(p, ws));
  }
  if (scaled) {
    const Fp8MatmulArgs s = ScaledArgs(p, ws);
    RETURN_IF_ERROR(matmul.Run(s, stream));
    if (!p.silu_mul_y) return absl::OkStatus();
    return SiluMul({.dtype = DType::kBF16,
                    .gate_up = s.out,
                    .out = p.y,
                    .num_tokens = p.rows,
                    .inter = p.w.n / 2},
                   stream);
  }
  const Fp8MatmulArgs mm = MatmulArgs(p, ws);
  RETURN_IF_ERROR(matmul.Run(mm, stream));
  const EpilogueArgs a{.acc = mm.acc,
                       .acc_row_stride = ws.acc_row_stride,
                       .x_scales = x_scales,
                       .w_scales = p.w.scales,
                       .y = p.y,
                       .n = p.w.n,
                       .cols = p.silu_mul_y ? p.w.n / 2 : p.w.n,
                       .rows = p.rows};
  if (p.y_dtype == DType::kF32) return LaunchEpilogue<YKind::kF32>(a, stream);
  if (p.silu_mul_y) return LaunchEpilogue<YKind::kSiluMul>(a, stream);
  if (p.add_to_y) return LaunchEpilogue<YKind::kBf16Add>(a, stream);
  return LaunchEpilogue<YKind::kBf16>(a, stream);
}

}  // namespace onecard::engine
