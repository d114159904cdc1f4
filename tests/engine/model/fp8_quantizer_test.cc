// QuantizeFp8Rows on rows whose scale and codes are known by hand (E4M3:
// 1 = 0x38, 2 = 0x40, 0.5 = 0x30, 448 = 0x7e, sign bit 0x80): scale =
// amax / 448, codes of w / scale; a row of zeros (scale 1), a row whose
// amax / 448 is below the smallest normal fp32, and the refusals (a size
// that is not n * k, a value that is not finite). The codes of real weights
// are checked against ml_dtypes by tests/tools/onecard/quantize_command_test.cc.
#include "engine/model/fp8_quantizer.h"

#include <cfloat>
#include <cmath>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace onecard::engine {
namespace {

using ::testing::HasSubstr;

TEST(Fp8QuantizerTest, ScaleIsAmaxOver448AndCodesAreWOverScale) {
  const std::vector<float> w = {896.0f, -4.0f, 1.0f,  2.0f,   // amax 896: scale 2
                                0.0f,   0.0f,  0.0f,  0.0f,   // zeros: scale 1
                                -44.8f, 0.1f,  0.05f, 0.0f};  // amax 44.8: scale 0.1
  auto m = QuantizeFp8Rows(w, 3, 4, "w");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->scales_kind, Fp8Scales::kRow);
  ASSERT_EQ(m->scales.size(), 3u);
  EXPECT_EQ(m->scales[0], 2.0f);
  EXPECT_EQ(m->scales[1], 1.0f);
  EXPECT_EQ(m->scales[2], 44.8f / 448.0f);
  const std::vector<uint8_t> want = {0x7e, 0xc0, 0x30, 0x38, 0, 0, 0, 0, 0xfe, 0x38, 0x30, 0};
  EXPECT_EQ(m->codes, want);
  EXPECT_TRUE(m->Validate("w").ok());
}

TEST(Fp8QuantizerTest, TinyRowsKeepAPositiveScale) {
  const std::vector<float> w = {1e-42f, -1e-43f};
  auto m = QuantizeFp8Rows(w, 1, 2, "w");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->scales[0], FLT_MIN);
  EXPECT_TRUE(m->Validate("w").ok());
}

TEST(Fp8QuantizerTest, RefusesBadSizesAndValues) {
  EXPECT_THAT(QuantizeFp8Rows(std::vector<float>(5), 2, 3, "w.weight").status().message(),
              HasSubstr("w.weight: 5 values for W [2, 3]"));
  const std::vector<float> w = {1.0f, NAN, 0.0f, INFINITY};
  EXPECT_THAT(QuantizeFp8Rows(w, 2, 2, "w.weight").status().message(),
              HasSubstr("w.weight: value nan at row 0, column 1 is not finite"));
}

}  // namespace
}  // namespace onecard::engine
