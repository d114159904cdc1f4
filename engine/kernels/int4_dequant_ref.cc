// Int4DequantizeBf16Ref (see int4_dequant.h): Int4Value of every code,
// rounded to BF16, rows de-interleaved for gate_up. Also the row map and the
// checks shared with the CUDA kernel. Tested by tests/gpu/int4_gemm_test.cc
// and tests/engine/kernels/int4_gemm_ref_test.cc.
#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/kernels/bf16.h"
#include "engine/kernels/int4_dequant.h"
#include "engine/kernels/int4_matrix.h"

namespace onecard::engine {

absl::Status CheckInt4DequantParams(const Int4DequantParams& p, absl::string_view op) {
  Int4GemmParams g;  // the weight's checks are Int4Gemm's
  g.w = p.w;
  g.x = g.y = p.out;
  g.x_row_stride = p.w.k;
  g.rows = 1;
  RETURN_IF_ERROR(CheckInt4GemmParams(g, op));
  if (p.gate_up && p.w.n % 16 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": gate_up needs n % 16 == 0"));
  }
  return absl::OkStatus();
}

absl::Status Int4DequantizeBf16Ref(const Int4DequantParams& p) {
  RETURN_IF_ERROR(CheckInt4DequantParams(p, "Int4DequantizeBf16Ref"));
  Int4Packed packed;  // a view's bytes as the packer's arrays
  const auto* codes = static_cast<const uint8_t*>(p.w.codes);
  const auto* scales = static_cast<const uint32_t*>(p.w.scales);
  const auto* offsets = static_cast<const uint32_t*>(p.w.offsets);
  const int64_t words = Int4ScaleBytes(p.w.n, p.w.k, p.w.group) / 4;
  packed.codes.assign(codes, codes + Int4CodeBytes(p.w.n, p.w.k));
  packed.scales.assign(scales, scales + words);
  if (offsets != nullptr) packed.offsets.assign(offsets, offsets + words);
  const Int4Matrix m = UnpackInt4(packed, p.w.n, p.w.k, p.w.group, p.w.offset_kind);
  auto* out = static_cast<uint16_t*>(p.out);
  for (int64_t r = 0; r < m.n; ++r) {
    const int64_t dst = Int4DequantOutputRow(r, m.n, p.gate_up);
    for (int64_t c = 0; c < m.k; ++c) {
      const int64_t col = p.columns != nullptr ? p.columns[c] : c;
      out[dst * m.k + col] = FloatToBf16(m.Value(r, c));
    }
  }
  return absl::OkStatus();
}

}  // namespace onecard::engine
