// ComputePerplexity over FakeModelRunner, whose logits are a function of the
// whole context read back through the block table: the expected windows are
// written out by hand from Hugging Face's perplexity guide (begin, end, the
// first scored position), and the expected NLL is computed here from the
// fake's own logits function over each token's context in its window.
#include "engine/runtime/perplexity.h"

#include <cmath>
#include <numeric>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/runtime/fake_model_runner.h"

namespace onecard::engine {
namespace {

using testing::FakeModelRunner;
using testing::FakeRunnerOptions;
using testing::HashedLogits;
using ::testing::HasSubstr;

constexpr int32_t kVocab = 64;

std::vector<int32_t> Tokens(int n) {
  std::vector<int32_t> t(n);
  for (int i = 0; i < n; ++i) t[i] = (i * 7 + 3) % kVocab;
  return t;
}

// -log softmax(logits)[target], from the fake's logits function.
double Nll(std::span<const int32_t> context, int32_t target) {
  const std::vector<float> l = HashedLogits(context, kVocab);
  double max = l[0];
  for (float v : l) max = std::max<double>(max, v);
  double sum = 0;
  for (float v : l) sum += std::exp(v - max);
  return std::log(sum) + max - l[target];
}

struct Window {
  int64_t begin, end, score_from;
};

// The NLL sum over hand-written windows: token p of window w has context
// tokens[w.begin, p).
double ExpectedNll(const std::vector<int32_t>& t, const std::vector<Window>& windows,
                   int64_t* scored) {
  double sum = 0;
  *scored = 0;
  for (const Window& w : windows) {
    for (int64_t p = w.score_from; p < w.end; ++p) {
      sum += Nll(std::span<const int32_t>(t).subspan(w.begin, p - w.begin), t[p]);
      ++*scored;
    }
  }
  return sum;
}

TEST(PerplexityTest, OverlappingWindowsScoreEveryTokenOnceWithItsWindowsContext) {
  FakeModelRunner runner(FakeRunnerOptions{.vocab_size = kVocab});
  const std::vector<int32_t> t = Tokens(10);
  absl::StatusOr<PerplexityResult> r = ComputePerplexity(runner, t, {.window = 4, .stride = 2});
  ASSERT_TRUE(r.ok()) << r.status();
  // HF: begin 0, 2, 4, 6; end min(begin + 4, 10); targets end - prev_end.
  int64_t scored = 0;
  const double nll = ExpectedNll(t, {{0, 4, 1}, {2, 6, 4}, {4, 8, 6}, {6, 10, 8}}, &scored);
  EXPECT_EQ(scored, 9);
  EXPECT_EQ(r->scored_tokens, scored);
  EXPECT_EQ(r->windows, 4);
  EXPECT_EQ(r->num_tokens, 10);
  EXPECT_NEAR(r->nll_sum, nll, 1e-9 * std::abs(nll));
  EXPECT_NEAR(r->Perplexity(), std::exp(nll / scored), 1e-9 * std::exp(nll / scored));
  EXPECT_EQ(runner.num_forward_calls(), 4);
}

TEST(PerplexityTest, DisjointWindowsSkipEachWindowsFirstToken) {
  FakeModelRunner runner(FakeRunnerOptions{.vocab_size = kVocab});
  const std::vector<int32_t> t = Tokens(11);
  absl::StatusOr<PerplexityResult> r = ComputePerplexity(runner, t, {.window = 4, .stride = 4});
  ASSERT_TRUE(r.ok()) << r.status();
  int64_t scored = 0;
  const double nll = ExpectedNll(t, {{0, 4, 1}, {4, 8, 5}, {8, 11, 9}}, &scored);
  EXPECT_EQ(r->scored_tokens, 8);
  EXPECT_EQ(scored, 8);
  EXPECT_NEAR(r->nll_sum, nll, 1e-9 * std::abs(nll));
}

TEST(PerplexityTest, ATextShorterThanTheWindowIsOneWindow) {
  FakeModelRunner runner(FakeRunnerOptions{.vocab_size = kVocab});
  const std::vector<int32_t> t = Tokens(5);
  absl::StatusOr<PerplexityResult> r = ComputePerplexity(runner, t, {.window = 16, .stride = 8});
  ASSERT_TRUE(r.ok()) << r.status();
  int64_t scored = 0;
  const double nll = ExpectedNll(t, {{0, 5, 1}}, &scored);
  EXPECT_EQ(r->windows, 1);
  EXPECT_NEAR(r->nll_sum, nll, 1e-9 * std::abs(nll));
}

TEST(PerplexityTest, WindowsFollowHuggingFacesLoop) {
  const std::vector<PerplexityWindow> w = PerplexityWindows(10, {.window = 6, .stride = 3});
  ASSERT_EQ(w.size(), 3u);  // begins 0, 3, 6 (the last reaches the end)
  EXPECT_EQ(w[0].begin, 0);
  EXPECT_EQ(w[0].end, 6);
  EXPECT_EQ(w[0].score_from, 1);
  EXPECT_EQ(w[1].begin, 3);
  EXPECT_EQ(w[1].end, 9);
  EXPECT_EQ(w[1].score_from, 6);
  EXPECT_EQ(w[2].begin, 6);
  EXPECT_EQ(w[2].end, 10);
  EXPECT_EQ(w[2].score_from, 9);
}

TEST(PerplexityTest, BadOptionsAndInputsNameTheField) {
  FakeModelRunner runner(FakeRunnerOptions{.vocab_size = kVocab, .num_blocks = 4, .block_size = 4});
  const std::vector<int32_t> t = Tokens(10);
  EXPECT_THAT(ComputePerplexity(runner, t, {.window = 1, .stride = 1}).status().message(),
              HasSubstr("window: 1 < 2"));
  EXPECT_THAT(ComputePerplexity(runner, t, {.window = 4, .stride = 5}).status().message(),
              HasSubstr("stride: 5 is not in [1, window = 4]"));
  EXPECT_THAT(ComputePerplexity(runner, t, {.window = 17, .stride = 4}).status().message(),
              HasSubstr("window: 17 tokens need 5 KV blocks; the runner has 4"));
  EXPECT_THAT(ComputePerplexity(runner, Tokens(1), {.window = 4, .stride = 2}).status().message(),
              HasSubstr("needs at least 2"));
  std::vector<int32_t> bad = t;
  bad[3] = kVocab;
  EXPECT_THAT(ComputePerplexity(runner, bad, {.window = 4, .stride = 2}).status().message(),
              HasSubstr("token 3: id 64 is outside the vocabulary"));
}

TEST(PerplexityTest, ProgressSeesEveryWindow) {
  FakeModelRunner runner(FakeRunnerOptions{.vocab_size = kVocab});
  std::vector<std::pair<int32_t, int32_t>> calls;
  ASSERT_TRUE(
      ComputePerplexity(runner, Tokens(10), {.window = 4, .stride = 2},
                        [&](int32_t done, int32_t total) { calls.emplace_back(done, total); })
          .ok());
  EXPECT_THAT(calls, ::testing::ElementsAre(std::pair(1, 4), std::pair(2, 4), std::pair(3, 4),
                                            std::pair(4, 4)));
}

}  // namespace
}  // namespace onecard::engine
