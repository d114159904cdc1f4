// Fp8Matrix (engine/kernels/fp8_weight.h): values are the ml_dtypes decode of
// each code (tests/golden/fp8/e4m3.json) times the scale of the row or the
// 128 x 128 block; Validate refuses broken arrays naming the weight; parts
// stack as the fused projections need, and block scales never straddle parts.
#include "engine/kernels/fp8_weight.h"

#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/all_close.h"

namespace onecard::engine {
namespace {

using ::testing::HasSubstr;

std::vector<float> GoldenDecode() {
  std::ifstream in(testing::SourcePath("tests/golden/fp8/e4m3.json"));
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, false);
  std::vector<float> out;
  if (j.is_discarded()) return out;
  for (const auto& v : j["decode"]) {
    out.push_back(v.is_string() ? std::numeric_limits<float>::quiet_NaN() : v.get<float>());
  }
  return out;
}

Fp8Matrix Make(int64_t n, int64_t k, Fp8Scales kind) {
  Fp8Matrix m{.n = n, .k = k, .scales_kind = kind};
  for (int64_t i = 0; i < n * k; ++i) {
    uint8_t code = static_cast<uint8_t>((i * 37 + 11) & 0xff);
    if ((code & 0x7f) == 0x7f) code ^= 1;  // no NaN
    m.codes.push_back(code);
  }
  for (int64_t i = 0; i < Fp8ScaleCount(n, k, kind); ++i) m.scales.push_back(0.5f + 0.25f * i);
  return m;
}

TEST(Fp8WeightTest, ScaleCounts) {
  EXPECT_EQ(Fp8ScaleCount(300, 200, Fp8Scales::kRow), 300);
  EXPECT_EQ(Fp8ScaleCount(300, 200, Fp8Scales::kBlock128), 3 * 2);
  EXPECT_EQ(Fp8ScaleCount(256, 128, Fp8Scales::kBlock128), 2);
}

TEST(Fp8WeightTest, ValuesAreTheDecodedCodeTimesTheScale) {
  const std::vector<float> decode = GoldenDecode();
  ASSERT_EQ(decode.size(), 256u);
  for (Fp8Scales kind : {Fp8Scales::kRow, Fp8Scales::kBlock128}) {
    const Fp8Matrix m = Make(260, 300, kind);
    ASSERT_TRUE(m.Validate("w").ok());
    const std::vector<float> all = DequantizeFp8(m);
    for (int64_t r = 0; r < m.n; ++r) {
      for (int64_t c = 0; c < m.k; ++c) {
        const float scale =
            kind == Fp8Scales::kRow ? m.scales[r] : m.scales[(r / 128) * 3 + c / 128];
        const float want = decode[m.codes[r * m.k + c]] * scale;
        ASSERT_EQ(m.Value(r, c), want) << Fp8ScalesName(kind) << " " << r << "," << c;
        ASSERT_EQ(all[r * m.k + c], want);
      }
    }
  }
}

TEST(Fp8WeightTest, ValidateNamesWhatIsWrong) {
  Fp8Matrix m = Make(4, 8, Fp8Scales::kRow);
  m.codes.pop_back();
  EXPECT_THAT(m.Validate("layers.3.q").message(),
              HasSubstr("layers.3.q: fp8 weight [4, 8] has 31 codes"));
  m = Make(4, 8, Fp8Scales::kRow);
  m.codes[13] = 0xff;
  EXPECT_THAT(m.Validate("w").message(), HasSubstr("fp8 code 13 (row 1, column 5) is NaN"));
  m = Make(4, 8, Fp8Scales::kRow);
  m.scales[2] = 0.0f;
  EXPECT_THAT(m.Validate("w").message(), HasSubstr("fp8 scale 2 is 0"));
  m.scales[2] = std::numeric_limits<float>::infinity();
  EXPECT_THAT(m.Validate("w").message(), HasSubstr("not finite and positive"));
  m = Make(4, 8, Fp8Scales::kBlock128);
  m.scales.push_back(1.0f);
  EXPECT_THAT(m.Validate("w").message(), HasSubstr("block128 scales has 2 scales, not 1"));
  EXPECT_FALSE((Fp8Matrix{.n = 0, .k = 8}).Validate("w").ok());
}

TEST(Fp8WeightTest, StacksPartsRowByRow) {
  const Fp8Matrix q = Make(256, 200, Fp8Scales::kBlock128);
  const Fp8Matrix k = Make(130, 200, Fp8Scales::kBlock128);
  Fp8Matrix fused;
  ASSERT_TRUE(StackFp8Rows({&q, &k}, "qkv", &fused).ok());
  ASSERT_TRUE(fused.Validate("qkv").ok());
  EXPECT_EQ(fused.n, 386);
  for (int64_t r = 0; r < fused.n; ++r) {
    for (int64_t c = 0; c < fused.k; c += 7) {
      const float want = r < 256 ? q.Value(r, c) : k.Value(r - 256, c);
      ASSERT_EQ(fused.Value(r, c), want) << r << "," << c;
    }
  }
  EXPECT_THAT(StackFp8Rows({&k, &q}, "qkv", &fused).message(),
              HasSubstr("qkv: fp8 part 0 has 130 rows, not a multiple of the 128-row block"));
  const Fp8Matrix row = Make(4, 200, Fp8Scales::kRow);
  EXPECT_THAT(StackFp8Rows({&q, &row}, "qkv", &fused).message(), HasSubstr("fp8 part 1"));
  const Fp8Matrix wide = Make(4, 208, Fp8Scales::kRow);
  EXPECT_FALSE(StackFp8Rows({&row, &wide}, "gate_up", &fused).ok());
}

}  // namespace
}  // namespace onecard::engine
