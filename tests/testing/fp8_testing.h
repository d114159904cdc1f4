// Seeded random FP8 weights for the tests of the FP8 references and kernels:
// values drawn normal with a standard deviation of 448 / 4 and rounded to
// E4M3 (FloatToE4m3: the tails saturate at +-448, small values become
// subnormal codes or zero; never NaN), fp32 scales of 0.5..1.5 times 1/448
// per row or 128 x 128 block. Header-only.
#ifndef ONECARD_TESTS_TESTING_FP8_TESTING_H_
#define ONECARD_TESTS_TESTING_FP8_TESTING_H_

#include <cstdint>
#include <random>

#include "engine/common/fp8.h"
#include "engine/kernels/fp8_weight.h"

namespace onecard::testing {

inline engine::Fp8Matrix RandomFp8Matrix(int64_t n, int64_t k, engine::Fp8Scales kind,
                                         uint32_t seed) {
  std::mt19937 rng(seed);
  engine::Fp8Matrix m{.n = n, .k = k, .scales_kind = kind};
  std::normal_distribution<float> value(0.0f, engine::kE4m3Max / 4);
  m.codes.resize(n * k);
  for (uint8_t& code : m.codes) code = engine::FloatToE4m3(value(rng));
  std::uniform_real_distribution<float> jitter(0.5f, 1.5f);
  m.scales.resize(engine::Fp8ScaleCount(n, k, kind));
  for (float& s : m.scales) s = jitter(rng) / engine::kE4m3Max;
  return m;
}

}  // namespace onecard::testing

#endif  // ONECARD_TESTS_TESTING_FP8_TESTING_H_
