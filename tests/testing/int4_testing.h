// Seeded random 4-bit weights for the tests of the int4 packer, reference and
// kernels: codes uniform in 0..15, fp16 scales of the size a projection of
// fan-in k would have (+-sqrt(3 / k) over the 16 codes, times 0.5..1.5 per
// group, never zero), offsets per kind (zero points 0..15; GGUF-style mins
// -s * (6..10)). Header-only.
#ifndef ONECARD_TESTS_TESTING_INT4_TESTING_H_
#define ONECARD_TESTS_TESTING_INT4_TESTING_H_

#include <cmath>
#include <cstdint>
#include <random>

#include "engine/common/fp16.h"
#include "engine/kernels/int4_gemm.h"
#include "engine/kernels/int4_matrix.h"

namespace onecard::testing {

inline engine::Int4Matrix RandomInt4Matrix(int64_t n, int64_t k, int32_t group,
                                           engine::Int4Offsets offsets, uint32_t seed) {
  std::mt19937 rng(seed);
  engine::Int4Matrix m;
  m.n = n;
  m.k = k;
  m.group = group;
  m.offsets = offsets;
  m.q.resize(n * k);
  std::uniform_int_distribution<int> code(0, 15);
  for (uint8_t& q : m.q) q = static_cast<uint8_t>(code(rng));
  const int64_t groups = n * (k / group);
  const float base = std::sqrt(3.0f / static_cast<float>(k)) / 8.0f;
  std::uniform_real_distribution<float> jitter(0.5f, 1.5f), min_codes(6.0f, 10.0f);
  m.scales.resize(groups);
  if (offsets != engine::Int4Offsets::kSymmetric) m.offset.resize(groups);
  for (int64_t i = 0; i < groups; ++i) {
    const uint16_t s = engine::FloatToHalf(base * jitter(rng));
    m.scales[i] = s;
    if (offsets == engine::Int4Offsets::kZero) {
      m.offset[i] = static_cast<uint16_t>(code(rng));
    } else if (offsets == engine::Int4Offsets::kFloat) {
      m.offset[i] = engine::FloatToHalf(-engine::HalfToFloat(s) * min_codes(rng));
    }
  }
  return m;
}

// m packed (`packed`, in host memory) as the kernels' view of a weight.
inline engine::Int4WeightView Int4View(const engine::Int4Packed& packed,
                                       const engine::Int4Matrix& m) {
  return {.codes = packed.codes.data(),
          .scales = packed.scales.data(),
          .offsets = packed.offsets.empty() ? nullptr : packed.offsets.data(),
          .n = m.n,
          .k = m.k,
          .group = m.group,
          .offset_kind = m.offsets};
}

}  // namespace onecard::testing

#endif  // ONECARD_TESTS_TESTING_INT4_TESTING_H_
