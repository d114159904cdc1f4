// GPTQ (gptq_solver.h): with H = I it is round-to-nearest, code for code;
// on correlated inputs its output error trace((W - Q) H (W - Q)^T) is at
// most round-to-nearest's, over awkward shapes, groups smaller and larger
// than the block, sym and not (the inequality GPTQ exists for, and one that
// a wrong update sign, index or factor breaks); dead inputs give zero
// weights; a non-positive-definite H is refused; the Hessian is 2 X^T X / N;
// and the codes, scales and zero points are gptq.py's, computed here step by
// step in its order (textbook Cholesky, cholesky_inverse, Cholesky of the
// inverse, the column loop with lazy batches), while the solver reaches the
// same factor another way (gptq_solver.cc).
#include "engine/model/gptq_solver.h"

#include <cmath>
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

// gptq.py fasterquant, written out with plain loops (the reference for
// QuantizeGptq): H's dead inputs and dampening, U = cholesky(cholesky_inverse(
// cholesky(H)), upper), then blocks of columns quantized one by one with the
// error spread over the block, and the later columns updated after it.
GptqQuantized GptqPy(std::vector<float> w, int64_t n, int64_t k, std::vector<double> h,
                     const GptqOptions& o) {
  std::vector<double> wd(w.begin(), w.end());
  for (int64_t i = 0; i < k; ++i) {
    if (h[i * k + i] != 0.0) continue;
    h[i * k + i] = 1.0;
    for (int64_t r = 0; r < n; ++r) wd[r * k + i] = 0.0;
  }
  double mean = 0.0;
  for (int64_t i = 0; i < k; ++i) mean += h[i * k + i] / k;
  for (int64_t i = 0; i < k; ++i) h[i * k + i] += o.damp * mean;
  auto cholesky = [k](const std::vector<double>& a) {  // lower L, L L^T = a
    std::vector<double> l(k * k, 0.0);
    for (int64_t j = 0; j < k; ++j) {
      double d = a[j * k + j];
      for (int64_t p = 0; p < j; ++p) d -= l[j * k + p] * l[j * k + p];
      l[j * k + j] = std::sqrt(d);
      for (int64_t i = j + 1; i < k; ++i) {
        double s = a[i * k + j];
        for (int64_t p = 0; p < j; ++p) s -= l[i * k + p] * l[j * k + p];
        l[i * k + j] = s / l[j * k + j];
      }
    }
    return l;
  };
  const std::vector<double> l = cholesky(h);
  std::vector<double> linv(k * k, 0.0);  // L^-1, column by column
  for (int64_t j = 0; j < k; ++j) {
    linv[j * k + j] = 1.0 / l[j * k + j];
    for (int64_t i = j + 1; i < k; ++i) {
      double s = 0.0;
      for (int64_t p = j; p < i; ++p) s += l[i * k + p] * linv[p * k + j];
      linv[i * k + j] = -s / l[i * k + i];
    }
  }
  std::vector<double> hinv(k * k, 0.0);  // L^-T L^-1
  for (int64_t i = 0; i < k; ++i) {
    for (int64_t j = 0; j < k; ++j) {
      for (int64_t p = std::max(i, j); p < k; ++p)
        hinv[i * k + j] += linv[p * k + i] * linv[p * k + j];
    }
  }
  const std::vector<double> l2 = cholesky(hinv);  // U = l2^T
  auto u = [&](int64_t i, int64_t j) { return l2[j * k + i]; };
  GptqQuantized q;
  q.n = n, q.k = k, q.group = o.group;
  q.codes.resize(n * k);
  q.scales.resize(n * (k / o.group));
  q.zeros.resize(n * (k / o.group));
  std::vector<GptqGroupParams> params(n);
  for (int64_t i1 = 0; i1 < k; i1 += o.block) {
    const int64_t i2 = std::min<int64_t>(i1 + o.block, k);
    std::vector<double> w1 = wd;  // the block's working copy
    std::vector<double> err(n * k, 0.0);
    for (int64_t c = i1; c < i2; ++c) {
      if (c % o.group == 0) {
        for (int64_t r = 0; r < n; ++r) {
          std::vector<float> values(o.group);
          for (int32_t j = 0; j < o.group; ++j) values[j] = static_cast<float>(wd[r * k + c + j]);
          params[r] = FindGptqGroupParams(values, o.sym);
          q.scales[r * (k / o.group) + c / o.group] = params[r].scale;
          q.zeros[r * (k / o.group) + c / o.group] = params[r].zero;
        }
      }
      for (int64_t r = 0; r < n; ++r) {
        const double x = w1[r * k + c];
        const uint8_t code = GptqCode(static_cast<float>(x), params[r]);
        q.codes[r * k + c] = code;
        const float value = params[r].scale * static_cast<float>(code - params[r].zero);
        err[r * k + c] = (x - value) / u(c, c);
        for (int64_t j = c; j < i2; ++j) w1[r * k + j] -= err[r * k + c] * u(c, j);
      }
    }
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t j = i2; j < k; ++j) {
        for (int64_t c = i1; c < i2; ++c) wd[r * k + j] -= err[r * k + c] * u(c, j);
      }
    }
  }
  return q;
}

TEST(GptqSolverTest, MatchesGptqPyStepByStep) {
  for (const Case c :
       {Case{20, 128, 32, 64, true}, Case{7, 96, 96, 32, false}, Case{12, 192, 64, 48, true}}) {
    const std::vector<float> w = Normal(c.n * c.k, 0.05f, 31 + c.k);
    const std::vector<float> x = CorrelatedInputs(2 * c.k, c.k, 41 + c.n);
    GptqHessian hessian(c.k);
    hessian.Add(x, 2 * c.k);
    const std::vector<double> h = hessian.Matrix();
    const GptqOptions o = {.group = c.group, .sym = c.sym, .damp = 0.01, .block = c.block};
    absl::StatusOr<GptqQuantized> g = QuantizeGptq(w, c.n, c.k, h, o);
    ASSERT_TRUE(g.ok()) << g.status();
    const GptqQuantized want = GptqPy(w, c.n, c.k, h, o);
    EXPECT_EQ(g->codes, want.codes) << c.k;
    EXPECT_EQ(g->scales, want.scales) << c.k;
    EXPECT_EQ(g->zeros, want.zeros) << c.k;
  }
}

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
