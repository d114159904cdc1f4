// The engine with a runner that samples on the device (the CUDA runner's
// ForwardSample, here the fake's greedy one): what the engine hands the
// runner per row (the draw the host sampler would make, the penalties and
// their history), the tokens it streams, and the rows that stay on the host
// sampler (logprobs, both kinds of penalty, device_sampling off).
#include <span>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/runtime/engine_test_util.h"

namespace onecard::engine::testing {
namespace {

using ::testing::ElementsAreArray;

struct Seen {
  std::vector<SampleRowParams> rows;
  std::vector<std::vector<int32_t>> histories;  // one per row; empty when none was passed
  std::vector<size_t> history_spans;            // histories.size() of each call
};

FakeRunnerOptions DeviceSampling(Seen* seen) {
  FakeRunnerOptions options;
  options.device_sampling = true;
  options.on_forward_sample = [seen](std::span<const SampleRowParams> rows,
                                     std::span<const std::span<const int32_t>> histories) {
    seen->history_spans.push_back(histories.size());
    for (size_t r = 0; r < rows.size(); ++r) {
      seen->rows.push_back(rows[r]);
      seen->histories.emplace_back();
      if (!histories.empty()) {
        seen->histories.back().assign(histories[r].begin(), histories[r].end());
      }
    }
  };
  return options;
}

absl::StatusOr<uint64_t> Submit(TestEngine& t, Recorder& rec, const std::string& name,
                                GenerationRequest request) {
  request.on_output = rec.Callback(name);
  return t.engine->Submit(std::move(request));
}

TEST(EngineDeviceSamplingTest, RowsCarryTheHostDrawAndTheRepetitionHistory) {
  Seen seen;
  auto t = MakeTestEngine(DeviceSampling(&seen));
  Recorder rec;
  GenerationRequest r = Request({5, 6, 7}, 4,
                                {.temperature = 0.7f,
                                 .top_k = 5,
                                 .top_p = 0.9f,
                                 .min_p = 0.05f,
                                 .repetition_penalty = 1.3f,
                                 .seed = 42});
  ASSERT_TRUE(Submit(*t, rec, "r", r).ok());
  RunUntilIdle(*t->engine);
  EXPECT_EQ(t->runner->num_forward_calls(), 0);
  EXPECT_EQ(t->runner->num_forward_sample_calls(), 4);
  // The fake answers greedy tokens whatever the params: the engine streams them.
  const std::vector<int32_t> tokens = rec.Tokens("r");
  EXPECT_EQ(tokens, ReferenceTokens(Request({5, 6, 7}, 4), {}));
  ASSERT_EQ(seen.rows.size(), 4u);
  std::vector<int32_t> context = {5, 6, 7};
  for (size_t step = 0; step < 4; ++step) {
    const SampleRowParams& row = seen.rows[step];
    EXPECT_FLOAT_EQ(row.temperature, 0.7f);
    EXPECT_EQ(row.top_k, 5);
    EXPECT_FLOAT_EQ(row.top_p, 0.9f);
    EXPECT_FLOAT_EQ(row.min_p, 0.05f);
    EXPECT_FLOAT_EQ(row.repetition_penalty, 1.3f);
    // The same draw as the host sampler for output token `step`.
    EXPECT_FLOAT_EQ(row.uniform, static_cast<float>(UniformDraw(42, step)));
    // Repetition penalty: the history is the prompt and the output so far.
    EXPECT_THAT(seen.histories[step], ElementsAreArray(context));
    context.push_back(tokens[step]);
  }
}

TEST(EngineDeviceSamplingTest, PresenceAndFrequencyPenaltiesSeeTheOutputOnly) {
  Seen seen;
  auto t = MakeTestEngine(DeviceSampling(&seen));
  Recorder rec;
  ASSERT_TRUE(
      Submit(*t, rec, "r", Request({5, 6}, 3, {.temperature = 1.0f, .presence_penalty = 0.5f}))
          .ok());
  RunUntilIdle(*t->engine);
  const std::vector<int32_t> tokens = rec.Tokens("r");
  ASSERT_EQ(seen.histories.size(), 3u);
  EXPECT_TRUE(seen.histories[0].empty());
  EXPECT_THAT(seen.histories[1], ElementsAreArray(std::vector<int32_t>{tokens[0]}));
  EXPECT_THAT(seen.histories[2], ElementsAreArray(std::vector<int32_t>{tokens[0], tokens[1]}));
}

TEST(EngineDeviceSamplingTest, NoPenaltiesPassNoHistories) {
  Seen seen;
  auto t = MakeTestEngine(DeviceSampling(&seen));
  Recorder rec;
  ASSERT_TRUE(Submit(*t, rec, "a", Request({5, 6}, 2)).ok());
  ASSERT_TRUE(Submit(*t, rec, "b", Request({9, 9, 9}, 2)).ok());
  RunUntilIdle(*t->engine);
  EXPECT_EQ(rec.Tokens("a"), ReferenceTokens(Request({5, 6}, 2), {}));
  EXPECT_EQ(rec.Tokens("b"), ReferenceTokens(Request({9, 9, 9}, 2), {}));
  ASSERT_FALSE(seen.history_spans.empty());
  for (size_t spans : seen.history_spans) EXPECT_EQ(spans, 0u);
}

TEST(EngineDeviceSamplingTest, RowsTheDeviceCannotServeStayOnTheHost) {
  Seen seen;
  auto t = MakeTestEngine(DeviceSampling(&seen));
  Recorder rec;
  GenerationRequest with_logprobs = Request({5, 6}, 2);
  with_logprobs.logprobs = true;
  ASSERT_TRUE(Submit(*t, rec, "logprobs", with_logprobs).ok());
  RunUntilIdle(*t->engine);
  // Both penalty kinds: the device has one history, the host two.
  ASSERT_TRUE(
      Submit(*t, rec, "both",
             Request({5, 6}, 2,
                     {.temperature = 0.0f, .repetition_penalty = 1.2f, .frequency_penalty = 0.3f}))
          .ok());
  RunUntilIdle(*t->engine);
  EXPECT_EQ(t->runner->num_forward_sample_calls(), 0);
  EXPECT_GT(t->runner->num_forward_calls(), 0);
  EXPECT_EQ(rec.Outputs("logprobs").back().logprobs.size(), 1u);
  EXPECT_EQ(rec.Tokens("logprobs"), ReferenceTokens(with_logprobs, {}));
}

TEST(EngineDeviceSamplingTest, OffMeansTheHostSampler) {
  Seen seen;
  auto t = MakeTestEngine(DeviceSampling(&seen), {.device_sampling = false});
  Recorder rec;
  ASSERT_TRUE(Submit(*t, rec, "r", Request({5, 6}, 3)).ok());
  RunUntilIdle(*t->engine);
  EXPECT_EQ(t->runner->num_forward_sample_calls(), 0);
  EXPECT_EQ(rec.Tokens("r"), ReferenceTokens(Request({5, 6}, 3), {}));
}

}  // namespace
}  // namespace onecard::engine::testing
