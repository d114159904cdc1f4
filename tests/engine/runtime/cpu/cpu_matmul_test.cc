// Tests of MatMul (engine/runtime/cpu/cpu_matmul.cc): against LinearRef over
// awkward shapes (rows 1/7/33, widths that are not multiples of 8, output
// counts that are not multiples of the 4-wide tile), with and without bias;
// and bitwise batch invariance: each row's result is the same computed alone,
// among other rows, or on another number of threads.
#include "engine/runtime/cpu/cpu_matmul.h"

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

// (rows, in, out, bias)
class MatMulTest : public ::testing::TestWithParam<std::tuple<int64_t, int64_t, int64_t, bool>> {};

TEST_P(MatMulTest, MatchesLinearRef) {
  const auto [rows, in, out, with_bias] = GetParam();
  const std::vector<float> x = RandomFloats(rows * in, 71), w = RandomFloats(out * in, 72);
  const std::vector<float> b = RandomFloats(out, 73);
  const float* bias = with_bias ? b.data() : nullptr;
  std::vector<float> want = Poisoned(rows * out), got = Poisoned(rows * out);
  ASSERT_TRUE(LinearRef({DType::kF32, x.data(), w.data(), bias, want.data(),
                         static_cast<int32_t>(rows), in, out})
                  .ok());
  ThreadPool pool(2);
  MatMul(pool, {x.data(), w.data(), bias, got.data(), rows, in, out});
  // Both are fp32 sums of the same products in different orders.
  EXPECT_ALL_CLOSE(got, want, (Tolerance{1e-5, 1e-4, 1e-10}));
}

TEST_P(MatMulTest, RowsAreBitwiseIndependent) {
  const auto [rows, in, out, with_bias] = GetParam();
  const std::vector<float> x = RandomFloats(rows * in, 74), w = RandomFloats(out * in, 75);
  const std::vector<float> b = RandomFloats(out, 76);
  const float* bias = with_bias ? b.data() : nullptr;
  ThreadPool two(2), three(3);
  std::vector<float> together(rows * out), on_three(rows * out);
  MatMul(two, {x.data(), w.data(), bias, together.data(), rows, in, out});
  MatMul(three, {x.data(), w.data(), bias, on_three.data(), rows, in, out});
  EXPECT_EQ(together, on_three);
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<float> alone(out);
    MatMul(two, {x.data() + r * in, w.data(), bias, alone.data(), 1, in, out});
    ASSERT_EQ(alone,
              std::vector<float>(together.begin() + r * out, together.begin() + (r + 1) * out))
        << "row " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, MatMulTest,
                         ::testing::Combine(::testing::Values(1, 7, 33),
                                            ::testing::Values(3, 64, 111, 576),
                                            ::testing::Values(1, 33, 96), ::testing::Bool()));

}  // namespace
}  // namespace onecard::engine
