// Fp8Matrix (see fp8_weight.h).
#include "engine/kernels/fp8_weight.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "engine/common/fp8.h"

namespace onecard::engine {
namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

bool IsNanCode(uint8_t code) { return (code & 0x7f) == 0x7f; }

}  // namespace

absl::string_view Fp8ScalesName(Fp8Scales kind) {
  return kind == Fp8Scales::kBlock128 ? "block128" : "row";
}

int64_t Fp8ScaleCount(int64_t n, int64_t k, Fp8Scales kind) {
  if (kind == Fp8Scales::kRow) return n;
  return CeilDiv(n, kFp8Block) * CeilDiv(k, kFp8Block);
}

absl::Status Fp8Matrix::Validate(absl::string_view name) const {
  if (n <= 0 || k <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": fp8 weight shape [", n, ", ", k, "] is not positive"));
  }
  if (static_cast<int64_t>(codes.size()) != n * k) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": fp8 weight [", n, ", ", k, "] has ",
                                                   codes.size(), " codes, not ", n * k));
  }
  const int64_t num_scales = Fp8ScaleCount(n, k, scales_kind);
  if (static_cast<int64_t>(scales.size()) != num_scales) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": fp8 weight [", n, ", ", k, "] with ",
                                                   Fp8ScalesName(scales_kind), " scales has ",
                                                   scales.size(), " scales, not ", num_scales));
  }
  for (int64_t i = 0; i < n * k; ++i) {
    if (IsNanCode(codes[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ": fp8 code ", i, " (row ", i / k, ", column ", i % k, ") is NaN"));
    }
  }
  for (int64_t i = 0; i < num_scales; ++i) {
    if (!std::isfinite(scales[i]) || !(scales[i] > 0.0f)) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ": fp8 scale ", i, " is ", scales[i], ", not finite and positive"));
    }
  }
  return absl::OkStatus();
}

float Fp8Matrix::Scale(int64_t r, int64_t c) const {
  return scales[Fp8ScaleIndex(r, c, k, scales_kind)];
}

float Fp8Matrix::Value(int64_t r, int64_t c) const {
  return E4m3ToFloat(codes[r * k + c]) * Scale(r, c);
}

std::vector<float> DequantizeFp8(const Fp8Matrix& m) {
  std::vector<float> out(m.n * m.k);
  for (int64_t r = 0; r < m.n; ++r) {
    for (int64_t c = 0; c < m.k; ++c) out[r * m.k + c] = m.Value(r, c);
  }
  return out;
}

absl::Status StackFp8Rows(const std::vector<const Fp8Matrix*>& parts, absl::string_view name,
                          Fp8Matrix* out) {
  if (parts.empty()) return absl::InvalidArgumentError(absl::StrCat(name, ": no fp8 parts"));
  Fp8Matrix m;
  m.k = parts[0]->k;
  m.scales_kind = parts[0]->scales_kind;
  for (size_t i = 0; i < parts.size(); ++i) {
    const Fp8Matrix& p = *parts[i];
    if (p.k != m.k || p.scales_kind != m.scales_kind) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, ": fp8 part ", i, " is [", p.n, ", ", p.k, "] with ", Fp8ScalesName(p.scales_kind),
          " scales; part 0 has k ", m.k, " and ", Fp8ScalesName(m.scales_kind), " scales"));
    }
    if (m.scales_kind == Fp8Scales::kBlock128 && i + 1 < parts.size() && p.n % kFp8Block != 0) {
      return absl::InvalidArgumentError(absl::StrCat(name, ": fp8 part ", i, " has ", p.n,
                                                     " rows, not a multiple of the 128-row block"));
    }
    m.n += p.n;
  }
  m.codes.reserve(m.n * m.k);
  m.scales.reserve(Fp8ScaleCount(m.n, m.k, m.scales_kind));
  for (const Fp8Matrix* p : parts) {
    m.codes.insert(m.codes.end(), p->codes.begin(), p->codes.end());
    m.scales.insert(m.scales.end(), p->scales.begin(), p->scales.end());
  }
  *out = std::move(m);
  return absl::OkStatus();
}

}  // namespace onecard::engine
