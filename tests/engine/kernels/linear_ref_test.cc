// Tests of LinearRef (engine/kernels/linear_ref.cc): y = x W^T + b against
// the sum in double, with and without bias, over awkward row counts and
// widths; BF16 against F32 on the same rounded operands.
#include <tuple>

#include "engine/kernels/linear.h"
#include "gtest/gtest.h"
#include "tests/engine/kernels/kernel_test_util.h"
#include "tests/testing/all_close.h"

namespace onecard::engine {
namespace {

using onecard::testing::Tolerance;
using testing::Poisoned;
using testing::RandomFloats;

std::vector<float> LinearInDouble(const std::vector<float>& x, const std::vector<float>& w,
                                  const float* bias, int32_t rows, int64_t in, int64_t out) {
  std::vector<float> y(rows * out);
  for (int32_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < out; ++o) {
      double acc = bias != nullptr ? bias[o] : 0.0;
      for (int64_t k = 0; k < in; ++k) acc += double(x[r * in + k]) * w[o * in + k];
      y[r * out + o] = static_cast<float>(acc);
    }
  }
  return y;
}

// (rows, in, out, with bias)
class LinearRefTest : public ::testing::TestWithParam<std::tuple<int32_t, int64_t, int64_t, bool>> {
};

TEST_P(LinearRefTest, MatchesSum) {
  const auto [rows, in, out, with_bias] = GetParam();
  const std::vector<float> x = RandomFloats(rows * in, 41);
  const std::vector<float> w = RandomFloats(out * in, 42);
  const std::vector<float> b = RandomFloats(out, 43);
  const float* bias = with_bias ? b.data() : nullptr;
  std::vector<float> y = Poisoned(rows * out);
  LinearParams p{DType::kF32, x.data(), w.data(), bias, y.data(), rows, in, out};
  ASSERT_TRUE(LinearRef(p).ok());
  // fp32 sums of `in` products of size <= 1: error grows like sqrt(in) ulps.
  EXPECT_ALL_CLOSE(y, LinearInDouble(x, w, bias, rows, in, out), (Tolerance{1e-5, 1e-4, 1e-10}));
}

TEST_P(LinearRefTest, Bf16MatchesF32) {
  const auto [rows, in, out, with_bias] = GetParam();
  const std::vector<float> x = testing::RoundToBf16(RandomFloats(rows * in, 44));
  const std::vector<float> w = testing::RoundToBf16(RandomFloats(out * in, 45));
  const std::vector<float> b = testing::RoundToBf16(RandomFloats(out, 46));
  const std::vector<uint16_t> x16 = testing::ToBf16(x), w16 = testing::ToBf16(w),
                              b16 = testing::ToBf16(b);
  std::vector<uint16_t> y16(rows * out, 0xffff);
  LinearParams p{DType::kBF16, x16.data(), w16.data(), with_bias ? b16.data() : nullptr,
                 y16.data(),   rows,       in,         out};
  ASSERT_TRUE(LinearRef(p).ok());
  EXPECT_ALL_CLOSE(testing::FromBf16(y16),
                   LinearInDouble(x, w, with_bias ? b.data() : nullptr, rows, in, out),
                   Tolerance::For(DType::kBF16));
}

INSTANTIATE_TEST_SUITE_P(Shapes, LinearRefTest,
                         ::testing::Combine(::testing::Values(1, 7, 33), ::testing::Values(64, 111),
                                            ::testing::Values(33, 96), ::testing::Bool()));

TEST(LinearRefErrorsTest, BadArguments) {
  std::vector<float> x(4), w(8), y(2);
  LinearParams p{DType::kF32, x.data(), nullptr, nullptr, y.data(), 1, 4, 2};
  const absl::Status status = LinearRef(p);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("weight"), std::string::npos) << status;
  p.weight = w.data();
  p.out_features = 0;
  EXPECT_EQ(LinearRef(p).code(), absl::StatusCode::kInvalidArgument);
  p.out_features = 2;
  p.dtype = DType::kF16;
  EXPECT_EQ(LinearRef(p).code(), absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace onecard::engine
