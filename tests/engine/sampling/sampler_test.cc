// Tests of Sampler against references written here: hand-checked penalty
// vectors, hand-computed truncated distributions checked by seeded frequency
// counts with generous bounds (>4 sigma), greedy equivalences, logprobs as
// log(p) of known distributions, and determinism per (seed, step).
#include "engine/sampling/sampler.h"

#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace onecard::engine {
namespace {

using ::testing::ElementsAre;
using ::testing::FloatNear;
using ::testing::Pointwise;

// Logits whose softmax is exactly probs.
std::vector<float> LogitsOf(const std::vector<double>& probs) {
  std::vector<float> logits;
  for (double p : probs) logits.push_back(static_cast<float>(std::log(p)));
  return logits;
}

std::vector<float> RandomLogits(uint64_t seed, int n) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

int32_t SampleOnce(Sampler& sampler, const std::vector<float>& logits, const SamplingParams& params,
                   std::span<const int32_t> output = {}) {
  return sampler.Sample({.logits = logits, .params = &params, .output_token_ids = output}).token_id;
}

// Frequencies of 20000 draws over seeds 0..19999.
std::vector<double> Frequencies(const std::vector<float>& logits, SamplingParams params) {
  constexpr int kDraws = 20000;
  Sampler sampler;
  std::vector<double> freq(logits.size(), 0.0);
  for (int i = 0; i < kDraws; ++i) {
    params.seed = i;
    freq[SampleOnce(sampler, logits, params)] += 1.0 / kDraws;
  }
  return freq;
}

// 0.016 is more than 4 standard deviations of a frequency over 20000 draws.
constexpr double kFreqTol = 0.016;

TEST(SamplerTest, PenaltiesOnHandCheckedVectors) {
  std::vector<float> logits = {2.0f, -2.0f, 1.0f, 0.5f, 3.0f};
  const std::vector<int32_t> prompt = {0, 0, 99};  // 99 is outside the vocabulary
  const std::vector<int32_t> output = {1, 1, 3};
  ApplyRepetitionPenalty(logits, prompt, output, 2.0f);
  EXPECT_THAT(logits, ElementsAre(1.0f, -4.0f, 1.0f, 0.25f, 3.0f));

  std::vector<float> flat = {1.0f, 1.0f, 1.0f, 1.0f};
  ApplyPresenceFrequencyPenalties(flat, std::vector<int32_t>{2, 2, 3}, 0.5f, 0.25f);
  EXPECT_THAT(flat, ElementsAre(1.0f, 1.0f, 0.0f, 0.25f));
  // Negative penalties encourage repetition.
  std::vector<float> flat2 = {1.0f, 1.0f};
  ApplyPresenceFrequencyPenalties(flat2, std::vector<int32_t>{1}, -1.0f, 0.0f);
  EXPECT_THAT(flat2, ElementsAre(1.0f, 2.0f));
}

TEST(SamplerTest, GreedyTakesTheHighestPenalizedLogitLowestIdOnTies) {
  Sampler sampler;
  SamplingParams greedy{.temperature = 0.0f};
  EXPECT_EQ(SampleOnce(sampler, {0.0f, 3.0f, 1.0f, 3.0f}, greedy), 1);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(SampleOnce(sampler, {nan, 0.5f, nan, 0.7f}, greedy), 3);
  // The repetition penalty turns the winner around: 3.0/4 < 1.0.
  greedy.repetition_penalty = 4.0f;
  const std::vector<int32_t> out = {1};
  EXPECT_EQ(SampleOnce(sampler, {0.0f, 3.0f, 1.0f}, greedy, out), 2);
}

TEST(SamplerTest, MaskedTokensAreNeverSampled) {
  Sampler sampler;
  const std::vector<int32_t> masked = {1, 3};
  for (uint64_t seed = 0; seed < 50; ++seed) {
    const std::vector<float> logits = {0.0f, 5.0f, 1.0f, 5.0f};
    for (const SamplingParams& p :
         {SamplingParams{.temperature = 0.0f}, SamplingParams{.temperature = 2.0f, .seed = seed}}) {
      const int32_t id =
          sampler.Sample({.logits = logits, .params = &p, .masked_token_ids = masked}).token_id;
      EXPECT_TRUE(id == 0 || id == 2) << id;
    }
  }
}

TEST(SamplerTest, TopKOneTinyTopPAndFullMinPEqualGreedy) {
  Sampler sampler;
  for (uint64_t seed = 0; seed < 50; ++seed) {
    const std::vector<float> logits = RandomLogits(seed, 257);
    const int32_t greedy = SampleOnce(sampler, logits, {.temperature = 0.0f});
    EXPECT_EQ(SampleOnce(sampler, logits, {.temperature = 1.3f, .top_k = 1, .seed = seed}), greedy);
    EXPECT_EQ(SampleOnce(sampler, logits, {.temperature = 0.7f, .top_p = 1e-6f, .seed = seed}),
              greedy);
    EXPECT_EQ(SampleOnce(sampler, logits, {.temperature = 2.0f, .min_p = 1.0f, .seed = seed}),
              greedy);
  }
}

TEST(SamplerTest, TemperatureOneFollowsTheSoftmax) {
  const std::vector<double> p = {0.1, 0.2, 0.3, 0.4};
  EXPECT_THAT(Frequencies(LogitsOf(p), {.temperature = 1.0f}), Pointwise(FloatNear(kFreqTol), p));
}

TEST(SamplerTest, TemperatureTwoFlattens) {
  const std::vector<double> p = {0.1, 0.2, 0.3, 0.4};
  // softmax(log p / 2) = sqrt(p) / sum sqrt(p).
  std::vector<double> want;
  double sum = 0;
  for (double x : p) sum += std::sqrt(x);
  for (double x : p) want.push_back(std::sqrt(x) / sum);
  EXPECT_THAT(Frequencies(LogitsOf(p), {.temperature = 2.0f}),
              Pointwise(FloatNear(kFreqTol), want));
}

TEST(SamplerTest, TopKTopPMinPTruncateAndRenormalize) {
  const std::vector<float> logits = LogitsOf({0.1, 0.2, 0.3, 0.4});
  EXPECT_THAT(Frequencies(logits, {.temperature = 1.0f, .top_k = 2}),
              Pointwise(FloatNear(kFreqTol), std::vector<double>{0, 0, 3.0 / 7, 4.0 / 7}));
  // top_p 0.5: 0.4 alone is short of it, 0.4 + 0.3 reaches it.
  EXPECT_THAT(Frequencies(logits, {.temperature = 1.0f, .top_p = 0.5f}),
              Pointwise(FloatNear(kFreqTol), std::vector<double>{0, 0, 3.0 / 7, 4.0 / 7}));
  // top_p 0.35: 0.4 alone reaches it.
  EXPECT_THAT(Frequencies(logits, {.temperature = 1.0f, .top_p = 0.35f}),
              Pointwise(FloatNear(kFreqTol), std::vector<double>{0, 0, 0, 1}));
  // top_p after top_k: of {0.3, 0.4} renormalized, 0.8 needs both.
  EXPECT_THAT(Frequencies(logits, {.temperature = 1.0f, .top_k = 2, .top_p = 0.8f}),
              Pointwise(FloatNear(kFreqTol), std::vector<double>{0, 0, 3.0 / 7, 4.0 / 7}));
  // min_p 0.6: keep p >= 0.6 * 0.4 = 0.24.
  EXPECT_THAT(Frequencies(logits, {.temperature = 1.0f, .min_p = 0.6f}),
              Pointwise(FloatNear(kFreqTol), std::vector<double>{0, 0, 3.0 / 7, 4.0 / 7}));
  // min_p 0.4: keep p >= 0.16.
  EXPECT_THAT(Frequencies(logits, {.temperature = 1.0f, .min_p = 0.4f}),
              Pointwise(FloatNear(kFreqTol), std::vector<double>{0, 2.0 / 9, 3.0 / 9, 4.0 / 9}));
}

TEST(SamplerTest, PenaltiesShapeTheSampledDistribution) {
  // Equal logits; frequency penalty ln 2 on two prior outputs of token 0
  // halves its weight twice: p = (1/4, 1, 1) / 2.25.
  const std::vector<float> logits = {0.0f, 0.0f, 0.0f};
  const std::vector<int32_t> output = {0, 0};
  Sampler sampler;
  std::vector<double> freq(3, 0.0);
  SamplingParams params{.temperature = 1.0f, .frequency_penalty = std::log(2.0f)};
  for (int i = 0; i < 20000; ++i) {
    params.seed = i;
    freq[SampleOnce(sampler, logits, params, output)] += 1.0 / 20000;
  }
  EXPECT_THAT(freq,
              Pointwise(FloatNear(kFreqTol), std::vector<double>{0.25 / 2.25, 1 / 2.25, 1 / 2.25}));
}

TEST(SamplerTest, DrawsVaryWithTheStepAndFollowTheDistribution) {
  const std::vector<double> p = {0.5, 0.25, 0.25};
  const std::vector<float> logits = LogitsOf(p);
  const std::vector<int32_t> history(20000, 7);  // out of vocabulary: no penalty effect
  Sampler sampler;
  std::vector<double> freq(3, 0.0);
  SamplingParams params{.temperature = 1.0f, .seed = 42};
  for (size_t step = 0; step < history.size(); ++step) {
    freq[SampleOnce(sampler, logits, params, std::span(history).first(step))] += 1.0 / 20000;
  }
  EXPECT_THAT(freq, Pointwise(FloatNear(kFreqTol), p));
}

TEST(SamplerTest, SameSeedAndStepGiveTheSameTokenWhateverCameBefore) {
  const std::vector<float> logits = RandomLogits(7, 1000);
  const SamplingParams params{.temperature = 1.0f, .top_p = 0.9f, .seed = 1234};
  Sampler a;
  Sampler b;
  const int32_t first = SampleOnce(a, logits, params);
  // b samples other rows with other seeds first: no shared state leaks.
  for (uint64_t s = 0; s < 10; ++s) {
    SampleOnce(b, RandomLogits(s, 1000), {.temperature = 0.8f, .top_k = 5, .seed = s});
  }
  EXPECT_EQ(SampleOnce(b, logits, params), first);
  EXPECT_EQ(UniformDraw(5, 9), UniformDraw(5, 9));
  EXPECT_NE(UniformDraw(5, 9), UniformDraw(5, 10));
  EXPECT_NE(UniformDraw(5, 9), UniformDraw(6, 9));
  // Different seeds do not all agree.
  std::map<int32_t, int> seen;
  for (uint64_t s = 0; s < 50; ++s) {
    ++seen[SampleOnce(a, logits, {.temperature = 5.0f, .seed = s})];
  }
  EXPECT_GT(seen.size(), 5u);
}

TEST(SamplerTest, LogprobsAreTheLogSoftmaxOfPenalizedTemperedLogits) {
  const std::vector<double> p = {0.1, 0.2, 0.3, 0.4};
  Sampler sampler;
  const std::vector<float> logits = LogitsOf(p);
  SamplingParams greedy{.temperature = 0.0f};
  SampleResult r = sampler.Sample(
      {.logits = logits, .params = &greedy, .want_logprobs = true, .num_top_logprobs = 3});
  EXPECT_EQ(r.token_id, 3);
  EXPECT_NEAR(r.logprob, std::log(0.4), 1e-5);
  ASSERT_EQ(r.top.size(), 3u);
  EXPECT_EQ(r.top[0].first, 3);
  EXPECT_EQ(r.top[1].first, 2);
  EXPECT_EQ(r.top[2].first, 1);
  EXPECT_NEAR(r.top[2].second, std::log(0.2), 1e-5);
  // Temperature 2: log of sqrt(p) / sum sqrt(p).
  SamplingParams hot{.temperature = 2.0f, .top_k = 1};
  r = sampler.Sample({.logits = logits, .params = &hot, .want_logprobs = true});
  double sum = 0;
  for (double x : p) sum += std::sqrt(x);
  EXPECT_EQ(r.token_id, 3);
  EXPECT_NEAR(r.logprob, std::log(std::sqrt(0.4) / sum), 1e-5);
  EXPECT_TRUE(r.top.empty());
}

TEST(SamplerTest, DegenerateRowsDoNotCrash) {
  Sampler sampler;
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> all_masked = {-inf, -inf, -inf};
  EXPECT_EQ(SampleOnce(sampler, all_masked, {.temperature = 1.0f}), 0);
  EXPECT_EQ(SampleOnce(sampler, {-inf, 2.0f, -inf}, {.temperature = 1.0f, .top_p = 0.5f}), 1);
  EXPECT_EQ(SampleOnce(sampler, {1.0f}, {.temperature = 1.0f, .top_k = 5}), 0);
}

}  // namespace
}  // namespace onecard::engine
