// GPTQ's round-to-nearest quantizer and v1 packing against a reference
// written here from GPTQ's published formulas (quant.py find_params and
// quantize, AutoGPTQ's pack; nothing of gptq_quantizer.cc is called for it),
// over awkward shapes and groups built to hit the rules' corners: all zero,
// no negative value (sym keeps xmin = 0), no positive value, one outlier,
// values on half steps (round half to even). The packed words are decoded
// bit by bit here, and the v1 zero points plus 0x11111111 give the zeros.
#include "engine/model/gptq_quantizer.h"

#include <cmath>
#include <random>

#include "engine/common/fp16.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace onecard::engine {
namespace {

using ::testing::HasSubstr;

struct Shape {
  int64_t n, k;
  int32_t group;
  bool sym;
};

// W with seeded normal values and, in row r % 6, a special group.
std::vector<float> MakeWeights(const Shape& s, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  std::vector<float> w(s.n * s.k);
  for (float& v : w) v = normal(rng);
  for (int64_t r = 0; r < s.n; ++r) {
    float* g = w.data() + r * s.k;  // the row's first group
    for (int32_t i = 0; i < s.group; ++i) {
      switch (r % 6) {
        case 0:
          g[i] = 0.0f;
          break;
        case 1:
          g[i] = std::fabs(g[i]);
          break;
        case 2:
          g[i] = -std::fabs(g[i]);
          break;
        case 3:
          g[i] = i == 0 ? 3.0f : g[i];
          break;
        case 4:
          g[i] = 0.1f * static_cast<float>((i % 31) - 15) / 2.0f;
          break;  // half steps
        default:
          break;
      }
    }
  }
  return w;
}

// quant.py, per group, in fp32, as torch evaluates it.
void ReferenceGroup(const float* x, int32_t size, bool sym, float* scale, int* zero) {
  float xmin = 0.0f, xmax = 0.0f;  // torch.minimum(x.min(1)[0], zeros) ...
  for (int32_t i = 0; i < size; ++i) {
    if (x[i] < xmin) xmin = x[i];
    if (x[i] > xmax) xmax = x[i];
  }
  if (sym) {
    xmax = std::fabs(xmin) > xmax ? std::fabs(xmin) : xmax;
    if (xmin < 0) xmin = -xmax;
  }
  if (xmin == 0 && xmax == 0) xmin = -1, xmax = 1;
  *scale = (xmax - xmin) / 15.0f;
  *zero = sym ? 8 : static_cast<int>(std::nearbyint(-xmin / *scale));
}

class GptqQuantizerTest : public ::testing::TestWithParam<Shape> {};

TEST_P(GptqQuantizerTest, MatchesGptqFormulasAndPacking) {
  const Shape s = GetParam();
  const std::vector<float> w = MakeWeights(s, 1234 + s.n + s.k);
  absl::StatusOr<GptqQuantized> q = QuantizeGptqRtn(w, s.n, s.k, s.group, s.sym);
  ASSERT_TRUE(q.ok()) << q.status();
  absl::StatusOr<GptqV1Tensors> t = PackGptqV1(*q);
  ASSERT_TRUE(t.ok()) << t.status();
  const int64_t groups = s.k / s.group;
  ASSERT_EQ(t->qweight.size(), static_cast<size_t>(s.k / 8 * s.n));
  ASSERT_EQ(t->qzeros.size(), static_cast<size_t>(groups * s.n / 8));
  ASSERT_EQ(t->scales.size(), static_cast<size_t>(groups * s.n));
  ASSERT_EQ(t->g_idx.size(), static_cast<size_t>(s.k));
  int64_t mismatches = 0;
  for (int64_t r = 0; r < s.n; ++r) {
    for (int64_t gi = 0; gi < groups; ++gi) {
      const float* x = w.data() + r * s.k + gi * s.group;
      float scale;
      int zero;
      ReferenceGroup(x, s.group, s.sym, &scale, &zero);
      EXPECT_EQ(t->scales[gi * s.n + r], FloatToHalf(scale)) << r << "," << gi;
      const uint32_t zword = static_cast<uint32_t>(t->qzeros[gi * s.n / 8 + r / 8]) + 0x11111111u;
      EXPECT_EQ(static_cast<int>((zword >> (4 * (r % 8))) & 15), zero) << r << "," << gi;
      for (int32_t i = 0; i < s.group; ++i) {
        const int64_t c = gi * s.group + i;
        float code = std::nearbyint(x[i] / scale) + static_cast<float>(zero);
        code = code < 0 ? 0 : (code > 15 ? 15 : code);
        const uint32_t word = static_cast<uint32_t>(t->qweight[c / 8 * s.n + r]);
        const int got = static_cast<int>((word >> (4 * (c % 8))) & 15);
        mismatches += got != static_cast<int>(code);
        // Round to nearest: within half a step of the grid point unless clamped.
        const float value = scale * static_cast<float>(got - zero);
        if (code > 0 && code < 15) {
          EXPECT_LE(std::fabs(value - x[i]), 0.5f * scale * (1 + 1e-6f)) << r << "," << c;
        }
      }
    }
  }
  EXPECT_EQ(mismatches, 0);
  for (int64_t c = 0; c < s.k; ++c) EXPECT_EQ(t->g_idx[c], c / s.group);
}

INSTANTIATE_TEST_SUITE_P(Shapes, GptqQuantizerTest,
                         ::testing::Values(Shape{8, 8, 8, true}, Shape{8, 8, 8, false},
                                           Shape{24, 96, 32, true}, Shape{24, 96, 32, false},
                                           Shape{40, 160, 32, true}, Shape{16, 256, 128, false},
                                           Shape{16, 256, 128, true}, Shape{48, 72, 72, true},
                                           Shape{56, 384, 128, false}));

TEST(GptqQuantizerCornerTest, SymmetricRulesOfGptq) {
  // No negative value: xmin stays 0, scale = max / 15, codes 8..15 clamp.
  const std::vector<float> positive = {0.0f, 0.5f, 1.5f, 0.25f, 0.0f, 1.0f, 0.75f, 0.1f};
  GptqGroupParams p = FindGptqGroupParams(positive, /*sym=*/true);
  EXPECT_FLOAT_EQ(p.scale, 1.5f / 15.0f);
  EXPECT_EQ(p.zero, 8);
  EXPECT_EQ(GptqCode(1.5f, p), 15);  // round(15) + 8 clamps
  // Mixed signs: scale = 2 max|w| / 15 (here exactly 1); round half to even.
  p = FindGptqGroupParams(std::vector<float>{-7.5f, 3.0f}, true);
  EXPECT_EQ(p.scale, 1.0f);
  EXPECT_EQ(GptqCode(-7.5f, p), 0);  // round(-7.5) = -8
  EXPECT_EQ(GptqCode(7.5f, p), 15);  // round(7.5) = 8, + 8 clamps
  EXPECT_EQ(GptqCode(2.5f, p), 10);  // round(2.5) = 2
  EXPECT_EQ(GptqCode(3.5f, p), 12);  // round(3.5) = 4
  // All zero: xmin, xmax = -1, 1: scale 2 / 15, every code the zero point.
  p = FindGptqGroupParams(std::vector<float>(4, 0.0f), true);
  EXPECT_EQ(p.scale, 2.0f / 15.0f);
  EXPECT_EQ(GptqCode(0.0f, p), 8);
  // Asymmetric: zero = round(-xmin / scale).
  p = FindGptqGroupParams(std::vector<float>{-3.0f, 12.0f}, false);
  EXPECT_EQ(p.scale, 1.0f);
  EXPECT_EQ(p.zero, 3);
  EXPECT_EQ(GptqCode(12.0f, p), 15);
}

TEST(GptqQuantizerCornerTest, RejectsShapesItCannotTake) {
  const std::vector<float> w(8 * 12, 0.5f);
  EXPECT_THAT(QuantizeGptqRtn(w, 8, 12, 8, true).status().message(), HasSubstr("group 8"));
  absl::StatusOr<GptqQuantized> q = QuantizeGptqRtn(w, 12, 8, 8, true);
  ASSERT_TRUE(q.ok());
  EXPECT_THAT(PackGptqV1(*q).status().message(), HasSubstr("multiples of 8; W is 12 x 8"));
}

}  // namespace
}  // namespace onecard::engine
