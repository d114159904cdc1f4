// GatherColumnsRef and the shared checks (see gather_columns.h).
// Tested by tests/engine/kernels/gather_columns_ref_test.cc.
#include "absl/strings/str_cat.h"
#include "engine/kernels/gather_columns.h"

namespace onecard::engine {

absl::Status CheckGatherColumnsParams(const GatherColumnsParams& p, absl::string_view op) {
  if (p.rows < 0 || p.k <= 0 || p.x_row_stride <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": bad sizes rows=", p.rows, " k=", p.k,
                                                   " x_row_stride=", p.x_row_stride));
  }
  if (p.rows > 0 && (p.x == nullptr || p.y == nullptr || p.columns == nullptr)) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": x, columns and y must be set"));
  }
  return absl::OkStatus();
}

absl::Status GatherColumnsRef(const GatherColumnsParams& p) {
  constexpr char kOp[] = "GatherColumnsRef";
  if (absl::Status s = CheckGatherColumnsParams(p, kOp); !s.ok()) return s;
  for (int64_t j = 0; j < p.k; ++j) {
    if (p.columns[j] < 0 || p.columns[j] >= p.x_row_stride) {
      return absl::InvalidArgumentError(absl::StrCat(kOp, ": columns[", j, "] = ", p.columns[j],
                                                     " is outside [0, ", p.x_row_stride, ")"));
    }
  }
  const auto* x = static_cast<const uint16_t*>(p.x);
  auto* y = static_cast<uint16_t*>(p.y);
  for (int64_t r = 0; r < p.rows; ++r) {
    for (int64_t j = 0; j < p.k; ++j) y[r * p.k + j] = x[r * p.x_row_stride + p.columns[j]];
  }
  return absl::OkStatus();
}

}  // namespace onecard::engine
