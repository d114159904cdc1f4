// GPTQ (gptq_solver.h): with H = I it is round-to-nearest, code for code;
// on correlated inputs its output error trace((W - Q) H (W - Q)^T) is at
// most round-to-nearest's, over awkward shapes, groups smaller and larger
// than the block, sym and not (the inequality GPTQ exists for, and one that
// a wrong update sign, index or factor breaks); dead inputs give zero
// weights; a non-positive-definite H is refused; the Hessian is 2 X^T X / N.
#include "engine/model/gptq_solver.h"

#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace onecard::engine {
namespace {

std::vector<float> Normal(int64_t count, float sigma, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, sigma);
  std::vector<float> v(count);
  for (float& x : v) x = normal(rng);
  return v;
}

// X [rows, k] with correlated columns (a random mix of a few factors plus
// noise), as layer inputs are.
std::vector<float> CorrelatedInputs(int64_t rows, int64_t k, uint32_t seed) {
  const int64_t factors = 4;
  const std::vector<float> f = Normal(rows * factors, 1.0f, seed);
  const std::vector<float> mix = Normal(factors * k, 1.0f, seed + 1);
  std::vector<float> x = Normal(rows * k, 0.3f, seed + 2);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < k; ++c) {
      for (int64_t p = 0; p < factors; ++p) x[r * k + c] += f[r * factors + p] * mix[p * k + c];
    }
  }
  return x;
}

TEST(GptqHessianTest, IsTwiceXtXOverN) {
  const int64_t k = 5, rows = 7;
  const std::vector<float> x = Normal(rows * k, 1.0f, 3);
  GptqHessian h(k);
  h.Add(std::span(x).subspan(0, 3 * k), 3);
  h.Add(std::span(x).subspan(3 * k), rows - 3);
  EXPECT_EQ(h.num_rows(), rows);
  const std::vector<double> m = h.Matrix();
  for (int64_t i = 0; i < k; ++i) {
    for (int64_t j = 0; j < k; ++j) {
      double s = 0;
      for (int64_t r = 0; r < rows; ++r) s += double{x[r * k + i]} * x[r * k + j];
      EXPECT_NEAR(m[i * k + j], 2 * s / rows, 1e-12) << i << "," << j;
    }
  }
}

TEST(GptqSolverTest, IdentityHessianIsRoundToNearest) {
  const int64_t n = 24, k = 96;
  const std::vector<float> w = Normal(n * k, 0.05f, 5);
  std::vector<double> identity(k * k, 0.0);
  for (int64_t i = 0; i < k; ++i) identity[i * k + i] = 1.0;
  for (bool sym : {true, false}) {
    absl::StatusOr<GptqQuantized> g =
        QuantizeGptq(w, n, k, identity, {.group = 32, .sym = sym, .block = 64});
    absl::StatusOr<GptqQuantized> rtn = QuantizeGptqRtn(w, n, k, 32, sym);
    ASSERT_TRUE(g.ok() && rtn.ok()) << g.status();
    EXPECT_EQ(g->codes, rtn->codes);
    EXPECT_EQ(g->scales, rtn->scales);
    EXPECT_EQ(g->zeros, rtn->zeros);
  }
}

struct Case {
  int64_t n, k;
  int32_t group, block;
  bool sym;
};

class GptqSolverErrorTest : public ::testing::TestWithParam<Case> {};

TEST_P(GptqSolverErrorTest, OutputErrorIsAtMostRoundToNearests) {
  const Case c = GetParam();
  const std::vector<float> w = Normal(c.n * c.k, 0.05f, 11 + c.k);
  const std::vector<float> x = CorrelatedInputs(4 * c.k, c.k, 21 + c.n);
  GptqHessian hessian(c.k);
  hessian.Add(x, 4 * c.k);
  const std::vector<double> h = hessian.Matrix();
  absl::StatusOr<GptqQuantized> g = QuantizeGptq(
      w, c.n, c.k, h, {.group = c.group, .sym = c.sym, .damp = 0.01, .block = c.block});
  absl::StatusOr<GptqQuantized> rtn = QuantizeGptqRtn(w, c.n, c.k, c.group, c.sym);
  ASSERT_TRUE(g.ok() && rtn.ok()) << g.status();
  const double e_gptq = GptqOutputError(w, *g, h), e_rtn = GptqOutputError(w, *rtn, h);
  EXPECT_LT(e_gptq, e_rtn) << "gptq " << e_gptq << " rtn " << e_rtn;
  RecordProperty("error_ratio", std::to_string(e_gptq / e_rtn));
}

INSTANTIATE_TEST_SUITE_P(Shapes, GptqSolverErrorTest,
                         ::testing::Values(Case{8, 64, 32, 128, true}, Case{24, 96, 32, 32, false},
                                           Case{40, 160, 32, 64, true},
                                           Case{16, 256, 128, 128, true},
                                           Case{16, 256, 128, 128, false},
                                           Case{32, 192, 64, 48, true}));

TEST(GptqSolverTest, DeadInputsGetZeroWeights) {
  const int64_t n = 8, k = 32;
  const std::vector<float> w = Normal(n * k, 0.05f, 7);
  std::vector<float> x = CorrelatedInputs(64, k, 9);
  for (int64_t r = 0; r < 64; ++r) x[r * k + 5] = 0.0f;  // input 5 never fires
  GptqHessian hessian(k);
  hessian.Add(x, 64);
  absl::StatusOr<GptqQuantized> g =
      QuantizeGptq(w, n, k, hessian.Matrix(), {.group = 32, .sym = true});
  ASSERT_TRUE(g.ok()) << g.status();
  const std::vector<float> deq = DequantizeGptq(*g);
  for (int64_t r = 0; r < n; ++r) EXPECT_EQ(deq[r * k + 5], 0.0f) << r;
}

TEST(GptqSolverTest, RefusesAnIndefiniteHessian) {
  const int64_t k = 8;
  std::vector<double> h(k * k, 0.0);
  for (int64_t i = 0; i < k; ++i) h[i * k + i] = -1.0;
  const std::vector<float> w(8 * k, 0.1f);
  const absl::Status s = QuantizeGptq(w, 8, k, h, {.group = 8}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), ::testing::HasSubstr("--damp"));
}

}  // namespace
}  // namespace onecard::engine
