// Helpers of the kernel reference tests: seeded random inputs (never zeros),
// poisoned outputs, and fp32 <-> BF16 vector conversions. Header-only; used by
// tests/engine/kernels/*_ref_test.cc.
#ifndef ONECARD_TESTS_ENGINE_KERNELS_KERNEL_TEST_UTIL_H_
#define ONECARD_TESTS_ENGINE_KERNELS_KERNEL_TEST_UTIL_H_

#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "engine/kernels/bf16.h"

namespace onecard::engine::testing {

// Uniform values in [lo, hi), from a seeded generator.
inline std::vector<float> RandomFloats(int64_t n, uint32_t seed, float lo = -1.0f,
                                       float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

inline std::vector<int32_t> RandomInts(int64_t n, uint32_t seed, int32_t lo, int32_t hi) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> dist(lo, hi - 1);
  std::vector<int32_t> v(n);
  for (int32_t& x : v) x = dist(rng);
  return v;
}

// A buffer of n NaNs: any element a kernel fails to write shows up.
inline std::vector<float> Poisoned(int64_t n) {
  return std::vector<float>(n, std::numeric_limits<float>::quiet_NaN());
}

// A random permutation of 0..n-1: non-contiguous block ids.
inline std::vector<int32_t> Shuffled(int32_t n, uint32_t seed) {
  std::vector<int32_t> v(n);
  std::iota(v.begin(), v.end(), 0);
  std::mt19937 rng(seed);
  std::shuffle(v.begin(), v.end(), rng);
  return v;
}

inline std::vector<uint16_t> ToBf16(const std::vector<float>& v) {
  std::vector<uint16_t> out(v.size());
  std::transform(v.begin(), v.end(), out.begin(), FloatToBf16);
  return out;
}

inline std::vector<float> FromBf16(const std::vector<uint16_t>& v) {
  std::vector<float> out(v.size());
  std::transform(v.begin(), v.end(), out.begin(), Bf16ToFloat);
  return out;
}

// The values v takes once stored as BF16.
inline std::vector<float> RoundToBf16(const std::vector<float>& v) { return FromBf16(ToBf16(v)); }

}  // namespace onecard::engine::testing

#endif  // ONECARD_TESTS_ENGINE_KERNELS_KERNEL_TEST_UTIL_H_
