// DequantizeToF32 / DequantizeInto against the gguf package's dequantizers
// (tests/golden/model/dequant_<TYPE>.{bin,json}, made by
// make_model_goldens.py), plus the fp16 / bf16 conversions of quant_blocks.h
// against the compiler's own _Float16 and hand-checked bf16 roundings.
#include "engine/model/dequantize.h"

#include <cmath>
#include <random>

#include "engine/model/model_weights.h"
#include "engine/model/quant_blocks.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/model/model_test_util.h"
#include "tests/testing/all_close.h"

namespace onecard::engine {
namespace {

using ::testing::HasSubstr;

struct GoldenCase {
  const char* name;
  DType dtype;
};

void PrintTo(const GoldenCase& c, std::ostream* os) { *os << c.name; }

class DequantizeGoldenTest : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(DequantizeGoldenTest, MatchesTheGgufPackage) {
  std::string base =
      ::onecard::testing::SourcePath(std::string("tests/golden/model/dequant_") + GetParam().name);
  std::string raw = ::onecard::testing::ReadTestFile(base + ".bin");
  nlohmann::json golden = ::onecard::testing::LoadTestJson(base + ".json");
  std::vector<float> want = golden["values"].get<std::vector<float>>();
  int64_t numel = golden["num_elements"].get<int64_t>();
  ASSERT_EQ(static_cast<int64_t>(want.size()), numel);
  ASSERT_EQ(BlockElements(GetParam().dtype), golden["block_size"].get<int64_t>());
  ASSERT_EQ(BlockBytes(GetParam().dtype), golden["type_size"].get<int64_t>());
  // One block per row, so the row-length check sees a real shape.
  int64_t block = BlockElements(GetParam().dtype);
  TensorView view{"golden",
                  GetParam().dtype,
                  {numel / block, block},
                  reinterpret_cast<const uint8_t*>(raw.data()),
                  raw.size(),
                  0,
                  base + ".bin"};
  auto got = DequantizeToF32(view);
  ASSERT_TRUE(got.ok()) << got.status();
  // The same fp32 operations in the same order: equal up to the last bit,
  // allowing one ulp for a compiler's contraction into fused multiply-adds.
  EXPECT_ALL_CLOSE(*got, want, (::onecard::testing::Tolerance{1e-30, 2.4e-7, 1e-13}));
  std::vector<float> into(numel, std::nanf(""));  // poisoned
  ASSERT_TRUE(DequantizeInto(view, into.data()).ok());
  EXPECT_EQ(into, *got);
}

INSTANTIATE_TEST_SUITE_P(
    AllTypes, DequantizeGoldenTest,
    ::testing::Values(GoldenCase{"Q8_0", DType::kQ8_0}, GoldenCase{"Q4_0", DType::kQ4_0},
                      GoldenCase{"Q4_1", DType::kQ4_1}, GoldenCase{"Q4_K", DType::kQ4_K},
                      GoldenCase{"Q5_K", DType::kQ5_K}, GoldenCase{"Q6_K", DType::kQ6_K},
                      GoldenCase{"F16", DType::kF16}, GoldenCase{"BF16", DType::kBF16}),
    [](const ::testing::TestParamInfo<GoldenCase>& info) { return std::string(info.param.name); });

TEST(DequantizeTest, F32IsCopied) {
  std::vector<float> values = {1.5f, -2.25f, 3e-30f, 7.0f};
  TensorView view{"f", DType::kF32, {4}, reinterpret_cast<const uint8_t*>(values.data()), 16};
  EXPECT_EQ(DequantizeToF32(view).value(), values);
}

TEST(DequantizeTest, SizeMismatchNamesTheTensorAndFile) {
  std::string raw(33, '\0');
  TensorView view{"blk.0.attn_q.weight",
                  DType::kQ8_0,
                  {32},
                  reinterpret_cast<const uint8_t*>(raw.data()),
                  raw.size(),
                  96,
                  "m.gguf"};
  auto got = DequantizeToF32(view);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(got.status().message()),
              HasSubstr("m.gguf: tensor 'blk.0.attn_q.weight' at byte offset 96 holds 33 bytes; "
                        "Q8_0 of 32 elements needs 34"));
  view.shape = {2, 16};
  view.size_bytes = 34;
  EXPECT_THAT(std::string(DequantizeToF32(view).status().message()),
              HasSubstr("rows of 16 elements, not a multiple of the Q8_0 block size 32"));
}

TEST(DequantizeTest, IntegerTensorsAreRefused) {
  std::vector<int32_t> ids = {1, 2};
  TensorView view{"ids", DType::kI32, {2}, reinterpret_cast<const uint8_t*>(ids.data()), 8};
  auto got = DequantizeToF32(view);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(got.status().message()), HasSubstr("'ids' has dtype I32"));
  EXPECT_FALSE(IsDequantizable(DType::kU8));
  EXPECT_TRUE(IsDequantizable(DType::kQ6_K));
}

TEST(HalfConversionTest, EveryHalfMatchesTheCompiler) {
  for (uint32_t h = 0; h < 65536; ++h) {
    _Float16 f16;
    uint16_t bits = static_cast<uint16_t>(h);
    std::memcpy(&f16, &bits, 2);
    float want = static_cast<float>(f16);
    float got = HalfToFloat(bits);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << h;
      continue;
    }
    ASSERT_EQ(BitsFromFloat(got), BitsFromFloat(want)) << h;
    ASSERT_EQ(FloatToHalf(got), bits) << h;  // exact round trip
  }
}

TEST(HalfConversionTest, RoundingMatchesTheCompiler) {
  std::mt19937 rng(99);
  std::vector<float> specials = {
      65519.996f,   65520.0f,      1e6f,    -1e6f, 2.98e-8f, 2.9802322e-8f, 5.9604645e-8f,
      8.940697e-8f, 6.1035156e-5f, 6.1e-5f, 0.0f,  -0.0f,    INFINITY,      -INFINITY};
  for (int i = 0; i < 200000; ++i) {
    float exponent = std::uniform_real_distribution<float>(-28.0f, 17.0f)(rng);
    float sign = (rng() & 1) ? -1.0f : 1.0f;
    specials.push_back(sign * std::exp2(exponent));
  }
  for (float f : specials) {
    _Float16 want = static_cast<_Float16>(f);
    uint16_t want_bits;
    std::memcpy(&want_bits, &want, 2);
    ASSERT_EQ(FloatToHalf(f), want_bits) << f;
  }
  EXPECT_EQ(FloatToHalf(NAN) & 0x7c00, 0x7c00);
  EXPECT_NE(FloatToHalf(NAN) & 0x03ff, 0);
}

TEST(Bf16ConversionTest, RoundsToNearestEven) {
  EXPECT_EQ(FloatToBf16(1.0f), 0x3f80);
  EXPECT_EQ(Bf16ToFloat(0x3f80), 1.0f);
  EXPECT_EQ(Bf16ToFloat(0xc040), -3.0f);
  // 1 + 2^-8 is halfway between bf16 1.0 and 1 + 2^-7: ties to even (1.0).
  EXPECT_EQ(FloatToBf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 (odd) and 1 + 2^-6: up.
  EXPECT_EQ(FloatToBf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_EQ(FloatToBf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)), 0x3f81);
  EXPECT_EQ(FloatToBf16(INFINITY), 0x7f80);
  EXPECT_EQ(FloatToBf16(3.4028235e38f), 0x7f80);  // rounds up to infinity
  uint16_t nan = FloatToBf16(NAN);
  EXPECT_TRUE(std::isnan(Bf16ToFloat(nan)));
  for (uint32_t b = 0; b < 65536; ++b) {
    float f = Bf16ToFloat(static_cast<uint16_t>(b));
    if (!std::isnan(f)) ASSERT_EQ(FloatToBf16(f), b);
  }
}

}  // namespace
}  // namespace onecard::engine
