// Fp8Gemm: y = x W^T for BF16 activations x and an FP8 E4M3 weight with one
// scale a row (fp8_weight.h, kRow), through FP8 tensor cores (W8A8): the
// CUDA runner's steps of more rows than the FP8 GEMV takes (prefill, large
// batches). Three stages:
//   1. activations, per row (per token), dynamically (of RmsNorm(x) with
//      norm_weight, of SiLU(gate) * up with silu_mul_x: below):
//        amax     = max_c |x[m][c]|
//        x_scale  = Fp8ActivationScale(amax) = amax / 448 (IEEE fp32 division;
//                   1 for an all-zero row)
//        code[c]  = FloatToE4m3(x[m][c] / x_scale) (IEEE division, then
//                   round to nearest even, saturating at +-448: fp8.h)
//   2. acc[m][j] = sum_c E4m3ToFloat(code[m][c]) * E4m3ToFloat(W code[j][c]),
//      in fp32 (Fp8Matmul, fp8_matmul.h: cuBLASLt)
//   3. v = (acc[m][j] * x_scale[m]) * w_scale[j] in fp32, with the GEMV's
//      epilogues (gemv.h) rounding where they do (the CUDA version, from
//      LaunchSettings::fp8_gemm_scaled_min_rows rows of BF16 y with
//      LaunchSettings::fp8_gemm_cublas_scales, where cuBLASLt has the
//      algorithm, forms v inside cuBLASLt's product in its own order and
//      rounds the residual add once, bf16(v + y); fp8_matmul.h's scaled
//      form):
//        BF16 y:      y = bf16(v)
//        add_to_y:    y = bf16(bf16(v) + y)                    (the residual add)
//        silu_mul_y:  W's rows are [gate; up] stacked (rows 0..n/2-1 gate,
//                     n/2..n-1 up: not interleaved as Int4Gemm's are);
//                     y [rows, n / 2] = bf16(silu(bf16(v_gate)) * bf16(v_up))
//        y_dtype kF32: y = v
// Reference: Fp8GemmRef (fp8_gemm_ref.cc): the same quantization
// (Fp8QuantizeActivationRow: the same codes and scales bit for bit, given
// finite x), a plain fp32 dot per output, the epilogue through SiluMulRef.
// The CUDA version sums the same exact products in another order (cuBLASLt),
// so outputs agree to the BF16 rounding of y (fp32 y: to fp32 rounding of
// the sums).
// Supported: kRow scales (kBlock128 weights: Unimplemented; dequantize them
// with Fp8DequantizeBf16, fp8_dequant.h, for cuBLAS); n and k positive
// multiples of 16 (cuBLASLt's FP8 kernels: fp8_matmul.h); rows >= 1;
// x_row_stride >= k and a multiple of 8; W's codes and x 16-byte aligned
// (CUDA); finite x.
// Tested by tests/gpu/fp8_gemm_test.cc (MatchesReference) and, for the
// reference, tests/engine/kernels/fp8_gemm_ref_test.cc.
#ifndef ONECARD_ENGINE_KERNELS_FP8_GEMM_H_
#define ONECARD_ENGINE_KERNELS_FP8_GEMM_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/common/dtype.h"
#include "engine/common/fp8.h"
#include "engine/common/host_device.h"
#include "engine/kernels/fp8_weight.h"
#include "engine/kernels/stream.h"

namespace onecard::engine {

class Fp8Matmul;  // fp8_matmul.h

struct Fp8GemmParams {
  Fp8WeightView w;               // E4M3 [n, k], kRow scales [n]
  const void* x = nullptr;       // BF16 [rows, x_row_stride], k values a row
  int64_t x_row_stride = 0;      // elements between rows of x
  void* y = nullptr;             // [rows, n] (silu_mul_y: [rows, n / 2]) of y_dtype
  DType y_dtype = DType::kBF16;  // kBF16 or kF32
  bool add_to_y = false;         // BF16 y only
  bool silu_mul_y = false;       // BF16 y only, not with add_to_y
  int32_t rows = 0;
  // With norm_weight (BF16 [k]): x is the residual stream and the
  // activations are its RMSNorm first, rms_norm.h's math (fp32 mean of
  // squares, rsqrt, each value bf16(w * (x * inv_rms))), so that the step
  // needs no RmsNorm kernel before the product.
  const void* norm_weight = nullptr;
  float eps = 1e-5f;
  // x's rows hold [gate | up], 2k values (x_row_stride >= 2k): the
  // activations are silu_mul.h's bf16(silu(gate) * up), so that a step
  // whose gate/up product wrote them as they came needs no SiluMul kernel.
  // Not with norm_weight.
  bool silu_mul_x = false;
  // x's codes and scales and the fp32 sums (Fp8GemmWorkspace); 256-byte
  // aligned, at least Fp8GemmWorkspace(rows, n, k).total_bytes. Not needed
  // by the reference. One workspace serves one stream at a time.
  void* workspace = nullptr;
  int64_t workspace_bytes = 0;
};

// Where a call's intermediates lie in the workspace (byte offsets, each
// 256-byte aligned): x's codes uint8 [rows, k], x's scales fp32 [rows], the
// sums acc fp32 [rows, acc_row_stride] (n rounded up to a multiple of 16).
struct Fp8GemmWorkspaceLayout {
  int64_t codes_offset = 0;
  int64_t scales_offset = 0;
  int64_t acc_offset = 0;
  int64_t acc_row_stride = 0;
  int64_t total_bytes = 0;
};
Fp8GemmWorkspaceLayout Fp8GemmWorkspace(int64_t rows, int64_t n, int64_t k);
// A workspace for every call of up to max_rows rows, max_n weight rows and
// max_k columns (the layout grows with each).
int64_t Fp8GemmWorkspaceBytes(int64_t max_rows, int64_t max_n, int64_t max_k);

// The activation scale of a row whose largest magnitude is `amax` (finite).
ONECARD_HOST_DEVICE inline float Fp8ActivationScale(float amax) {
#if defined(__CUDA_ARCH__)
  return amax > 0.0f ? __fdiv_rn(amax, kE4m3Max) : 1.0f;
#else
  return amax > 0.0f ? amax / kE4m3Max : 1.0f;
#endif
}

// The code of activation value v in a row of scale `scale`.
ONECARD_HOST_DEVICE inline uint8_t Fp8ActivationCode(float v, float scale) {
#if defined(__CUDA_ARCH__)
  return FloatToE4m3(__fdiv_rn(v, scale));
#else
  return FloatToE4m3(v / scale);
#endif
}

// Stage 1 on the host for one row of k BF16 values: writes k codes and
// returns the scale (the spec of the CUDA kernel's codes, bit for bit).
float Fp8QuantizeActivationRow(const uint16_t* x, int64_t k, uint8_t* codes);
// A row of Fp8GemmParams' activations on the host: x's row, or with
// norm_weight its RMSNorm (RmsNormRef's sums in order; the CUDA kernel sums
// in another order, so its values may differ by a BF16 unit where the
// inverse RMS rounds otherwise), or with silu_mul_x SiluMulRef of it (the
// CUDA kernel's expf may round a value to the next BF16 too).
absl::StatusOr<std::vector<uint16_t>> Fp8GemmActivationRow(const Fp8GemmParams& params, int32_t m);

// The checks both implementations make: Unimplemented naming what is
// supported for a shape, scale kind or dtype outside the set above,
// InvalidArgument naming the field for inconsistent parameters; `op`
// starts the message. Fp8Gemm also checks alignment and the workspace.
absl::Status CheckFp8GemmParams(const Fp8GemmParams& params, absl::string_view op);

absl::Status Fp8GemmRef(const Fp8GemmParams& params);
// `matmul` holds the cuBLASLt handle and the plans of the shapes it has
// seen: a call on a stream being captured into a CUDA graph needs its shape
// prepared first (PrepareFp8Gemm, or one call outside capture), see
// fp8_matmul.h. Uses matmul's workspace as well as params.workspace.
absl::Status Fp8Gemm(Fp8Matmul& matmul, const Fp8GemmParams& params, cudaStream_t stream);
// Plans the cuBLASLt product of params' shape (rows, w.n, w.k; no pointer is
// read, nothing is enqueued), so that Fp8Gemm with that shape can be
// captured into a CUDA graph.
absl::Status PrepareFp8Gemm(Fp8Matmul& matmul, const Fp8GemmParams& params);
// Whether Fp8Gemm takes cuBLASLt's scaled form for params' shape and output
// under the current LaunchSettings (planning it; no pointer is read).
absl::StatusOr<bool> Fp8GemmUsesCublasScales(Fp8Matmul& matmul, const Fp8GemmParams& params);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_KERNELS_FP8_GEMM_H_
