// Tests of SiluMulRef (engine/kernels/silu_mul_ref.cc): silu(gate) * up from
// the packed gate_up rows against the formula in double, including large
// |gate| where exp over/underflows; BF16 against F32.
#include <cmath>
#include <tuple>

#include "engine/kernels/silu_mul.h"
#include "gtest/gtest.h"
#include "tests/engine/kernels/kernel_test_util.h"
#include "tests/testing/all_close.h"

namespace onecard::engine {
namespace {

using onecard::testing::Tolerance;
using testing::Poisoned;
using testing::RandomFloats;

std::vector<float> SiluMulInDouble(const std::vector<float>& gate_up, int32_t num_tokens,
                                   int64_t inter) {
  std::vector<float> out(num_tokens * inter);
  for (int32_t t = 0; t < num_tokens; ++t) {
    for (int64_t i = 0; i < inter; ++i) {
      const double g = gate_up[t * 2 * inter + i];
      const double u = gate_up[t * 2 * inter + inter + i];
      out[t * inter + i] = static_cast<float>(g / (1.0 + std::exp(-g)) * u);
    }
  }
  return out;
}

class SiluMulRefTest : public ::testing::TestWithParam<std::tuple<int32_t, int64_t>> {};

TEST_P(SiluMulRefTest, MatchesFormula) {
  const auto [num_tokens, inter] = GetParam();
  std::vector<float> gate_up = RandomFloats(num_tokens * 2 * inter, 31, -8.0f, 8.0f);
  gate_up[0] = -200.0f;  // exp(200) overflows to inf: silu must give -0, not NaN
  gate_up[1] = 120.0f;
  std::vector<float> out = Poisoned(num_tokens * inter);
  SiluMulParams p{DType::kF32, gate_up.data(), out.data(), num_tokens, inter};
  ASSERT_TRUE(SiluMulRef(p).ok());
  EXPECT_ALL_CLOSE(out, SiluMulInDouble(gate_up, num_tokens, inter), Tolerance::For(DType::kF32));
}

TEST_P(SiluMulRefTest, Bf16MatchesF32) {
  const auto [num_tokens, inter] = GetParam();
  const std::vector<float> gate_up =
      testing::RoundToBf16(RandomFloats(num_tokens * 2 * inter, 32, -6.0f, 6.0f));
  const std::vector<uint16_t> gate_up16 = testing::ToBf16(gate_up);
  std::vector<uint16_t> out16(num_tokens * inter, 0xffff);
  SiluMulParams p{DType::kBF16, gate_up16.data(), out16.data(), num_tokens, inter};
  ASSERT_TRUE(SiluMulRef(p).ok());
  EXPECT_ALL_CLOSE(testing::FromBf16(out16), SiluMulInDouble(gate_up, num_tokens, inter),
                   Tolerance::For(DType::kBF16));
}

INSTANTIATE_TEST_SUITE_P(Shapes, SiluMulRefTest,
                         ::testing::Combine(::testing::Values(1, 7, 33),
                                            ::testing::Values(64, 111, 1536)));

TEST(SiluMulRefErrorsTest, BadArguments) {
  std::vector<float> gate_up(8), out(4);
  SiluMulParams p{DType::kF32, nullptr, out.data(), 1, 4};
  EXPECT_EQ(SiluMulRef(p).code(), absl::StatusCode::kInvalidArgument);
  p.gate_up = gate_up.data();
  p.inter = -4;
  EXPECT_EQ(SiluMulRef(p).code(), absl::StatusCode::kInvalidArgument);
  p.inter = 4;
  p.dtype = DType::kI32;
  EXPECT_EQ(SiluMulRef(p).code(), absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace onecard::engine
