// Gemv: y = x W^T for a few rows of x (decode at batch 1..4), BF16 weights
// read once at the HBM rate, with the step's neighbours fused in:
//   prologue kRmsNorm:  x' = RmsNorm(x) * norm_weight   (rms_norm.h semantics)
//   prologue kSiluMul:  x' = silu(gate) * up, x = [gate | up] per row (silu_mul.h)
//   epilogue add_to_y:  y = y + x' W^T                   (the residual add)
//   epilogue silu_mul_y: W holds 2n rows [gate | up] (the fused gate/up
//                        weight); y = silu(x' W_gate^T) * (x' W_up^T), n wide
//                        (silu_mul.h applied to the gate/up projection)
// The fused forms round exactly where the unfused ops store: x' to BF16,
// x' W^T to BF16 (or kept fp32 when y is F32), then the add to BF16;
// silu_mul_y rounds gate and up to BF16, then silu(gate) * up to BF16.
// Weights: BF16 [n, k], or FP8 E4M3 codes with fp32 scales (fp8_weight.h:
// one a row, or one a 128 x 128 block), whose value is code * scale: the
// bytes a decode step reads halve, and the products are still fp32 sums of
// the exact weight values times x' (W8A16).
// Reference: GemvRef (gemv_ref.cc; the composition of the unfused
// references and a plain fp32 dot of the weights' values). CUDA: Gemv
// (gemv.cu, FP8 weights gemv_fp8.cu): every warp streams whole weight rows
// with 16-byte loads that skip L1, x' is staged once per block in shared
// memory; FP8 sums each 128-column block (or the row) and applies its scale
// once. Supported: BF16 x, y BF16 or F32, 1 <= num_rows <= 4, k % 8 == 0
// (FP8: k % 16 == 0), num_rows * k <= kGemvMaxRowValues.
// Tested by tests/gpu/gemv_test.cc.
#ifndef ONECARD_ENGINE_KERNELS_GEMV_H_
#define ONECARD_ENGINE_KERNELS_GEMV_H_

#include <cstdint>

#include "absl/status/status.h"
#include "engine/common/dtype.h"
#include "engine/kernels/fp8_weight.h"
#include "engine/kernels/stream.h"

namespace onecard::engine {

enum class GemvPrologue { kNone, kRmsNorm, kSiluMul };

inline constexpr int32_t kGemvMaxRows = 4;
// num_rows * k at most (x' is staged in shared memory: 4 rows of a 70B's
// 28672-wide down projection).
inline constexpr int64_t kGemvMaxRowValues = kGemvMaxRows * 28672;

struct GemvParams {
  GemvPrologue prologue = GemvPrologue::kNone;
  const void* x = nullptr;            // BF16 [num_rows, x_row_stride]: k values
                                      // (kSiluMul: 2 * k, gate then up)
  int64_t x_row_stride = 0;           // elements between rows of x
  const void* norm_weight = nullptr;  // BF16 [k], kRmsNorm only
  float eps = 1e-5f;                  // kRmsNorm only
  const void* w = nullptr;            // [n, k] of w_dtype, row-major
  DType w_dtype = DType::kBF16;       // kBF16 or kF8E4M3
  const float* w_scales = nullptr;    // kF8E4M3: fp8_weight.h's scales of w's rows
  Fp8Scales w_scales_kind = Fp8Scales::kRow;
  void* y = nullptr;             // [num_rows, n] of y_dtype
  DType y_dtype = DType::kBF16;  // kBF16 or kF32
  bool add_to_y = false;         // y += x' W^T (BF16 y only)
  bool silu_mul_y = false;       // y = SiluMul of 2n outputs (BF16 y only)
  int32_t num_rows = 0;          // 1 .. kGemvMaxRows
  int64_t n = 0;                 // outputs per row (w rows: silu_mul_y ? 2n : n)
  int64_t k = 0;
};

absl::Status GemvRef(const GemvParams& params);
absl::Status Gemv(const GemvParams& params, cudaStream_t stream);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_KERNELS_GEMV_H_
