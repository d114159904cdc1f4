// Fp8GemmRef: the spec of Fp8Gemm (see fp8_gemm.h): each row of x quantized
// by Fp8QuantizeActivationRow, a plain fp32 dot of the codes' values per
// output, the two scales, the epilogue's roundings (SiluMulRef for the
// stacked gate/up halves). Also CheckFp8GemmParams and the workspace's
// layout, shared with the CUDA version.
// Tested by tests/engine/kernels/fp8_gemm_ref_test.cc; the spec of
// tests/gpu/fp8_gemm_test.cc.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/kernels/bf16.h"
#include "engine/kernels/fp8_gemm.h"
#include "engine/kernels/ref_util.h"
#include "engine/kernels/rms_norm.h"
#include "engine/kernels/silu_mul.h"

namespace onecard::engine {
namespace {

absl::Status Error(absl::string_view op, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(op, ": ", what));
}

int64_t Align256(int64_t bytes) { return (bytes + 255) / 256 * 256; }

}  // namespace

Fp8GemmWorkspaceLayout Fp8GemmWorkspace(int64_t rows, int64_t n, int64_t k) {
  Fp8GemmWorkspaceLayout l;
  l.acc_row_stride = (n + 15) / 16 * 16;
  l.codes_offset = 0;
  l.scales_offset = Align256(rows * k);
  l.acc_offset = l.scales_offset + Align256(rows * 4);
  l.total_bytes = l.acc_offset + Align256(rows * l.acc_row_stride * 4);
  return l;
}

int64_t Fp8GemmWorkspaceBytes(int64_t max_rows, int64_t max_n, int64_t max_k) {
  return Fp8GemmWorkspace(max_rows, max_n, max_k).total_bytes;
}

float Fp8QuantizeActivationRow(const uint16_t* x, int64_t k, uint8_t* codes) {
  float amax = 0.0f;
  for (int64_t c = 0; c < k; ++c) amax = std::max(amax, std::abs(Bf16ToFloat(x[c])));
  const float scale = Fp8ActivationScale(amax);
  for (int64_t c = 0; c < k; ++c) codes[c] = Fp8ActivationCode(Bf16ToFloat(x[c]), scale);
  return scale;
}

absl::StatusOr<std::vector<uint16_t>> Fp8GemmActivationRow(const Fp8GemmParams& p, int32_t m) {
  const auto* x = static_cast<const uint16_t*>(p.x) + m * p.x_row_stride;
  if (p.silu_mul_x) {
    std::vector<uint16_t> act(p.w.k);
    RETURN_IF_ERROR(SiluMulRef(
        {.dtype = DType::kBF16, .gate_up = x, .out = act.data(), .num_tokens = 1, .inter = p.w.k}));
    return act;
  }
  std::vector<uint16_t> row(x, x + p.w.k);
  if (p.norm_weight == nullptr) return row;
  std::vector<uint16_t> normed(p.w.k);
  RETURN_IF_ERROR(RmsNormRef({.dtype = DType::kBF16,
                              .x = row.data(),
                              .weight = p.norm_weight,
                              .out = normed.data(),
                              .num_tokens = 1,
                              .hidden = p.w.k,
                              .eps = p.eps}));
  return normed;
}

absl::Status CheckFp8GemmParams(const Fp8GemmParams& p, absl::string_view op) {
  const Fp8WeightView& w = p.w;
  if (w.scales_kind != Fp8Scales::kRow) {
    return absl::UnimplementedError(absl::StrCat(
        op, ": weight scales ", Fp8ScalesName(w.scales_kind),
        " are not supported; supported: row (dequantize block-scaled weights to BF16 with "
        "Fp8DequantizeBf16)"));
  }
  if (w.n < 1 || w.n % 16 != 0 || w.k < 1 || w.k % 16 != 0) {
    return absl::UnimplementedError(
        absl::StrCat(op, ": weight n=", w.n, " k=", w.k,
                     " is not supported; supported: n and k positive multiples of 16"));
  }
  if (p.rows < 1) return Error(op, absl::StrCat("rows ", p.rows, " must be >= 1"));
  RETURN_IF_ERROR(
      ref::CheckGemmXAndEpilogue(op, w.k, p.x_row_stride, p.y_dtype, p.add_to_y, p.silu_mul_y));
  if (w.codes == nullptr || w.scales == nullptr || p.x == nullptr || p.y == nullptr) {
    return Error(op, "a pointer it needs is null (w.codes, w.scales, x or y)");
  }
  if (p.silu_mul_x && p.norm_weight != nullptr) {
    return Error(op, "silu_mul_x and norm_weight are not taken together");
  }
  if (p.silu_mul_x && p.x_row_stride < 2 * w.k) {
    return Error(op, absl::StrCat("silu_mul_x: x_row_stride ", p.x_row_stride, " must be >= 2 k (",
                                  2 * w.k, ")"));
  }
  return absl::OkStatus();
}

absl::Status Fp8GemmRef(const Fp8GemmParams& p) {
  RETURN_IF_ERROR(CheckFp8GemmParams(p, "Fp8GemmRef"));
  const int64_t n = p.w.n, k = p.w.k;
  std::vector<float> xs(p.rows * k);  // the values of x's codes
  std::vector<float> x_scales(p.rows);
  std::vector<uint8_t> codes(k);
  for (int32_t m = 0; m < p.rows; ++m) {
    ASSIGN_OR_RETURN(const std::vector<uint16_t> row, Fp8GemmActivationRow(p, m));
    x_scales[m] = Fp8QuantizeActivationRow(row.data(), k, codes.data());
    for (int64_t c = 0; c < k; ++c) xs[m * k + c] = E4m3ToFloat(codes[c]);
  }
  const auto* w_codes = static_cast<const uint8_t*>(p.w.codes);
  std::vector<float> v(p.rows * n);  // [rows, n], scaled
  std::vector<float> row(k);
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t c = 0; c < k; ++c) row[c] = E4m3ToFloat(w_codes[j * k + c]);
    for (int32_t m = 0; m < p.rows; ++m) {
      float acc = 0.0f;
      for (int64_t c = 0; c < k; ++c) acc += xs[m * k + c] * row[c];
      v[m * n + j] = acc * x_scales[m] * p.w.scales[j];
    }
  }
  if (p.y_dtype == DType::kF32) {
    std::copy(v.begin(), v.end(), static_cast<float*>(p.y));
    return absl::OkStatus();
  }
  auto* y = static_cast<uint16_t*>(p.y);
  if (p.silu_mul_y) {  // each row of v is already [gate | up]: SiluMulRef's input
    std::vector<uint16_t> gate_up(p.rows * n);
    for (int64_t o = 0; o < p.rows * n; ++o) gate_up[o] = FloatToBf16(v[o]);
    return SiluMulRef({.dtype = DType::kBF16,
                       .gate_up = gate_up.data(),
                       .out = y,
                       .num_tokens = p.rows,
                       .inter = n / 2});
  }
  for (int64_t o = 0; o < p.rows * n; ++o) {
    const float product = Bf16ToFloat(FloatToBf16(v[o]));
    y[o] = FloatToBf16(p.add_to_y ? product + Bf16ToFloat(y[o]) : product);
  }
  return absl::OkStatus();
}

}  // namespace onecard::engine
