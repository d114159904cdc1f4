// The HostLinearForward tests' fixtures (see host_linear_testing.h).
#include "tests/engine/runtime/cpu/host_linear_testing.h"

#include <cmath>

#include "engine/kernels/bf16.h"
#include "gtest/gtest.h"
#include "tests/engine/kernels/kernel_test_util.h"
#include "tests/testing/int4_testing.h"

namespace onecard::engine::testing {

std::vector<float> Activations(int64_t n, uint32_t seed) {
  std::vector<float> x = testing::RandomFloats(n, seed, -2.0f, 2.0f);
  for (int64_t i = 0; i < n; i += 37) x[i] *= 50.0f;
  for (float& v : x) v = Bf16ToFloat(FloatToBf16(v));
  return x;
}

Int4Fixture MakeInt4(int64_t n, int64_t k, int32_t group, Int4Offsets offsets, bool act_order,
                     uint32_t seed) {
  Int4Fixture f;
  f.m = onecard::testing::RandomInt4Matrix(n, k, group, offsets, seed);
  if (act_order) f.m.columns = testing::Shuffled(static_cast<int32_t>(k), seed + 1);
  f.packed = MakeInt4Packed(n, k, group, offsets);
  EXPECT_TRUE(PackInt4Rows(f.m, ConcatRows(n, 0), n, &f.packed).ok());
  f.w = {.format = HostWeight::Format::kInt4,
         .n = n,
         .k = k,
         .data = f.packed.codes.data(),
         .scales = f.packed.scales.data(),
         .offsets = f.packed.offsets.empty() ? nullptr : f.packed.offsets.data(),
         .group = group,
         .offset_kind = offsets,
         .columns = act_order ? f.m.columns.data() : nullptr};
  return f;
}

std::vector<float> Bounds(const std::vector<float>& dense, const HostWeight& w,
                          const std::vector<float>& x, int64_t rows) {
  std::vector<float> bound(rows * w.n);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < w.n; ++o) {
      double s = 0;
      for (int64_t c = 0; c < w.k; ++c) s += std::fabs(dense[o * w.k + c] * x[r * w.k + c]);
      bound[r * w.n + o] = static_cast<float>(1e-5 * s + 1e-30);
    }
  }
  return bound;
}

Bf16Fixture MakeBf16(int64_t n, int64_t k, uint32_t seed) {
  Bf16Fixture f;
  const std::vector<float> v = testing::RandomFloats(n * k, seed, -0.1f, 0.1f);
  for (float x : v) f.bits.push_back(FloatToBf16(x));
  f.w = {.format = HostWeight::Format::kBf16, .n = n, .k = k, .data = f.bits.data()};
  return f;
}

std::vector<float> Dense(const Bf16Fixture& f) {
  std::vector<float> dense;
  for (uint16_t b : f.bits) dense.push_back(Bf16ToFloat(b));
  return dense;
}

}  // namespace onecard::engine::testing
