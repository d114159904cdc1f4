// Tests of the engine's step loop with the fake runner (whose logits depend
// on the context read back through the block tables): many concurrent
// requests with mixed sampling equal their solo reference runs; tiny KV pools
// force preemption (by recompute, or by swap through the fake's swap space)
// without changing any output, a swap space too small recomputes, a failed
// swap ends what it touched; priorities order admission
// and age on the engine's clock; random mixes of cancels, deadlines and
// runner failures keep the exactly-one-final-output invariant and free every
// block.
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/runtime/engine_test_util.h"

namespace onecard::engine::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

// A request with random prompt, length and sampling parameters.
GenerationRequest RandomRequest(std::mt19937_64& rng, int32_t max_prompt, int32_t max_new) {
  auto uniform = [&](int32_t lo, int32_t hi) {
    return std::uniform_int_distribution<int32_t>(lo, hi)(rng);
  };
  std::vector<int32_t> prompt;
  const int32_t stem = uniform(0, 2);  // shared stems exercise prefix caching
  for (int32_t i = 0; i < uniform(0, 2) * 4; ++i) prompt.push_back((stem * 7 + i) % 26);
  for (int32_t i = uniform(1, max_prompt); i > 0; --i) prompt.push_back(uniform(0, 62));
  SamplingParams sampling;
  switch (uniform(0, 3)) {
    case 0:
      sampling = {.temperature = 0.0f};
      break;
    case 1:
      sampling = {.temperature = 0.8f, .top_k = uniform(1, 10)};
      break;
    case 2:
      sampling = {.temperature = 1.2f, .top_p = 0.7f, .min_p = 0.05f};
      break;
    default:
      sampling = {.temperature = 1.0f,
                  .repetition_penalty = 1.3f,
                  .presence_penalty = 0.5f,
                  .frequency_penalty = 0.3f};
  }
  sampling.seed = rng();
  GenerationRequest r = Request(std::move(prompt), uniform(1, max_new), sampling);
  r.stopping.ignore_eos = uniform(0, 1) == 1;
  r.priority = uniform(0, 2);
  return r;
}

TEST(EngineStepTest, ManyConcurrentRequestsEqualTheirSoloRuns) {
  auto t = MakeTestEngine({.num_blocks = 256, .block_size = 4},
                          {.max_num_seqs = 8, .max_batched_tokens = 24});
  Recorder rec;
  std::mt19937_64 rng(1);
  std::vector<GenerationRequest> requests;
  for (int i = 0; i < 40; ++i) {
    requests.push_back(RandomRequest(rng, 20, 24));
    GenerationRequest r = requests.back();
    r.on_output = rec.Callback(absl::StrCat(i));
    ASSERT_TRUE(t->engine->Submit(std::move(r)).ok());
  }
  RunUntilIdle(*t->engine);
  for (int i = 0; i < 40; ++i) {
    EXPECT_EQ(rec.Tokens(absl::StrCat(i)), ReferenceTokens(requests[i])) << "request " << i;
    const StreamOutput final_out = rec.Final(absl::StrCat(i));
    EXPECT_NE(final_out.finish_reason, FinishReason::kError) << final_out.error;
  }
  EXPECT_GT(t->runner->max_chunks_in_a_batch(), 4u);  // requests really shared steps
  EXPECT_THAT(rec.Violations(), IsEmpty());
  const EngineStats stats = t->engine->Stats();
  EXPECT_EQ(stats.num_running + stats.num_waiting, 0);
  EXPECT_EQ(stats.kv_blocks_used, 0);
}

TEST(EngineStepTest, TinyKvPoolsPreemptWithoutChangingOutputs) {
  // 12 blocks of 4 tokens: every request fits alone (prompt + max_tokens <= 48),
  // but ten of them at once do not.
  auto t = MakeTestEngine({.num_blocks = 12, .block_size = 4},
                          {.max_num_seqs = 10, .max_batched_tokens = 64});
  Recorder rec;
  std::vector<GenerationRequest> requests;
  for (int i = 0; i < 10; ++i) {
    GenerationRequest r = Request({i, i + 1, i + 2, 30, 31, 32}, 20,
                                  {.temperature = 0.7f, .seed = uint64_t(100 + i)});
    r.stopping.ignore_eos = true;
    r.priority = i % 3;
    requests.push_back(r);
    r.on_output = rec.Callback(absl::StrCat(i));
    ASSERT_TRUE(t->engine->Submit(std::move(r)).ok());
  }
  RunUntilIdle(*t->engine);
  EXPECT_GT(t->engine->Stats().num_preemptions, 0);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(rec.Tokens(absl::StrCat(i)), ReferenceTokens(requests[i])) << "request " << i;
    EXPECT_EQ(rec.Final(absl::StrCat(i)).finish_reason, FinishReason::kLength);
    EXPECT_EQ(rec.Final(absl::StrCat(i)).usage.completion_tokens, 20);
  }
  EXPECT_EQ(t->engine->Stats().kv_blocks_used, 0);
}

// The ten requests of TinyKvPoolsPreemptWithoutChangingOutputs on an engine
// with a swap space of `swap_blocks` blocks (the fake's are 16 bytes), no
// prefix caching, and swapped-out device blocks poisoned (a block not copied
// back fails the read); returns the engine after the run.
std::unique_ptr<TestEngine> RunTenUnderKvPressure(int32_t swap_blocks, bool fail_swap,
                                                  Recorder& rec,
                                                  std::vector<GenerationRequest>* requests) {
  auto t = MakeTestEngine({.num_blocks = 12,
                           .block_size = 4,
                           .swap = true,
                           .poison_swapped_out = true,
                           .fail_swap = fail_swap},
                          {.max_num_seqs = 10,
                           .max_batched_tokens = 64,
                           .enable_prefix_caching = false,
                           .swap_space_bytes = int64_t{16} * swap_blocks});
  for (int i = 0; i < 10; ++i) {
    GenerationRequest r = Request({i, i + 1, i + 2, 30, 31, 32}, 20,
                                  {.temperature = 0.7f, .seed = uint64_t(100 + i)});
    r.priority = i % 3;
    requests->push_back(r);
    r.on_output = rec.Callback(absl::StrCat(i));
    EXPECT_TRUE(t->engine->Submit(std::move(r)).ok());
  }
  RunUntilIdle(*t->engine);
  return t;
}

// Preempted sequences go to the swap space and come back: the same tokens,
// fewer computed than by recompute, and the traffic counted.
TEST(EngineStepTest, SwapPreemptionsKeepOutputsAndCountTheTraffic) {
  Recorder rec, rec_recompute;
  std::vector<GenerationRequest> requests, unused;
  auto t = RunTenUnderKvPressure(/*swap_blocks=*/24, /*fail_swap=*/false, rec, &requests);
  auto recompute = MakeTestEngine(
      {.num_blocks = 12, .block_size = 4},
      {.max_num_seqs = 10, .max_batched_tokens = 64, .enable_prefix_caching = false});
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(rec.Tokens(absl::StrCat(i)), ReferenceTokens(requests[i])) << "request " << i;
    EXPECT_EQ(rec.Final(absl::StrCat(i)).finish_reason, FinishReason::kLength);
    GenerationRequest r = requests[i];
    r.on_output = rec_recompute.Callback(absl::StrCat(i));
    ASSERT_TRUE(recompute->engine->Submit(std::move(r)).ok());
  }
  RunUntilIdle(*recompute->engine);
  const EngineStats stats = t->engine->Stats();
  EXPECT_GT(stats.num_swap_preemptions, 0);
  EXPECT_EQ(stats.num_swap_preemptions, stats.num_preemptions);  // room for every victim
  EXPECT_GT(stats.kv_swapped_out_blocks_total, 0);
  EXPECT_EQ(stats.kv_swapped_in_blocks_total, stats.kv_swapped_out_blocks_total);
  EXPECT_EQ(stats.kv_swap_out_bytes_total, 16 * stats.kv_swapped_out_blocks_total);
  EXPECT_EQ(stats.kv_swap_in_bytes_total, 16 * stats.kv_swapped_in_blocks_total);
  EXPECT_EQ(stats.kv_swap_blocks_total, 24);
  EXPECT_EQ(stats.kv_swap_blocks_used, 0);
  EXPECT_EQ(stats.num_swapped, 0);
  EXPECT_EQ(stats.kv_blocks_used, 0);
  EXPECT_GT(recompute->engine->Stats().num_preemptions, 0);
  EXPECT_LT(t->runner->num_tokens_computed(), recompute->runner->num_tokens_computed());
}

// A swap space too small for any victim (one block; each holds two or more):
// every preemption recomputes, and no request is lost.
TEST(EngineStepTest, ASwapSpaceTooSmallRecomputesAndLosesNothing) {
  Recorder rec;
  std::vector<GenerationRequest> requests;
  auto t = RunTenUnderKvPressure(/*swap_blocks=*/1, /*fail_swap=*/false, rec, &requests);
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(rec.Tokens(absl::StrCat(i)), ReferenceTokens(requests[i])) << "request " << i;
    EXPECT_EQ(rec.Final(absl::StrCat(i)).finish_reason, FinishReason::kLength);
  }
  const EngineStats stats = t->engine->Stats();
  EXPECT_GT(stats.num_preemptions, 0);
  EXPECT_EQ(stats.num_swap_preemptions, 0);
  EXPECT_EQ(stats.kv_swapped_out_blocks_total, 0);
}

// A failed swap ends the requests it touched with kError (each exactly
// once); the others finish, and every block comes back.
TEST(EngineStepTest, AFailedSwapEndsTheRequestsItTouched) {
  Recorder rec;
  std::vector<GenerationRequest> requests;
  auto t = RunTenUnderKvPressure(/*swap_blocks=*/24, /*fail_swap=*/true, rec, &requests);
  EXPECT_THAT(rec.Violations(), IsEmpty());
  int errors = 0;
  for (int i = 0; i < 10; ++i) {
    const StreamOutput final_out = rec.Final(absl::StrCat(i));
    if (final_out.finish_reason == FinishReason::kError) {
      ++errors;
      EXPECT_THAT(std::string(final_out.error.message()), HasSubstr("injected swap failure"));
    } else {
      EXPECT_EQ(final_out.finish_reason, FinishReason::kLength);
      EXPECT_EQ(rec.Tokens(absl::StrCat(i)), ReferenceTokens(requests[i])) << "request " << i;
    }
  }
  EXPECT_GT(errors, 0);
  const EngineStats stats = t->engine->Stats();
  EXPECT_EQ(stats.kv_blocks_used, 0);
  EXPECT_EQ(stats.kv_swap_blocks_used, 0);
  EXPECT_EQ(stats.num_running + stats.num_waiting, 0);
}

TEST(EngineStepTest, HigherPriorityRunsFirst) {
  auto t = MakeTestEngine({}, {.max_num_seqs = 1});
  std::vector<std::string> order;
  auto submit = [&](const std::string& name, int32_t priority) {
    GenerationRequest r = Request({1, 2}, 2);
    r.stopping.ignore_eos = true;
    r.priority = priority;
    r.on_output = [&order, name](const StreamOutput& out) {
      if (out.finished) order.push_back(name);
    };
    ASSERT_TRUE(t->engine->Submit(std::move(r)).ok());
  };
  submit("low-early", 0);
  submit("high", 5);
  submit("low-late", 0);
  submit("mid", 2);
  RunUntilIdle(*t->engine);
  EXPECT_EQ(order, (std::vector<std::string>{"high", "mid", "low-early", "low-late"}));
}

// EngineOptions::aging_interval reaches the scheduler, on the engine's clock:
// a priority-0 request that waited three intervals (behind a running one)
// runs before a fresh priority-2 one; with aging off the fresh one goes first.
TEST(EngineStepTest, AgingOnTheEngineClockLetsALongWaitingRequestFirst) {
  for (const absl::Duration aging : {absl::Seconds(10), absl::ZeroDuration()}) {
    SCOPED_TRACE(::testing::Message() << "aging_interval " << aging);
    auto t = MakeTestEngine({}, {.max_num_seqs = 1, .aging_interval = aging});
    std::vector<std::string> order;
    auto submit = [&](const std::string& name, int32_t priority) {
      GenerationRequest r = Request({1, 2}, 2);
      r.priority = priority;
      r.on_output = [&order, name](const StreamOutput& out) {
        if (out.finished) order.push_back(name);
      };
      ASSERT_TRUE(t->engine->Submit(std::move(r)).ok());
    };
    submit("running", 5);
    submit("old-low", 0);
    ASSERT_TRUE(t->engine->Step().ok());  // "running" takes the one slot
    t->clock.Advance(3 * absl::Seconds(10));
    submit("fresh-high", 2);
    RunUntilIdle(*t->engine);
    const std::vector<std::string> aged = {"running", "old-low", "fresh-high"};
    const std::vector<std::string> strict = {"running", "fresh-high", "old-low"};
    EXPECT_EQ(order, aging > absl::ZeroDuration() ? aged : strict);
  }
}

// Submits a random request whose callback records it and, sometimes, cancels
// it from inside the callback; some get a deadline.
uint64_t SubmitRandom(TestEngine& t, Recorder& rec, const std::string& name, std::mt19937_64& rng) {
  auto uniform = [&](int32_t lo, int32_t hi) {
    return std::uniform_int_distribution<int32_t>(lo, hi)(rng);
  };
  GenerationRequest r = RandomRequest(rng, 12, 16);
  if (uniform(0, 5) == 0) r.deadline = t.clock.Now() + absl::Seconds(uniform(0, 5));
  StreamCallback record = rec.Callback(name);
  const bool cancel_self = uniform(0, 6) == 0;
  auto id = std::make_shared<uint64_t>(0);
  Engine* engine = t.engine.get();
  r.on_output = [record, cancel_self, id, engine](const StreamOutput& out) {
    record(out);
    if (cancel_self && !out.finished) engine->Cancel(*id);
  };
  absl::StatusOr<uint64_t> got = engine->Submit(std::move(r));
  EXPECT_TRUE(got.ok()) << got.status();
  *id = got.value_or(0);
  return *id;
}

// Random submissions, cancels (some from callbacks), deadlines, poisoned
// prompts and tiny pools: every accepted request ends exactly once, nothing
// follows its final output, and every block comes back.
TEST(EngineStepTest, RandomMixesKeepTheExactlyOneFinalInvariant) {
  constexpr int32_t kPoison = 62;
  for (uint64_t seed = 0; seed < 12; ++seed) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    std::mt19937_64 rng(seed);
    auto uniform = [&](int32_t lo, int32_t hi) {
      return std::uniform_int_distribution<int32_t>(lo, hi)(rng);
    };
    auto t = MakeTestEngine({.num_blocks = uniform(10, 40),
                             .block_size = 4,
                             .fail_on_token = seed % 2 == 0 ? kPoison : -1},
                            {.max_num_seqs = uniform(1, 8), .max_batched_tokens = uniform(4, 32)});
    Recorder rec;
    std::vector<uint64_t> ids;
    std::vector<std::string> names;
    for (int step = 0; step < 150; ++step) {
      if (uniform(0, 2) == 0) {
        names.push_back(absl::StrCat(step));
        ids.push_back(SubmitRandom(*t, rec, names.back(), rng));
      }
      if (uniform(0, 8) == 0 && !ids.empty()) t->engine->Cancel(ids[uniform(0, ids.size() - 1)]);
      if (uniform(0, 3) == 0) t->clock.Advance(absl::Seconds(1));
      ASSERT_TRUE(t->engine->Step().ok());
    }
    RunUntilIdle(*t->engine);
    EXPECT_THAT(rec.Violations(), IsEmpty());
    for (const std::string& name : names) rec.Final(name);  // exactly one, and last
    const EngineStats stats = t->engine->Stats();
    EXPECT_EQ(stats.kv_blocks_used, 0);
    EXPECT_EQ(stats.num_running + stats.num_waiting, 0);
  }
}

}  // namespace
}  // namespace onecard::engine::testing
