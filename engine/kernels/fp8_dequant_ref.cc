// Fp8DequantizeBf16Ref (see fp8_dequant.h): every code's value times its
// scale (fp8_weight.h's layout) in fp32, rounded to BF16. Also the checks
// shared with the CUDA kernel. Tested by
// tests/engine/kernels/fp8_dequant_ref_test.cc and tests/gpu/fp8_gemm_test.cc.
#include "absl/strings/str_cat.h"
#include "engine/common/fp8.h"
#include "engine/common/status_macros.h"
#include "engine/kernels/bf16.h"
#include "engine/kernels/fp8_dequant.h"

namespace onecard::engine {

absl::Status CheckFp8DequantParams(const Fp8DequantParams& p, absl::string_view op) {
  if (p.w.n < 1 || p.w.k < 1 || p.w.k % 16 != 0) {
    return absl::UnimplementedError(
        absl::StrCat(op, ": weight n=", p.w.n, " k=", p.w.k,
                     " is not supported; supported: n >= 1, k a positive multiple of 16"));
  }
  if (p.w.codes == nullptr || p.w.scales == nullptr || p.out == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": a pointer it needs is null (w.codes, w.scales or out)"));
  }
  return absl::OkStatus();
}

absl::Status Fp8DequantizeBf16Ref(const Fp8DequantParams& p) {
  RETURN_IF_ERROR(CheckFp8DequantParams(p, "Fp8DequantizeBf16Ref"));
  const auto* codes = static_cast<const uint8_t*>(p.w.codes);
  auto* out = static_cast<uint16_t*>(p.out);
  for (int64_t r = 0; r < p.w.n; ++r) {
    for (int64_t c = 0; c < p.w.k; ++c) {
      const float scale = p.w.scales[Fp8ScaleIndex(r, c, p.w.k, p.w.scales_kind)];
      out[r * p.w.k + c] = FloatToBf16(E4m3ToFloat(codes[r * p.w.k + c]) * scale);
    }
  }
  return absl::OkStatus();
}

}  // namespace onecard::engine
