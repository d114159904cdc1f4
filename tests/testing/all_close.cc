#include "tests/testing/all_close.h"

#include <cmath>
#include <cstdlib>

#include "absl/strings/str_format.h"

namespace onecard::testing {

Tolerance Tolerance::For(engine::DType dtype) {
  switch (dtype) {
    case engine::DType::kF32: return {1e-5, 1e-4, 1e-9};
    case engine::DType::kF16: return {2e-3, 2e-3, 1e-5};
    case engine::DType::kBF16: return {1e-2, 1.6e-2, 1e-4};
    default: return {1e-2, 2e-2, 1e-3};
  }
}

CloseReport CompareAll(std::span<const float> got, std::span<const float> want,
                       const Tolerance& tol) {
  CloseReport r;
  double num = 0, den = 0;
  const size_t n = std::min(got.size(), want.size());
  for (size_t i = 0; i < n; ++i) {
    const double a = got[i], b = want[i];
    const double err = std::fabs(a - b);
    const bool bad = !std::isfinite(a) || err > tol.atol + tol.rtol * std::fabs(b);
    num += (a - b) * (a - b);
    den += b * b;
    r.max_abs_err = std::max(r.max_abs_err, err);
    if (std::fabs(b) > 1e-6) r.max_rel_err = std::max(r.max_rel_err, err / std::fabs(b));
    if (bad) {
      if (r.num_mismatches < 8) {
        absl::StrAppendFormat(&r.first_mismatches, "i=%d got=%g want=%g; ", i, a, b);
      }
      ++r.num_mismatches;
    }
  }
  r.nmse = den > 0 ? num / den : num;
  if (!std::isfinite(r.nmse)) r.nmse = INFINITY;
  return r;
}

::testing::AssertionResult AllClose(std::span<const float> got,
                                    std::span<const float> want,
                                    const Tolerance& tol) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure()
           << "size mismatch: got " << got.size() << " want " << want.size();
  }
  const CloseReport r = CompareAll(got, want, tol);
  if (r.num_mismatches == 0 && r.nmse <= tol.max_nmse) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << absl::StrFormat(
             "%d of %d elements off (atol %g rtol %g); max abs err %g, max rel err %g, "
             "NMSE %g (max %g); first: %s",
             r.num_mismatches, got.size(), tol.atol, tol.rtol, r.max_abs_err,
             r.max_rel_err, r.nmse, tol.max_nmse, r.first_mismatches);
}

std::string SourcePath(const std::string& relative) {
  const char* root = std::getenv("ONECARD_SOURCE_DIR");
  if (root != nullptr && *root != '\0') return std::string(root) + "/" + relative;
  return relative;
}

}  // namespace onecard::testing
