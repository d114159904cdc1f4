// Helpers of the kernel reference tests: seeded random inputs (never zeros),
// poisoned outputs, FP8 KV scales with outliers, and fp32 <-> BF16 vector
// conversions. Header-only; used by
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

// Per-kv-head FP8 KV scales (kv_layout.h's KvFp8Scales) for values of
// magnitude about 1: cycling through outliers on both sides (1/64 and 3e-4,
// where values of 7 and 0.13 saturate at 448 * scale; 40, where they fall
// among E4M3's subnormals) and 0.37 in between.
inline std::vector<float> OutlierKvScales(int32_t num_kv_heads) {
  constexpr float kScales[] = {1.0f / 64, 40.0f, 0.37f, 3e-4f};
  std::vector<float> v(num_kv_heads);
  for (int32_t h = 0; h < num_kv_heads; ++h) v[h] = kScales[h % 4];
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
