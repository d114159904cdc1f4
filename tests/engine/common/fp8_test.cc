// engine/common/fp8.h against ml_dtypes' float8_e4m3fn
// (tests/golden/fp8/e4m3.json, tests/golden/make_fp8_goldens.py): every
// code's value, and the code of float32 inputs (ties between neighbouring
// codes, points either side of them, subnormals, saturation, NaN, random
// values over eight scales) after the saturation the golden applies.
#include "engine/common/fp8.h"

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/all_close.h"

namespace onecard::engine {
namespace {

nlohmann::json LoadGolden() {
  const std::string path = testing::SourcePath("tests/golden/fp8/e4m3.json");
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << path << " is missing or not JSON";
  return j;
}

TEST(E4m3Test, DecodesEveryCodeAsMlDtypes) {
  const nlohmann::json golden = LoadGolden();
  ASSERT_EQ(golden["decode"].size(), 256u);
  for (int code = 0; code < 256; ++code) {
    const nlohmann::json& want = golden["decode"][code];
    const float got = E4m3ToFloat(static_cast<uint8_t>(code));
    if (want.is_string()) {
      EXPECT_TRUE(std::isnan(got)) << "code " << code;
    } else {
      EXPECT_EQ(BitsFromFloat(got), BitsFromFloat(want.get<float>())) << "code " << code;
    }
  }
}

TEST(E4m3Test, EncodesAsMlDtypesAfterSaturation) {
  const nlohmann::json golden = LoadGolden();
  ASSERT_GT(golden["encode"].size(), 1000u);
  int checked = 0;
  for (const nlohmann::json& c : golden["encode"]) {
    const float x = FloatFromBits(c["bits"].get<uint32_t>());
    EXPECT_EQ(FloatToE4m3(x), c["code"].get<int>()) << "x = " << x << " (bits " << c["bits"] << ")";
    ++checked;
  }
  EXPECT_EQ(checked, static_cast<int>(golden["encode"].size()));
}

TEST(E4m3Test, FiniteInputsNeverBecomeNan) {
  for (uint32_t bits = 0; bits < 0x7f800000u; bits += 0x1234u) {
    for (uint32_t sign : {0u, 0x80000000u}) {
      const uint8_t code = FloatToE4m3(FloatFromBits(bits | sign));
      EXPECT_NE(code & 0x7fu, 0x7fu) << "bits " << (bits | sign);
    }
  }
  EXPECT_EQ(FloatToE4m3(INFINITY), 0x7e);
  EXPECT_EQ(FloatToE4m3(-INFINITY), 0xfe);
}

TEST(E4m3Test, RoundTripsEveryFiniteCode) {
  for (int code = 0; code < 256; ++code) {
    if ((code & 0x7f) == 0x7f) continue;  // NaN
    EXPECT_EQ(FloatToE4m3(E4m3ToFloat(static_cast<uint8_t>(code))), code) << "code " << code;
  }
}

TEST(E4m3Test, RoundThroughScales) {
  EXPECT_FLOAT_EQ(RoundThroughE4m3(1000.0f, 4.0f), 1024.0f);       // 250 -> 256
  EXPECT_FLOAT_EQ(RoundThroughE4m3(1e6f, 2.0f), 2.0f * kE4m3Max);  // saturates
  EXPECT_FLOAT_EQ(RoundThroughE4m3(0.3f, 1.0f), 0.3125f);
}

}  // namespace
}  // namespace onecard::engine
