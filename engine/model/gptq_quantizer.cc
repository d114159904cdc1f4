// GPTQ's round-to-nearest quantizer and v1 packing (see gptq_quantizer.h).
#include "engine/model/gptq_quantizer.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "engine/common/fp16.h"

namespace onecard::engine {

GptqGroupParams FindGptqGroupParams(std::span<const float> x, bool sym) {
  float xmin = 0.0f, xmax = 0.0f;
  for (float v : x) xmin = std::min(xmin, v), xmax = std::max(xmax, v);
  if (sym) {
    xmax = std::max(std::fabs(xmin), xmax);
    if (xmin < 0.0f) xmin = -xmax;
  }
  if (xmin == 0.0f && xmax == 0.0f) xmin = -1.0f, xmax = 1.0f;
  GptqGroupParams p;
  p.scale = (xmax - xmin) / 15.0f;
  p.zero = sym ? 8 : static_cast<uint8_t>(std::nearbyint(-xmin / p.scale));
  return p;
}

uint8_t GptqCode(float x, const GptqGroupParams& params) {
  const float q = std::nearbyint(x / params.scale) + static_cast<float>(params.zero);
  return static_cast<uint8_t>(std::clamp(q, 0.0f, 15.0f));
}

absl::StatusOr<GptqQuantized> QuantizeGptqRtn(std::span<const float> w, int64_t n, int64_t k,
                                              int32_t group, bool sym) {
  if (n < 0 || k < 0 || static_cast<int64_t>(w.size()) != n * k || group <= 0 || k % group != 0) {
    return absl::InvalidArgumentError(absl::StrCat("QuantizeGptqRtn: ", w.size(), " values for ", n,
                                                   " x ", k, ", group ", group));
  }
  GptqQuantized q;
  q.n = n;
  q.k = k;
  q.group = group;
  const int64_t groups = k / group;
  q.codes.resize(n * k);
  q.scales.resize(n * groups);
  q.zeros.resize(n * groups);
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t gi = 0; gi < groups; ++gi) {
      const std::span<const float> x = w.subspan(r * k + gi * group, group);
      const GptqGroupParams p = FindGptqGroupParams(x, sym);
      q.scales[r * groups + gi] = p.scale;
      q.zeros[r * groups + gi] = p.zero;
      uint8_t* codes = q.codes.data() + r * k + gi * group;
      for (int32_t i = 0; i < group; ++i) codes[i] = GptqCode(x[i], p);
    }
  }
  return q;
}

std::vector<float> DequantizeGptq(const GptqQuantized& q) {
  std::vector<float> out(q.n * q.k);
  const int64_t groups = q.num_groups();
  for (int64_t r = 0; r < q.n; ++r) {
    for (int64_t c = 0; c < q.k; ++c) {
      const int64_t g = r * groups + c / q.group;
      out[r * q.k + c] = HalfToFloat(FloatToHalf(q.scales[g])) *
                         static_cast<float>(q.codes[r * q.k + c] - q.zeros[g]);
    }
  }
  return out;
}

absl::StatusOr<GptqV1Tensors> PackGptqV1(const GptqQuantized& q) {
  if (q.n % 8 != 0 || q.k % 8 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("GPTQ packing needs n and k multiples of 8; W is ", q.n, " x ", q.k));
  }
  const int64_t n = q.n, k = q.k, groups = q.num_groups();
  GptqV1Tensors t;
  t.qweight.assign(k / 8 * n, 0);
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t c = 0; c < k; ++c) {
      uint32_t& word = reinterpret_cast<uint32_t&>(t.qweight[c / 8 * n + r]);
      word |= uint32_t{q.codes[r * k + c]} << (4 * (c % 8));
    }
  }
  t.qzeros.assign(groups * n / 8, 0);
  t.scales.resize(groups * n);
  for (int64_t gi = 0; gi < groups; ++gi) {
    for (int64_t r = 0; r < n; ++r) {
      uint32_t& word = reinterpret_cast<uint32_t&>(t.qzeros[gi * n / 8 + r / 8]);
      word |= uint32_t{q.zeros[r * groups + gi]} << (4 * (r % 8));
      t.scales[gi * n + r] = FloatToHalf(q.scales[r * groups + gi]);
    }
  }
  for (int32_t& word : t.qzeros) {
    word = static_cast<int32_t>(static_cast<uint32_t>(word) - 0x11111111u);
  }
  t.g_idx.resize(k);
  for (int64_t c = 0; c < k; ++c) t.g_idx[c] = static_cast<int32_t>(c / q.group);
  return t;
}

}  // namespace onecard::engine
