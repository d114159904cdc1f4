// Tests of engine/kernels/bf16.h against bit patterns worked out by hand from
// the bfloat16 definition (the top 16 bits of an IEEE fp32, rounded to nearest
// even).
#include "engine/kernels/bf16.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "gtest/gtest.h"

namespace onecard::engine {
namespace {

float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

TEST(Bf16Test, ExactValuesRoundTrip) {
  for (float f : {0.0f, -0.0f, 1.0f, -2.5f, 65536.0f, 0.15625f}) {
    EXPECT_EQ(Bf16ToFloat(FloatToBf16(f)), f) << f;
  }
  EXPECT_EQ(FloatToBf16(1.0f), 0x3f80);
  EXPECT_EQ(FloatToBf16(-2.0f), 0xc000);
}

TEST(Bf16Test, RoundsToNearestEven) {
  // 1 + 2^-8 is halfway between 1 (even mantissa) and 1 + 2^-7: goes down.
  EXPECT_EQ(FloatToBf16(FromBits(0x3f808000u)), 0x3f80);
  // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 (odd) and 1 + 2^-6: goes up.
  EXPECT_EQ(FloatToBf16(FromBits(0x3f818000u)), 0x3f82);
  // Just above halfway goes up; just below goes down.
  EXPECT_EQ(FloatToBf16(FromBits(0x3f808001u)), 0x3f81);
  EXPECT_EQ(FloatToBf16(FromBits(0x3f807fffu)), 0x3f80);
}

TEST(Bf16Test, InfinityAndNan) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(FloatToBf16(inf), 0x7f80);
  EXPECT_EQ(FloatToBf16(-inf), 0xff80);
  // The largest finite float rounds up to infinity, as IEEE rounding does.
  EXPECT_EQ(FloatToBf16(std::numeric_limits<float>::max()), 0x7f80);
  // A NaN whose payload sits only in the low bits stays a NaN.
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(FromBits(0x7f800001u)))));
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(std::nanf("")))));
}

}  // namespace
}  // namespace onecard::engine
