// Tests of EngineImpl's API with a fake runner and tokenizer, a fake clock
// and Step() driven by the test: every terminal state, stop strings spanning
// tokens, cancellation (blocks freed), deadlines, drain, validation, logprobs,
// prefix-cache usage, stats, and the threaded mode.
#include "engine/runtime/engine_impl.h"

#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/runtime/engine_test_util.h"

namespace onecard::engine::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr int32_t kA = 0;  // "a"
constexpr int32_t kB = 1;
constexpr int32_t kD = 3;
constexpr int32_t kN = 13;
constexpr int32_t kX = 23;

// Logits that make `next(context)` the greedy choice.
LogitsFn FavorNext(std::function<int32_t(std::span<const int32_t>)> next) {
  return [next](std::span<const int32_t> context) {
    std::vector<float> logits(FakeTokenizer::kVocabSize, 0.0f);
    logits[next(context)] = 10.0f;
    return logits;
  };
}

// The i-th generated token is script[i] (then "z" forever), for a prompt of prompt_len.
LogitsFn Script(std::vector<int32_t> script, size_t prompt_len) {
  return FavorNext([script, prompt_len](std::span<const int32_t> context) {
    const size_t i = context.size() - prompt_len;
    return i < script.size() ? script[i] : 25;
  });
}

absl::StatusOr<uint64_t> Submit(TestEngine& t, Recorder& rec, const std::string& name,
                                GenerationRequest request) {
  request.on_output = rec.Callback(name);
  return t.engine->Submit(std::move(request));
}

TEST(EngineImplTest, GreedyMatchesTheReferenceAndStreamsText) {
  // The fake's logits without eos and the lone UTF-8 byte tokens, so that
  // the text is plain ASCII.
  const LogitsFn ascii = [](std::span<const int32_t> context) {
    std::vector<float> logits = HashedLogits(context, FakeTokenizer::kVocabSize);
    for (int32_t id : {27, 28, 29, 30}) logits[id] = -1e9f;
    return logits;
  };
  auto t = MakeTestEngine({.logits_fn = ascii});
  Recorder rec;
  GenerationRequest r = Request({7, 4, 11, 11, 14}, 12);
  r.stopping.ignore_eos = false;
  ASSERT_TRUE(Submit(*t, rec, "r", r).ok());
  RunUntilIdle(*t->engine);
  const std::vector<int32_t> want = ReferenceTokens(r, ascii);
  ASSERT_EQ(want.size(), 12u);
  EXPECT_EQ(rec.Tokens("r"), want);
  const StreamOutput final_out = rec.Final("r");
  EXPECT_EQ(final_out.finish_reason, FinishReason::kLength);
  EXPECT_STREQ(FinishReasonName(final_out.finish_reason), "length");
  EXPECT_EQ(rec.Text("r"), FakeTokenizer().Decode(want, /*skip_special_tokens=*/true));
  EXPECT_EQ(final_out.usage.prompt_tokens, 5);
  EXPECT_EQ(final_out.usage.completion_tokens, 12);
  EXPECT_EQ(rec.Outputs("r").size(), want.size());  // one output per token
}

TEST(EngineImplTest, EosStopTokenAndIgnoreEos) {
  const std::vector<int32_t> prompt = {kA, kB};
  auto t =
      MakeTestEngine({.logits_fn = Script({kX, kA, FakeTokenizer::kEos, kB, kD}, prompt.size())});
  Recorder rec;
  GenerationRequest eos = Request(prompt, 10);
  eos.stopping.ignore_eos = false;
  ASSERT_TRUE(Submit(*t, rec, "eos", eos).ok());
  ASSERT_TRUE(Submit(*t, rec, "ignore", Request(prompt, 5)).ok());
  GenerationRequest stop = Request(prompt, 10);
  stop.stopping.stop_token_ids = {kA};
  ASSERT_TRUE(Submit(*t, rec, "stop", stop).ok());
  RunUntilIdle(*t->engine);
  EXPECT_EQ(rec.Final("eos").finish_reason, FinishReason::kEos);
  EXPECT_THAT(rec.Tokens("eos"), ElementsAre(kX, kA, FakeTokenizer::kEos));
  EXPECT_EQ(rec.Text("eos"), "xa");  // eos text is never streamed
  EXPECT_EQ(rec.Final("ignore").finish_reason, FinishReason::kLength);
  EXPECT_THAT(rec.Tokens("ignore"), ElementsAre(kX, kA, FakeTokenizer::kEos, kB, kD));
  EXPECT_EQ(rec.Text("ignore"), "xabd");  // special tokens are skipped in text
  EXPECT_EQ(rec.Final("stop").finish_reason, FinishReason::kStop);
  EXPECT_THAT(rec.Tokens("stop"), ElementsAre(kX, kA));
  EXPECT_EQ(rec.Text("stop"), "x");
}

TEST(EngineImplTest, MinTokensMasksEosAndStopTokensUntilThatManyExist) {
  const std::vector<int32_t> prompt = {kA, kB};
  // Eos is the model's favourite from the first token on; kX is second.
  const LogitsFn eos_first = [](std::span<const int32_t>) {
    std::vector<float> logits(FakeTokenizer::kVocabSize, 0.0f);
    logits[FakeTokenizer::kEos] = 10.0f;
    logits[kA] = 9.0f;  // a stop token below
    logits[kX] = 8.0f;
    return logits;
  };
  auto t = MakeTestEngine({.logits_fn = eos_first});
  Recorder rec;
  GenerationRequest r = Request(prompt, 10);
  r.stopping.ignore_eos = false;
  r.stopping.stop_token_ids = {kA};
  r.stopping.min_tokens = 3;
  ASSERT_TRUE(Submit(*t, rec, "min3", r).ok());
  GenerationRequest none = r;
  none.stopping.min_tokens = 0;
  ASSERT_TRUE(Submit(*t, rec, "min0", none).ok());
  RunUntilIdle(*t->engine);
  EXPECT_THAT(rec.Tokens("min3"), ElementsAre(kX, kX, kX, FakeTokenizer::kEos));
  EXPECT_EQ(rec.Final("min3").finish_reason, FinishReason::kEos);
  EXPECT_THAT(rec.Tokens("min0"), ElementsAre(FakeTokenizer::kEos));
}

TEST(EngineImplTest, StopStringsSpanningTokensAreHeldAndNeverEmitted) {
  const std::vector<int32_t> prompt = {kB};
  // "x" "a" "n" "x" "a" "n" "d" "x": "an" is a false start, then "and" stops.
  auto t = MakeTestEngine({.logits_fn = Script({kX, kA, kN, kX, kA, kN, kD, kX}, 1)});
  Recorder rec;
  GenerationRequest r = Request(prompt, 20);
  r.stopping.stop_strings = {"and"};
  ASSERT_TRUE(Submit(*t, rec, "r", r).ok());
  RunUntilIdle(*t->engine);
  std::vector<std::string> deltas;
  for (const StreamOutput& out : rec.Outputs("r")) deltas.push_back(out.text_delta);
  EXPECT_THAT(deltas, ElementsAre("x", "", "", "anx", "", "", ""));
  EXPECT_EQ(rec.Final("r").finish_reason, FinishReason::kStopString);
  EXPECT_EQ(rec.Text("r"), "xanx");
  EXPECT_THAT(rec.Tokens("r"), ElementsAre(kX, kA, kN, kX, kA, kN, kD));
}

TEST(EngineImplTest, HeldTextIsReleasedWhenGenerationEndsOtherwise) {
  auto t = MakeTestEngine({.logits_fn = Script({kX, kA, kN}, 1)});
  Recorder rec;
  GenerationRequest r = Request({kB}, 3);
  r.stopping.stop_strings = {"and"};
  ASSERT_TRUE(Submit(*t, rec, "r", r).ok());
  RunUntilIdle(*t->engine);
  EXPECT_EQ(rec.Final("r").finish_reason, FinishReason::kLength);
  EXPECT_EQ(rec.Final("r").text_delta, "an");
  EXPECT_EQ(rec.Text("r"), "xan");
}

TEST(EngineImplTest, MultiByteCharactersWaitForTheirLastByte) {
  const int32_t e0 = FakeTokenizer::kEuroByte0;
  auto t = MakeTestEngine({.logits_fn = Script({kX, e0, e0 + 1, e0 + 2, kX}, 1)});
  Recorder rec;
  ASSERT_TRUE(Submit(*t, rec, "r", Request({kB}, 5)).ok());
  RunUntilIdle(*t->engine);
  std::vector<std::string> deltas;
  for (const StreamOutput& out : rec.Outputs("r")) deltas.push_back(out.text_delta);
  EXPECT_THAT(deltas, ElementsAre("x", "", "", "\xE2\x82\xAC", "x"));
}

TEST(EngineImplTest, CancelEndsWithinOneStepAndFreesBlocks) {
  auto t = MakeTestEngine({.num_blocks = 32, .block_size = 4});
  Recorder rec;
  absl::StatusOr<uint64_t> id = Submit(*t, rec, "r", Request({1, 2, 3, 4, 5, 6, 7, 8, 9}, 50));
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(*t->engine->Step());
  ASSERT_TRUE(*t->engine->Step());
  EXPECT_GT(t->engine->Stats().kv_blocks_used, 0);
  t->engine->Cancel(*id);
  ASSERT_TRUE(*t->engine->Step());
  EXPECT_EQ(rec.Final("r").finish_reason, FinishReason::kCancelled);
  EXPECT_EQ(rec.Tokens("r").size(), 2u);
  EXPECT_EQ(t->engine->Stats().kv_blocks_used, 0);
  EXPECT_EQ(t->engine->Stats().num_running, 0);
  t->engine->Cancel(*id);    // already finished: ignored
  t->engine->Cancel(12345);  // unknown: ignored
  EXPECT_FALSE(*t->engine->Step());
  EXPECT_THAT(rec.Violations(), IsEmpty());
}

TEST(EngineImplTest, CallbacksMayCancelTheirOwnRequest) {
  auto t = MakeTestEngine({});
  Engine* engine = t->engine.get();
  std::vector<StreamOutput> outs;
  uint64_t id = 0;
  GenerationRequest r = Request({1, 2, 3}, 50);
  r.on_output = [&](const StreamOutput& out) {
    outs.push_back(out);
    if (outs.size() == 3) engine->Cancel(id);
  };
  id = *engine->Submit(std::move(r));
  RunUntilIdle(*engine);
  ASSERT_EQ(outs.size(), 4u);
  EXPECT_EQ(outs.back().finish_reason, FinishReason::kCancelled);
}

TEST(EngineImplTest, DeadlinesUseTheInjectedClock) {
  auto t = MakeTestEngine({});
  Recorder rec;
  GenerationRequest r = Request({1, 2, 3}, 50);
  r.deadline = t->clock.Now() + absl::Seconds(10);
  ASSERT_TRUE(Submit(*t, rec, "late", r).ok());
  GenerationRequest expired = Request({1, 2, 3}, 50);
  expired.deadline = t->clock.Now() - absl::Seconds(1);
  ASSERT_TRUE(Submit(*t, rec, "expired", expired).ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(*t->engine->Step());
  EXPECT_EQ(rec.Final("expired").finish_reason, FinishReason::kDeadline);
  EXPECT_THAT(rec.Tokens("expired"), IsEmpty());
  EXPECT_FALSE(rec.Finished("late"));
  t->clock.Advance(absl::Seconds(10));
  ASSERT_TRUE(*t->engine->Step());
  EXPECT_EQ(rec.Final("late").finish_reason, FinishReason::kDeadline);
  EXPECT_EQ(rec.Tokens("late").size(), 3u);
  EXPECT_EQ(t->engine->Stats().kv_blocks_used, 0);
}

TEST(EngineImplTest, RunnerErrorEndsTheBatchButNotTheEngine) {
  constexpr int32_t kPoison = 40;
  auto t = MakeTestEngine({.fail_on_token = kPoison});
  Recorder rec;
  ASSERT_TRUE(Submit(*t, rec, "poison", Request({1, kPoison, 3}, 5)).ok());
  ASSERT_TRUE(Submit(*t, rec, "neighbour", Request({4, 5}, 5)).ok());
  ASSERT_TRUE(*t->engine->Step());
  const StreamOutput poison = rec.Final("poison");
  EXPECT_EQ(poison.finish_reason, FinishReason::kError);
  EXPECT_THAT(std::string(poison.error.message()), HasSubstr("injected runner failure"));
  EXPECT_EQ(rec.Final("neighbour").finish_reason, FinishReason::kError);  // same batch
  EXPECT_EQ(t->engine->Stats().kv_blocks_used, 0);
  GenerationRequest later = Request({4, 5}, 5);
  ASSERT_TRUE(Submit(*t, rec, "later", later).ok());
  RunUntilIdle(*t->engine);
  EXPECT_EQ(rec.Tokens("later"), ReferenceTokens(later));
}

TEST(EngineImplTest, SubmitValidatesAndNamesTheField) {
  auto t = MakeTestEngine({}, {.max_context = 64});
  EXPECT_EQ(t->engine->max_context(), 64);
  GenerationRequest too_long = Request(std::vector<int32_t>(70, 1), 1);
  absl::StatusOr<uint64_t> id = t->engine->Submit(too_long);
  EXPECT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(id.status().message()), HasSubstr("prompt: 70 tokens"));
  GenerationRequest oov = Request({1, FakeTokenizer::kVocabSize}, 1);
  EXPECT_THAT(std::string(t->engine->Submit(oov).status().message()), HasSubstr("prompt[1]"));
  GenerationRequest bad_top = Request({1}, 1);
  bad_top.top_logprobs = 21;
  EXPECT_EQ(t->engine->Submit(bad_top).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(*t->engine->Step());  // nothing was accepted
}

TEST(EngineImplTest, CreateEngineRejectsBadOptions) {
  auto make = [](EngineOptions options) {
    EngineParts parts{.runner = std::make_unique<FakeModelRunner>(FakeRunnerOptions{}),
                      .tokenizer = std::make_unique<FakeTokenizer>()};
    options.start_thread = false;
    return CreateEngine(std::move(parts), options).status();
  };
  EXPECT_THAT(std::string(make({.max_num_seqs = 0}).message()), HasSubstr("max_num_seqs"));
  EXPECT_THAT(std::string(make({.max_batched_tokens = 0}).message()),
              HasSubstr("max_batched_tokens"));
  EXPECT_THAT(std::string(make({.aging_interval = absl::Seconds(-1)}).message()),
              HasSubstr("aging_interval"));
  EXPECT_THAT(std::string(make({.long_prefill_token_threshold = -1}).message()),
              HasSubstr("long_prefill_token_threshold"));
  EXPECT_THAT(std::string(make({.max_context = 1 << 20}).message()), HasSubstr("max_context"));
  EXPECT_EQ(CreateEngine({}, {}).status().code(), absl::StatusCode::kInvalidArgument);
}

// swap_space_bytes needs a runner that swaps, and room for a block.
TEST(EngineImplTest, CreateEngineRefusesASwapSpaceItCannotHave) {
  auto make = [](int64_t bytes, bool swap) {
    EngineParts parts{.runner = std::make_unique<FakeModelRunner>(FakeRunnerOptions{.swap = swap}),
                      .tokenizer = std::make_unique<FakeTokenizer>()};
    return CreateEngine(std::move(parts), {.swap_space_bytes = bytes, .start_thread = false})
        .status();
  };
  const absl::Status no_swap = make(1 << 20, false);
  EXPECT_EQ(no_swap.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(no_swap.message()),
              HasSubstr("EngineOptions.swap_space_bytes: fake runner does not swap KV blocks"));
  EXPECT_THAT(std::string(make(-1, true).message()), HasSubstr("swap_space_bytes: negative"));
  // The fake's blocks are 16 bytes (4 tokens of a 4-byte id).
  EXPECT_THAT(std::string(make(15, true).message()),
              HasSubstr("swap_space_bytes: 15 bytes hold no KV block of 16 bytes"));
  EXPECT_TRUE(make(16, true).ok());
  EXPECT_TRUE(make(0, false).ok());
}

TEST(EngineImplTest, ContextIsCappedByTheKvPool) {
  auto t = MakeTestEngine({.num_blocks = 8, .block_size = 4});
  EXPECT_EQ(t->engine->max_context(), 32);
  Recorder rec;
  ASSERT_TRUE(Submit(*t, rec, "r", Request(std::vector<int32_t>(30, 2), 2)).ok());
  EXPECT_FALSE(Submit(*t, rec, "x", Request(std::vector<int32_t>(30, 2), 3)).ok());
  RunUntilIdle(*t->engine);
  EXPECT_EQ(rec.Final("r").usage.completion_tokens, 2);
}

TEST(EngineImplTest, LogprobsAndTopLogprobs) {
  auto t = MakeTestEngine({});
  Recorder rec;
  GenerationRequest r = Request({5, 6}, 4);
  r.logprobs = true;
  r.top_logprobs = 3;
  ASSERT_TRUE(Submit(*t, rec, "r", r).ok());
  RunUntilIdle(*t->engine);
  std::vector<int32_t> context = r.prompt_token_ids;
  for (const StreamOutput& out : rec.Outputs("r")) {
    ASSERT_EQ(out.logprobs.size(), 1u);
    const TokenLogprob& lp = out.logprobs[0];
    ASSERT_EQ(lp.top.size(), 3u);
    EXPECT_EQ(lp.top[0].first, lp.token_id);  // greedy: the chosen is the most likely
    EXPECT_FLOAT_EQ(lp.top[0].second, lp.logprob);
    EXPECT_GE(lp.top[1].second, lp.top[2].second);
    // log-softmax of the fake's logits, computed here.
    const std::vector<float> logits = HashedLogits(context, FakeTokenizer::kVocabSize);
    double sum = 0;
    for (float x : logits) sum += std::exp(static_cast<double>(x));
    EXPECT_NEAR(lp.logprob, logits[lp.token_id] - std::log(sum), 1e-4);
    context.push_back(lp.token_id);
  }
}

TEST(EngineImplTest, PrefixCacheHitsShowInUsage) {
  auto t = MakeTestEngine({.block_size = 4});
  Recorder rec;
  const std::vector<int32_t> prompt = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  ASSERT_TRUE(Submit(*t, rec, "first", Request(prompt, 3)).ok());
  RunUntilIdle(*t->engine);
  ASSERT_TRUE(Submit(*t, rec, "second", Request(prompt, 3)).ok());
  RunUntilIdle(*t->engine);
  EXPECT_EQ(rec.Final("first").usage.cached_tokens, 0);
  EXPECT_EQ(rec.Final("second").usage.cached_tokens, 8);  // 2 full blocks before the last token
  EXPECT_EQ(rec.Tokens("second"), rec.Tokens("first"));
}

TEST(EngineImplTest, QueueTimeTtftAndTokensPerSecondFollowTheClock) {
  TestEngine* raw = nullptr;
  auto t = MakeTestEngine(
      {.on_forward = [&](const BatchInput&) { raw->clock.Advance(absl::Milliseconds(500)); }});
  raw = t.get();
  Recorder rec;
  GenerationRequest r = Request({1, 2}, 4);
  r.stopping.ignore_eos = true;
  ASSERT_TRUE(Submit(*t, rec, "r", r).ok());
  t->clock.Advance(absl::Seconds(1));  // waits a second before its first step
  RunUntilIdle(*t->engine);
  const StreamOutput out = rec.Final("r");
  EXPECT_EQ(out.queue_time, absl::Seconds(1));
  EXPECT_EQ(out.time_to_first_token, absl::Milliseconds(1500));
  // 4 tokens over the last 2 s; the engine has existed 3 s (window 5 s).
  EXPECT_DOUBLE_EQ(t->engine->Stats().tokens_per_second, 4.0 / 3.0);
  EXPECT_EQ(t->engine->Stats().generation_tokens_total, 4);
  EXPECT_EQ(t->engine->Stats().prompt_tokens_total, 2);
  EXPECT_EQ(t->engine->Stats().steps_total, 4);
}

// on_step sees every batch: its sequences and tokens, its duration, the
// model's time within it (the runner's call, 20 ms on the fake clock) apart
// from the host's (a stream callback taking 3 ms), and the model's idle gap
// between consecutive steps: the callback after one step's call and before
// the next one's. A step after idle has none.
TEST(EngineImplTest, OnStepReportsEachBatchWithTheModelsTimeAndTheGap) {
  TestEngine* raw = nullptr;
  std::vector<StepInfo> steps;
  EngineOptions options;
  options.on_step = [&](const StepInfo& step) { steps.push_back(step); };
  auto t = MakeTestEngine(
      {.on_forward = [&](const BatchInput&) { raw->clock.Advance(absl::Milliseconds(20)); }},
      options);
  raw = t.get();
  for (int round = 0; round < 2; ++round) {
    GenerationRequest r = Request({1, 2, 3}, 3);
    r.stopping.ignore_eos = true;
    r.on_output = [&](const StreamOutput&) { raw->clock.Advance(absl::Milliseconds(3)); };
    ASSERT_TRUE(t->engine->Submit(std::move(r)).ok());
    RunUntilIdle(*t->engine);
    raw->clock.Advance(absl::Seconds(1));  // idle between the two requests
  }
  ASSERT_EQ(steps.size(), 6u);  // a prefill and two decodes each
  EXPECT_EQ(steps[0].num_seqs, 1);
  EXPECT_EQ(steps[0].num_tokens, 3);
  EXPECT_EQ(steps[1].num_tokens, 1);
  for (size_t i = 0; i < steps.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(steps[i].forward, absl::Milliseconds(20));
    EXPECT_EQ(steps[i].duration, absl::Milliseconds(23));  // one token's callback
    EXPECT_EQ(steps[i].gap, i % 3 == 0 ? absl::ZeroDuration() : absl::Milliseconds(3));
  }
}

// A runner that tells its host work and the device's gap apart (cuda): every
// step carries its host share, and the device's gap only where the engine
// measures a gap (consecutive steps).
TEST(EngineImplTest, OnStepCarriesTheRunnersHostTimeAndDeviceGap) {
  std::vector<StepInfo> steps;
  EngineOptions options;
  options.on_step = [&](const StepInfo& step) { steps.push_back(step); };
  auto t = MakeTestEngine({.step_times = RunnerStepTimes{.host = absl::Microseconds(250),
                                                         .device_gap = absl::Microseconds(700)}},
                          options);
  GenerationRequest r = Request({1, 2, 3}, 3);
  r.stopping.ignore_eos = true;
  ASSERT_TRUE(t->engine->Submit(std::move(r)).ok());
  RunUntilIdle(*t->engine);
  ASSERT_EQ(steps.size(), 3u);
  for (size_t i = 0; i < steps.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(steps[i].runner_host, absl::Microseconds(250));
    EXPECT_EQ(steps[i].device_gap.has_value(), i > 0);
  }
  EXPECT_EQ(steps[1].device_gap, absl::Microseconds(700));
}

TEST(EngineImplTest, DrainFinishesWorkThenRefusesNewRequests) {
  auto t = MakeTestEngine({});
  Recorder rec;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(Submit(*t, rec, absl::StrCat("r", i), Request({1, 2, i}, 5)).ok());
  }
  EXPECT_TRUE(t->engine->Drain(absl::InfiniteDuration()).ok());
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(rec.Finished(absl::StrCat("r", i)));
  EXPECT_TRUE(t->engine->Stats().draining);
  EXPECT_EQ(t->engine->Submit(Request({1}, 1)).status().code(), absl::StatusCode::kUnavailable);
}

TEST(EngineImplTest, DrainTimeoutCancelsTheRest) {
  auto t = MakeTestEngine({});
  Recorder rec;
  ASSERT_TRUE(Submit(*t, rec, "r", Request({1, 2}, 50)).ok());
  ASSERT_TRUE(*t->engine->Step());
  absl::Status drained = t->engine->Drain(absl::ZeroDuration());
  EXPECT_EQ(drained.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(rec.Final("r").finish_reason, FinishReason::kCancelled);
  EXPECT_EQ(t->engine->Stats().kv_blocks_used, 0);
}

TEST(EngineImplTest, MaxWaitingRefusesWithResourceExhausted) {
  auto t = MakeTestEngine({}, {.max_waiting = 2});
  EXPECT_TRUE(t->engine->Submit(Request({1}, 1)).ok());
  EXPECT_TRUE(t->engine->Submit(Request({1}, 1)).ok());
  EXPECT_EQ(t->engine->Submit(Request({1}, 1)).status().code(),
            absl::StatusCode::kResourceExhausted);
  RunUntilIdle(*t->engine);
  EXPECT_TRUE(t->engine->Submit(Request({1}, 1)).ok());
}

TEST(EngineImplTest, StatsCountWaitingRequestsByPriority) {
  auto t = MakeTestEngine({}, {.max_num_seqs = 1});
  for (int32_t priority : {0, 2, 0, 1}) {
    GenerationRequest r = Request({1, 2}, 4);
    r.priority = priority;
    ASSERT_TRUE(t->engine->Submit(std::move(r)).ok());
  }
  EngineStats stats = t->engine->Stats();  // all four not yet in the scheduler
  EXPECT_EQ(stats.num_waiting, 4);
  EXPECT_EQ(stats.num_waiting_by_priority, (std::map<int32_t, int64_t>{{0, 2}, {1, 1}, {2, 1}}));
  ASSERT_TRUE(t->engine->Step().ok());  // the one slot goes to priority 2
  stats = t->engine->Stats();
  EXPECT_EQ(stats.num_running, 1);
  EXPECT_EQ(stats.num_waiting, 3);
  EXPECT_EQ(stats.num_waiting_by_priority, (std::map<int32_t, int64_t>{{0, 2}, {1, 1}}));
  RunUntilIdle(*t->engine);
  EXPECT_TRUE(t->engine->Stats().num_waiting_by_priority.empty());
}

TEST(EngineImplTest, DestroyingTheEngineCancelsWhatIsLeft) {
  Recorder rec;
  {
    auto t = MakeTestEngine({});
    ASSERT_TRUE(Submit(*t, rec, "running", Request({1, 2}, 50)).ok());
    ASSERT_TRUE(*t->engine->Step());
    ASSERT_TRUE(Submit(*t, rec, "queued", Request({1, 2}, 50)).ok());
  }
  EXPECT_EQ(rec.Final("running").finish_reason, FinishReason::kCancelled);
  EXPECT_EQ(rec.Final("queued").finish_reason, FinishReason::kCancelled);
}

TEST(EngineImplTest, ThreadedEngineServesAndDrains) {
  auto t = MakeTestEngine({}, {.clock = RealClock::Get()}, /*threaded=*/true);
  EXPECT_EQ(t->engine->Step().status().code(), absl::StatusCode::kFailedPrecondition);
  Recorder rec;
  std::vector<GenerationRequest> requests;
  for (int i = 0; i < 8; ++i) {
    requests.push_back(Request({i, i + 1, 2}, 6, {.temperature = 0.9f, .seed = uint64_t(i)}));
    ASSERT_TRUE(Submit(*t, rec, absl::StrCat("r", i), requests.back()).ok());
  }
  ASSERT_TRUE(t->engine->Drain(absl::Minutes(5)).ok());
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(rec.Tokens(absl::StrCat("r", i)), ReferenceTokens(requests[i])) << i;
    rec.Final(absl::StrCat("r", i));
  }
  EXPECT_THAT(rec.Violations(), IsEmpty());
}

}  // namespace
}  // namespace onecard::engine::testing
