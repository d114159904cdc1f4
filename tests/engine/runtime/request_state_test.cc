// Tests of RequestState on the fake tokenizer: usage and timings, the order
// of the stop checks (stop ids, eos, stop strings, max_tokens, the context
// end), logprobs, and final outputs of endings from outside.
#include "engine/runtime/request_state.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/runtime/fake_tokenizer.h"

namespace onecard::engine {
namespace {

using testing::FakeTokenizer;

const absl::Time kT0 = absl::FromUnixSeconds(1000);

GenerationRequest MakeRequest(int32_t max_tokens) {
  GenerationRequest r;
  r.prompt_token_ids = {1, 2, 3};
  r.stopping.max_tokens = max_tokens;
  return r;
}

SampleResult Token(int32_t id) { return {.token_id = id, .logprob = -0.5f}; }

TEST(RequestStateTest, UsageTimingsAndMaxTokens) {
  FakeTokenizer tok;
  RequestState state(7, MakeRequest(2), &tok, kT0);
  state.OnFirstScheduled(kT0 + absl::Seconds(1), /*cached_tokens=*/0);
  state.OnFirstScheduled(kT0 + absl::Seconds(5), 99);  // ignored
  StreamOutput a = state.OnToken(Token(0), 4, 100, kT0 + absl::Seconds(2));
  EXPECT_FALSE(a.finished);
  EXPECT_EQ(a.text_delta, "a");
  EXPECT_EQ(a.queue_time, absl::Seconds(1));
  EXPECT_EQ(a.time_to_first_token, absl::Seconds(2));
  EXPECT_TRUE(a.logprobs.empty());
  StreamOutput b = state.OnToken(Token(1), 5, 100, kT0 + absl::Seconds(3));
  EXPECT_TRUE(b.finished);
  EXPECT_EQ(b.finish_reason, FinishReason::kLength);
  EXPECT_EQ(b.usage.prompt_tokens, 3);
  EXPECT_EQ(b.usage.completion_tokens, 2);
  EXPECT_EQ(b.usage.cached_tokens, 0);
  EXPECT_EQ(b.time_to_first_token, absl::Seconds(2));
  EXPECT_TRUE(state.finished());
}

TEST(RequestStateTest, ContextEndIsLength) {
  FakeTokenizer tok;
  RequestState state(1, MakeRequest(50), &tok, kT0);
  EXPECT_EQ(state.OnToken(Token(0), 10, 10, kT0).finish_reason, FinishReason::kLength);
}

TEST(RequestStateTest, StopIdsWinOverEosAndEosOverStopStrings) {
  FakeTokenizer tok;
  GenerationRequest r = MakeRequest(50);
  r.stopping.stop_token_ids = {FakeTokenizer::kEos};
  r.stopping.stop_strings = {"<eos>"};
  RequestState stop(1, r, &tok, kT0);
  EXPECT_EQ(stop.OnToken(Token(FakeTokenizer::kEos), 4, 100, kT0).finish_reason,
            FinishReason::kStop);
  r.stopping.stop_token_ids.clear();
  RequestState eos(2, r, &tok, kT0);
  EXPECT_EQ(eos.OnToken(Token(FakeTokenizer::kEos), 4, 100, kT0).finish_reason, FinishReason::kEos);
  // With ignore_eos the special token is skipped in text, so no stop string.
  r.stopping.ignore_eos = true;
  RequestState ignore(3, r, &tok, kT0);
  StreamOutput out = ignore.OnToken(Token(FakeTokenizer::kEos), 4, 100, kT0);
  EXPECT_FALSE(out.finished);
  EXPECT_EQ(out.text_delta, "");
}

TEST(RequestStateTest, StopStringBeatsMaxTokensOnTheSameToken) {
  FakeTokenizer tok;
  GenerationRequest r = MakeRequest(2);
  r.stopping.stop_strings = {"ab"};
  RequestState state(1, r, &tok, kT0);
  EXPECT_EQ(state.OnToken(Token(0), 4, 100, kT0).text_delta, "");  // "a" held
  StreamOutput out = state.OnToken(Token(1), 5, 100, kT0);
  EXPECT_EQ(out.finish_reason, FinishReason::kStopString);
  EXPECT_EQ(out.text_delta, "");
}

TEST(RequestStateTest, LogprobsWhenAsked) {
  FakeTokenizer tok;
  GenerationRequest r = MakeRequest(5);
  r.top_logprobs = 2;
  RequestState state(1, r, &tok, kT0);
  SampleResult sample{.token_id = 3, .logprob = -1.0f, .top = {{3, -1.0f}, {4, -2.0f}}};
  StreamOutput out = state.OnToken(sample, 4, 100, kT0);
  ASSERT_EQ(out.logprobs.size(), 1u);
  EXPECT_EQ(out.logprobs[0].token_id, 3);
  EXPECT_EQ(out.logprobs[0].top.size(), 2u);
}

TEST(RequestStateTest, EndingsFromOutside) {
  FakeTokenizer tok;
  RequestState state(1, MakeRequest(5), &tok, kT0);
  StreamOutput out = state.Finish(FinishReason::kError, absl::InternalError("boom"));
  EXPECT_TRUE(out.finished);
  EXPECT_EQ(out.finish_reason, FinishReason::kError);
  EXPECT_EQ(out.error.message(), "boom");
  EXPECT_TRUE(out.token_ids.empty());
}

}  // namespace
}  // namespace onecard::engine
