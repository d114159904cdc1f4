// GemvRef: the reference of the fused GEMV (see gemv.h): the prologue through
// RmsNormRef / SiluMulRef (BF16), a plain fp32 dot per output of x' and the
// weights' values (BF16, or an FP8 code's E4M3 value times its scale, as
// Fp8Matrix::Value), and the epilogue's roundings. Tested by tests/gpu/gemv_test.cc (as the spec of
// the CUDA kernel).
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/common/fp8.h"
#include "engine/common/status_macros.h"
#include "engine/kernels/bf16.h"
#include "engine/kernels/gemv.h"
#include "engine/kernels/ref_util.h"
#include "engine/kernels/rms_norm.h"
#include "engine/kernels/silu_mul.h"

namespace onecard::engine {
namespace {

constexpr char kOp[] = "GemvRef";

absl::Status Validate(const GemvParams& p) {
  if (p.num_rows < 1 || p.num_rows > kGemvMaxRows) {
    return ref::ArgError(
        kOp, absl::StrCat("num_rows ", p.num_rows, " is outside [1, ", kGemvMaxRows, "]"));
  }
  RETURN_IF_ERROR(ref::CheckPositive(kOp, "n", p.n));
  RETURN_IF_ERROR(ref::CheckPositive(kOp, "k", p.k));
  const int64_t min_stride = p.prologue == GemvPrologue::kSiluMul ? 2 * p.k : p.k;
  if (p.x_row_stride < min_stride) {
    return ref::ArgError(kOp, absl::StrCat("x_row_stride ", p.x_row_stride, " < ", min_stride));
  }
  if (p.y_dtype != DType::kBF16 && p.y_dtype != DType::kF32) {
    return ref::UnsupportedDType(kOp, p.y_dtype);
  }
  if (p.add_to_y && p.y_dtype != DType::kBF16) return ref::ArgError(kOp, "add_to_y needs BF16 y");
  if (p.silu_mul_y && (p.y_dtype != DType::kBF16 || p.add_to_y)) {
    return ref::ArgError(kOp, "silu_mul_y needs BF16 y and no add_to_y");
  }
  RETURN_IF_ERROR(ref::CheckNotNull(kOp, "x", p.x));
  RETURN_IF_ERROR(ref::CheckNotNull(kOp, "w", p.w));
  if (p.w_dtype != DType::kBF16 && p.w_dtype != DType::kF8E4M3) {
    return absl::UnimplementedError(absl::StrCat(kOp, ": w dtype ",
                                                 std::string(DTypeName(p.w_dtype)),
                                                 " is not supported; supported: BF16, F8_E4M3"));
  }
  if (p.w_dtype == DType::kF8E4M3) RETURN_IF_ERROR(ref::CheckNotNull(kOp, "w_scales", p.w_scales));
  return ref::CheckNotNull(kOp, "y", p.y);
}

// x' [num_rows, k] in BF16, through the unfused references.
absl::StatusOr<std::vector<uint16_t>> Prologue(const GemvParams& p) {
  std::vector<uint16_t> xs(p.num_rows * p.k);
  const uint16_t* x = static_cast<const uint16_t*>(p.x);
  for (int32_t m = 0; m < p.num_rows; ++m) {
    const uint16_t* row = x + m * p.x_row_stride;
    uint16_t* dst = xs.data() + m * p.k;
    if (p.prologue == GemvPrologue::kRmsNorm) {
      RETURN_IF_ERROR(RmsNormRef({.dtype = DType::kBF16,
                                  .x = row,
                                  .weight = p.norm_weight,
                                  .out = dst,
                                  .num_tokens = 1,
                                  .hidden = p.k,
                                  .eps = p.eps}));
    } else if (p.prologue == GemvPrologue::kSiluMul) {
      RETURN_IF_ERROR(SiluMulRef(
          {.dtype = DType::kBF16, .gate_up = row, .out = dst, .num_tokens = 1, .inter = p.k}));
    } else {
      std::copy(row, row + p.k, dst);
    }
  }
  return xs;
}

// W[j][i] in fp32 (rows of the whole weight: gate then up for silu_mul_y).
float WeightValue(const GemvParams& p, int64_t j, int64_t i) {
  if (p.w_dtype == DType::kBF16) return Bf16ToFloat(static_cast<const uint16_t*>(p.w)[j * p.k + i]);
  const float code = E4m3ToFloat(static_cast<const uint8_t*>(p.w)[j * p.k + i]);
  if (p.w_scales_kind == Fp8Scales::kRow) return code * p.w_scales[j];
  const int64_t blocks = (p.k + kFp8Block - 1) / kFp8Block;
  return code * p.w_scales[(j / kFp8Block) * blocks + i / kFp8Block];
}

}  // namespace

absl::Status GemvRef(const GemvParams& p) {
  RETURN_IF_ERROR(Validate(p));
  if (p.silu_mul_y) {
    // The gate/up projection (2n BF16 outputs a row), then SiluMulRef.
    std::vector<uint16_t> gate_up(p.num_rows * 2 * p.n);
    GemvParams projection = p;
    projection.silu_mul_y = false;
    projection.n = 2 * p.n;
    projection.y = gate_up.data();
    RETURN_IF_ERROR(GemvRef(projection));
    return SiluMulRef({.dtype = DType::kBF16,
                       .gate_up = gate_up.data(),
                       .out = p.y,
                       .num_tokens = p.num_rows,
                       .inter = p.n});
  }
  ASSIGN_OR_RETURN(std::vector<uint16_t> xs, Prologue(p));
  for (int32_t m = 0; m < p.num_rows; ++m) {
    for (int64_t j = 0; j < p.n; ++j) {
      float acc = 0.0f;
      for (int64_t i = 0; i < p.k; ++i) {
        acc += WeightValue(p, j, i) * Bf16ToFloat(xs[m * p.k + i]);
      }
      const int64_t o = m * p.n + j;
      if (p.y_dtype == DType::kF32) {
        static_cast<float*>(p.y)[o] = acc;
        continue;
      }
      uint16_t* y = static_cast<uint16_t*>(p.y);
      const float product = Bf16ToFloat(FloatToBf16(acc));
      y[o] = FloatToBf16(p.add_to_y ? product + Bf16ToFloat(y[o]) : product);
    }
  }
  return absl::OkStatus();
}

}  // namespace onecard::engine
