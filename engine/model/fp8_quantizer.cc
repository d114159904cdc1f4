// QuantizeFp8Rows (see fp8_quantizer.h).
#include "engine/model/fp8_quantizer.h"

#include <algorithm>
#include <cfloat>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "engine/common/fp8.h"

namespace onecard::engine {

absl::StatusOr<Fp8Matrix> QuantizeFp8Rows(std::span<const float> w, int64_t n, int64_t k,
                                          absl::string_view name) {
  if (n <= 0 || k <= 0 || static_cast<int64_t>(w.size()) != n * k) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": ", w.size(), " values for W [", n, ", ", k, "]"));
  }
  Fp8Matrix m;
  m.n = n;
  m.k = k;
  m.scales_kind = Fp8Scales::kRow;
  m.codes.resize(n * k);
  m.scales.resize(n);
  for (int64_t r = 0; r < n; ++r) {
    const float* row = w.data() + r * k;
    float amax = 0.0f;
    for (int64_t c = 0; c < k; ++c) {
      if (!std::isfinite(row[c])) {
        return absl::InvalidArgumentError(absl::StrCat(name, ": value ", row[c], " at row ", r,
                                                       ", column ", c, " is not finite"));
      }
      amax = std::max(amax, std::fabs(row[c]));
    }
    const float scale = amax > 0.0f ? std::max(amax / kE4m3Max, FLT_MIN) : 1.0f;
    m.scales[r] = scale;
    for (int64_t c = 0; c < k; ++c) m.codes[r * k + c] = FloatToE4m3(row[c] / scale);
  }
  return m;
}

}  // namespace onecard::engine
