// Tests of RmsNormRef and FusedAddRmsNormRef (engine/kernels/rms_norm_ref.cc):
// the plain norm against the formula in double precision; the fused form
// against the add followed by the plain norm (bitwise: it is defined as that
// composition); BF16 against F32 on the same rounded inputs.
#include <cmath>
#include <tuple>

#include "engine/kernels/rms_norm.h"
#include "gtest/gtest.h"
#include "tests/engine/kernels/kernel_test_util.h"
#include "tests/testing/all_close.h"

namespace onecard::engine {
namespace {

using onecard::testing::Tolerance;
using testing::Poisoned;
using testing::RandomFloats;

// out = x / sqrt(mean(x^2) + eps) * w, in double.
std::vector<float> NormInDouble(const std::vector<float>& x, const std::vector<float>& w,
                                int64_t hidden, float eps) {
  std::vector<float> out(x.size());
  for (size_t row = 0; row < x.size() / hidden; ++row) {
    double sum_sq = 0;
    for (int64_t i = 0; i < hidden; ++i)
      sum_sq += double(x[row * hidden + i]) * x[row * hidden + i];
    const double inv_rms = 1.0 / std::sqrt(sum_sq / hidden + eps);
    for (int64_t i = 0; i < hidden; ++i) {
      out[row * hidden + i] = static_cast<float>(x[row * hidden + i] * inv_rms * w[i]);
    }
  }
  return out;
}

class RmsNormRefTest : public ::testing::TestWithParam<std::tuple<int32_t, int64_t>> {};

TEST_P(RmsNormRefTest, MatchesFormula) {
  const auto [num_tokens, hidden] = GetParam();
  const std::vector<float> x = RandomFloats(num_tokens * hidden, 11, -3.0f, 3.0f);
  const std::vector<float> w = RandomFloats(hidden, 12, 0.5f, 1.5f);
  std::vector<float> out = Poisoned(x.size());
  RmsNormParams p{DType::kF32, x.data(), w.data(), out.data(), num_tokens, hidden, 1e-5f};
  ASSERT_TRUE(RmsNormRef(p).ok());
  EXPECT_ALL_CLOSE(out, NormInDouble(x, w, hidden, 1e-5f), Tolerance::For(DType::kF32));
}

TEST_P(RmsNormRefTest, FusedIsAddThenNorm) {
  const auto [num_tokens, hidden] = GetParam();
  const std::vector<float> x = RandomFloats(num_tokens * hidden, 13, -2.0f, 2.0f);
  const std::vector<float> residual_in = RandomFloats(x.size(), 14, -2.0f, 2.0f);
  const std::vector<float> w = RandomFloats(hidden, 15, 0.5f, 1.5f);
  // Composition in the test: the add, then the plain norm.
  std::vector<float> sum(x.size());
  for (size_t i = 0; i < x.size(); ++i) sum[i] = x[i] + residual_in[i];
  std::vector<float> want = Poisoned(x.size());
  RmsNormParams plain{DType::kF32, sum.data(), w.data(), want.data(), num_tokens, hidden, 1e-6f};
  ASSERT_TRUE(RmsNormRef(plain).ok());

  std::vector<float> residual = residual_in;
  std::vector<float> out = Poisoned(x.size());
  FusedAddRmsNormParams p{DType::kF32, x.data(),   residual.data(), w.data(),
                          out.data(),  num_tokens, hidden,          1e-6f};
  ASSERT_TRUE(FusedAddRmsNormRef(p).ok());
  EXPECT_EQ(residual, sum);
  EXPECT_EQ(out, want);
  EXPECT_ALL_CLOSE(out, NormInDouble(sum, w, hidden, 1e-6f), Tolerance::For(DType::kF32));
}

// Split-K partials in place of x: their fp32 sum in slice order, rounded to
// the storage type, is the x that is added.
TEST_P(RmsNormRefTest, PartialsAreSummedInSliceOrderThenAdded) {
  const auto [num_tokens, hidden] = GetParam();
  const size_t n = static_cast<size_t>(num_tokens) * hidden;
  const std::vector<float> partials = RandomFloats(3 * n, 21, -1.0f, 1.0f);
  const std::vector<float> residual_in = RandomFloats(n, 22, -2.0f, 2.0f);
  const std::vector<float> w = RandomFloats(hidden, 23, 0.5f, 1.5f);
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = (partials[i] + partials[n + i]) + partials[2 * n + i];
  std::vector<float> want_residual = residual_in, want = Poisoned(n);
  FusedAddRmsNormParams whole{DType::kF32, x.data(),    want_residual.data(),
                              w.data(),    want.data(), num_tokens,
                              hidden,      1e-6f};
  ASSERT_TRUE(FusedAddRmsNormRef(whole).ok());

  std::vector<float> residual = residual_in, out = Poisoned(n);
  FusedAddRmsNormParams p{.dtype = DType::kF32,
                          .residual = residual.data(),
                          .weight = w.data(),
                          .out = out.data(),
                          .num_tokens = num_tokens,
                          .hidden = hidden,
                          .eps = 1e-6f,
                          .partials = partials.data(),
                          .num_partials = 3};
  ASSERT_TRUE(FusedAddRmsNormRef(p).ok());
  EXPECT_EQ(residual, want_residual);
  EXPECT_EQ(out, want);

  // BF16 storage: the sum rounded to BF16, plus the residual, rounded again.
  const std::vector<float> residual_bf = testing::RoundToBf16(residual_in);
  std::vector<uint16_t> residual16 = testing::ToBf16(residual_bf);
  const std::vector<uint16_t> w16 = testing::ToBf16(testing::RoundToBf16(w));
  std::vector<uint16_t> out16(n, 0xffff);
  p.dtype = DType::kBF16;
  p.residual = residual16.data();
  p.weight = w16.data();
  p.out = out16.data();
  ASSERT_TRUE(FusedAddRmsNormRef(p).ok());
  std::vector<float> sum(n);
  const std::vector<float> x_bf = testing::RoundToBf16(x);
  for (size_t i = 0; i < n; ++i) sum[i] = x_bf[i] + residual_bf[i];
  EXPECT_EQ(testing::FromBf16(residual16), testing::RoundToBf16(sum));
}

TEST_P(RmsNormRefTest, OutMayAliasX) {
  const auto [num_tokens, hidden] = GetParam();
  const std::vector<float> x = RandomFloats(num_tokens * hidden, 16);
  const std::vector<float> w = RandomFloats(hidden, 17);
  std::vector<float> in_place = x;
  RmsNormParams p{DType::kF32, in_place.data(), w.data(), in_place.data(), num_tokens, hidden};
  ASSERT_TRUE(RmsNormRef(p).ok());
  std::vector<float> out(x.size());
  p.x = x.data();
  p.out = out.data();
  ASSERT_TRUE(RmsNormRef(p).ok());
  EXPECT_EQ(in_place, out);
}

TEST_P(RmsNormRefTest, Bf16MatchesF32OnRoundedInputs) {
  const auto [num_tokens, hidden] = GetParam();
  const std::vector<float> x = testing::RoundToBf16(RandomFloats(num_tokens * hidden, 18));
  const std::vector<float> residual = testing::RoundToBf16(RandomFloats(x.size(), 19));
  const std::vector<float> w = testing::RoundToBf16(RandomFloats(hidden, 20));
  const std::vector<uint16_t> x16 = testing::ToBf16(x), w16 = testing::ToBf16(w);
  std::vector<uint16_t> residual16 = testing::ToBf16(residual);
  std::vector<uint16_t> out16(x.size(), 0xffff);
  FusedAddRmsNormParams p{DType::kBF16, x16.data(),   residual16.data(),
                          w16.data(),   out16.data(), num_tokens,
                          hidden,       1e-5f};
  ASSERT_TRUE(FusedAddRmsNormRef(p).ok());
  std::vector<float> sum(x.size());
  for (size_t i = 0; i < x.size(); ++i) sum[i] = x[i] + residual[i];
  EXPECT_ALL_CLOSE(testing::FromBf16(residual16), sum, Tolerance::For(DType::kBF16));
  EXPECT_ALL_CLOSE(testing::FromBf16(out16),
                   NormInDouble(testing::RoundToBf16(sum), w, hidden, 1e-5f),
                   Tolerance::For(DType::kBF16));
}

INSTANTIATE_TEST_SUITE_P(Shapes, RmsNormRefTest,
                         ::testing::Combine(::testing::Values(1, 7, 33),
                                            ::testing::Values(64, 111, 576, 4096)));

TEST(RmsNormRefErrorsTest, BadArguments) {
  std::vector<float> x(8), w(4), out(8);
  RmsNormParams p{DType::kF32, x.data(), w.data(), out.data(), 2, 0};
  EXPECT_EQ(RmsNormRef(p).code(), absl::StatusCode::kInvalidArgument);  // hidden 0
  p.hidden = 4;
  p.weight = nullptr;
  const absl::Status status = RmsNormRef(p);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("weight"), std::string::npos) << status;
  p.weight = w.data();
  p.dtype = DType::kQ4_0;
  EXPECT_EQ(RmsNormRef(p).code(), absl::StatusCode::kUnimplemented);
  FusedAddRmsNormParams f{DType::kF32, x.data(), nullptr, w.data(), out.data(), 2, 4};
  EXPECT_EQ(FusedAddRmsNormRef(f).code(), absl::StatusCode::kInvalidArgument);  // residual
  std::vector<float> residual(8);
  f.residual = residual.data();
  f.x = nullptr;
  f.partials = x.data();  // with no count
  const absl::Status no_count = FusedAddRmsNormRef(f);
  EXPECT_EQ(no_count.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(no_count.message().find("num_partials"), std::string::npos) << no_count;
}

}  // namespace
}  // namespace onecard::engine
