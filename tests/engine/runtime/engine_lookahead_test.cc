// Tests of the engine's look-ahead (EngineOptions::async_scheduling) with the
// fake runner, whose logits depend on the context read back through the
// block tables and whose LaunchSample is ModelRunner's default (pending
// tokens filled in from the previous launch). The same workloads run one
// step at a time and with look-ahead must stream the same outputs; the
// runner must have seen two launched steps unwaited and pending tokens;
// lengths are foreseen (no extra row), eos and stops cost one dropped row;
// cancels, failures at launch and at the wait, KV pressure (recompute and
// swap), prefix caching, and requests that cannot go ahead (logprobs,
// penalties, min_tokens) keep the exactly-one-final-output rule.
#include <map>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/runtime/engine_test_util.h"

namespace onecard::engine::testing {
namespace {

using ::testing::IsEmpty;

struct Job {
  std::string name;
  GenerationRequest request;
  int submit_at_step = 0;
};

struct Outcome {
  Recorder rec;
  int64_t launches = 0;
  int64_t pending_inputs = 0;
  int64_t max_unwaited = 0;
  int64_t tokens_computed = 0;
  int64_t forward_sample_calls = 0;
  EngineStats stats;
};

// Submits each job at its step and steps until every job finished.
void RunJobs(bool ahead, FakeRunnerOptions runner, EngineOptions options,
             const std::vector<Job>& jobs, Outcome* out) {
  runner.device_sampling = true;
  options.async_scheduling = ahead;
  auto t = MakeTestEngine(runner, options);
  ASSERT_NE(t->engine, nullptr);
  int step = 0;
  size_t submitted = 0;
  for (int guard = 0; guard < 100000; ++guard) {
    for (const Job& job : jobs) {
      if (job.submit_at_step != step) continue;
      GenerationRequest request = job.request;
      request.on_output = out->rec.Callback(job.name);
      ASSERT_TRUE(t->engine->Submit(std::move(request)).ok());
      ++submitted;
    }
    absl::StatusOr<bool> ran = t->engine->Step();
    ASSERT_TRUE(ran.ok()) << ran.status();
    ++step;
    bool all_done = submitted == jobs.size();
    for (const Job& job : jobs) all_done = all_done && out->rec.Finished(job.name);
    if (all_done && !*ran) break;
  }
  for (const Job& job : jobs) ASSERT_TRUE(out->rec.Finished(job.name)) << job.name;
  EXPECT_THAT(out->rec.Violations(), IsEmpty());
  out->launches = t->runner->num_launches();
  out->pending_inputs = t->runner->num_pending_inputs();
  out->max_unwaited = t->runner->max_unwaited();
  out->tokens_computed = t->runner->num_tokens_computed();
  out->forward_sample_calls = t->runner->num_forward_sample_calls();
  out->stats = t->engine->Stats();
}

// Every job's stream is the same in both runs: tokens, text, finish reason,
// usage.
void ExpectSameOutputs(const std::vector<Job>& jobs, const Outcome& a, const Outcome& b) {
  for (const Job& job : jobs) {
    SCOPED_TRACE(job.name);
    EXPECT_EQ(a.rec.Tokens(job.name), b.rec.Tokens(job.name));
    EXPECT_EQ(a.rec.Text(job.name), b.rec.Text(job.name));
    const StreamOutput fa = a.rec.Final(job.name);
    const StreamOutput fb = b.rec.Final(job.name);
    EXPECT_EQ(fa.finish_reason, fb.finish_reason);
    EXPECT_EQ(fa.usage.completion_tokens, fb.usage.completion_tokens);
    EXPECT_EQ(fa.error.code(), fb.error.code());
  }
}

// A mix: greedy and seeded requests of different lengths, some ending by
// eos, a stop token or a stop string, arriving over the first steps.
std::vector<Job> Mix(int n) {
  std::vector<Job> jobs;
  for (int i = 0; i < n; ++i) {
    std::vector<int32_t> prompt;
    for (int j = 0; j < 3 + (i * 5) % 11; ++j) prompt.push_back((i * 13 + j * 7) % 60);
    GenerationRequest r = Request(prompt, 4 + (i * 7) % 23,
                                  {.temperature = i % 3 == 0 ? 0.0f : 0.8f, .seed = 7u + i});
    r.stopping.ignore_eos = i % 4 != 1;
    if (i % 5 == 2) r.stopping.stop_token_ids = {3, 11};
    if (i % 6 == 3) r.stopping.stop_strings = {"e", "q"};
    jobs.push_back({.name = "r" + std::to_string(i), .request = r, .submit_at_step = (i * 3) % 17});
  }
  return jobs;
}

TEST(EngineLookaheadTest, StreamsWhatOneStepAtATimeStreams) {
  const std::vector<Job> jobs = Mix(24);
  Outcome sync, ahead;
  RunJobs(false, {.num_blocks = 256, .block_size = 4}, {.max_num_seqs = 8}, jobs, &sync);
  RunJobs(true, {.num_blocks = 256, .block_size = 4}, {.max_num_seqs = 8}, jobs, &ahead);
  ExpectSameOutputs(jobs, sync, ahead);
  EXPECT_EQ(sync.launches, 0);
  EXPECT_GT(ahead.launches, 0);
  EXPECT_EQ(ahead.max_unwaited, 2);      // step N+1 launched before step N was read
  EXPECT_GT(ahead.pending_inputs, 100);  // decodes fed by the device's tokens
  EXPECT_EQ(ahead.forward_sample_calls, ahead.launches);  // no step ran one at a time
  EXPECT_EQ(ahead.stats.kv_blocks_used, 0);
  EXPECT_EQ(ahead.stats.generation_tokens_total, sync.stats.generation_tokens_total);
}

TEST(EngineLookaheadTest, ALengthEndIsForeseenAndAnEosCostsOneDroppedRow) {
  // max_tokens 6 alone: the prompt, then 5 decodes; no row past the last.
  std::vector<Job> length = {{.name = "len", .request = Request({1, 2, 3}, 6)}};
  Outcome sync, ahead;
  RunJobs(false, {}, {}, length, &sync);
  RunJobs(true, {}, {}, length, &ahead);
  ExpectSameOutputs(length, sync, ahead);
  EXPECT_EQ(sync.tokens_computed, 3 + 5);
  EXPECT_EQ(ahead.tokens_computed, 3 + 5);

  // Ends by eos: the fake's logits put eos first once the context has 6
  // tokens; the step launched ahead of that token's read-back is dropped.
  const LogitsFn eos_at_six = [](std::span<const int32_t> context) {
    std::vector<float> logits(64, 0.0f);
    logits[context.size() >= 6 ? FakeTokenizer::kEos : 40 + context.size() % 10] = 1.0f;
    return logits;
  };
  GenerationRequest r = Request({1, 2, 3}, 50);
  r.stopping.ignore_eos = false;
  std::vector<Job> eos = {{.name = "eos", .request = r}};
  Outcome sync_eos, ahead_eos;
  RunJobs(false, {.logits_fn = eos_at_six}, {}, eos, &sync_eos);
  RunJobs(true, {.logits_fn = eos_at_six}, {}, eos, &ahead_eos);
  ExpectSameOutputs(eos, sync_eos, ahead_eos);
  EXPECT_EQ(sync_eos.rec.Final("eos").finish_reason, FinishReason::kEos);
  EXPECT_EQ(ahead_eos.tokens_computed, sync_eos.tokens_computed + 1);
}

TEST(EngineLookaheadTest, KvPressureByRecomputeAndBySwapChangesNothing) {
  const std::vector<Job> jobs = Mix(16);
  for (const bool swap : {false, true}) {
    SCOPED_TRACE(swap ? "swap" : "recompute");
    FakeRunnerOptions runner{.num_blocks = 24, .block_size = 4, .swap = swap};
    EngineOptions options{.max_num_seqs = 8};
    if (swap) options.swap_space_bytes = 4 * 4 * 64;  // 64 host blocks
    Outcome sync, ahead;
    RunJobs(false, runner, options, jobs, &sync);
    RunJobs(true, runner, options, jobs, &ahead);
    ExpectSameOutputs(jobs, sync, ahead);
    EXPECT_GT(ahead.stats.num_preemptions, 0);
    if (swap) EXPECT_GT(ahead.stats.num_swap_preemptions, 0);
    EXPECT_EQ(ahead.stats.kv_blocks_used, 0);
    EXPECT_GT(ahead.pending_inputs, 0);
  }
}

TEST(EngineLookaheadTest, SharedPrefixesHitTheCacheAndStreamTheSame) {
  // Greedy requests on two stems of 9 tokens, arriving after earlier ones
  // finished: their blocks are cached from resolved tokens only.
  std::vector<Job> jobs;
  for (int i = 0; i < 12; ++i) {
    std::vector<int32_t> prompt = {5, 6, 7, 8, 9, 10, 11, 12, 13};
    if (i % 2 == 1) prompt[0] = 20;
    prompt.push_back(30 + i);
    jobs.push_back({.name = "p" + std::to_string(i),
                    .request = Request(prompt, 9),
                    .submit_at_step = 12 * (i / 3)});
  }
  Outcome sync, ahead;
  RunJobs(false, {.num_blocks = 64, .block_size = 4}, {}, jobs, &sync);
  RunJobs(true, {.num_blocks = 64, .block_size = 4}, {}, jobs, &ahead);
  ExpectSameOutputs(jobs, sync, ahead);
  for (const Job& job : jobs) {
    EXPECT_EQ(ahead.rec.Tokens(job.name), ReferenceTokens(job.request)) << job.name;
  }
  // Later requests found their stem cached.
  EXPECT_GT(ahead.rec.Final("p11").usage.cached_tokens, 0);
  EXPECT_EQ(ahead.rec.Final("p11").usage.cached_tokens, sync.rec.Final("p11").usage.cached_tokens);
}

TEST(EngineLookaheadTest, RequestsThatCannotGoAheadStepOneAtATime) {
  std::vector<Job> jobs = Mix(6);
  GenerationRequest logprobs = Request({4, 5, 6}, 8);
  logprobs.logprobs = true;
  logprobs.top_logprobs = 2;
  jobs.push_back({.name = "logprobs", .request = logprobs, .submit_at_step = 2});
  GenerationRequest penalty = Request({7, 8}, 8, {.temperature = 0.0f, .repetition_penalty = 1.2f});
  jobs.push_back({.name = "penalty", .request = penalty, .submit_at_step = 30});
  GenerationRequest min_tokens = Request({9, 9, 9}, 6);
  min_tokens.stopping.min_tokens = 3;
  jobs.push_back({.name = "min_tokens", .request = min_tokens, .submit_at_step = 60});
  Outcome sync, ahead;
  RunJobs(false, {}, {}, jobs, &sync);
  RunJobs(true, {}, {}, jobs, &ahead);
  ExpectSameOutputs(jobs, sync, ahead);
  EXPECT_FALSE(ahead.rec.Outputs("logprobs").front().logprobs.empty());
  EXPECT_GT(ahead.launches, 0);  // the steps without them went ahead
}

TEST(EngineLookaheadTest, CancelAndDeadlineWhileARowIsInFlight) {
  std::vector<Job> jobs = Mix(8);
  Outcome ahead;
  FakeRunnerOptions runner;
  runner.device_sampling = true;
  auto t = MakeTestEngine(runner, {.async_scheduling = true});
  Recorder& rec = ahead.rec;
  std::vector<uint64_t> ids;
  for (const Job& job : jobs) {
    GenerationRequest request = job.request;
    request.stopping.max_tokens = 40;
    request.on_output = rec.Callback(job.name);
    absl::StatusOr<uint64_t> id = t->engine->Submit(std::move(request));
    ASSERT_TRUE(id.ok());
    ids.push_back(*id);
  }
  GenerationRequest late = Request({1, 2}, 40);
  late.deadline = t->clock.Now() + absl::Seconds(5);
  late.on_output = rec.Callback("late");
  ASSERT_TRUE(t->engine->Submit(std::move(late)).ok());
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(t->engine->Step().ok());
  t->engine->Cancel(ids[2]);
  t->engine->Cancel(ids[5]);
  t->clock.Advance(absl::Seconds(6));
  RunUntilIdle(*t->engine);
  EXPECT_THAT(rec.Violations(), IsEmpty());
  EXPECT_EQ(rec.Final("r2").finish_reason, FinishReason::kCancelled);
  EXPECT_EQ(rec.Final("r5").finish_reason, FinishReason::kCancelled);
  EXPECT_EQ(rec.Final("late").finish_reason, FinishReason::kDeadline);
  for (const std::string name : {"r0", "r3", "r7"}) {
    GenerationRequest alone = jobs[name[1] - '0'].request;
    alone.stopping.max_tokens = 40;
    if (alone.sampling.temperature == 0.0f && alone.stopping.ignore_eos &&
        alone.stopping.stop_token_ids.empty() && alone.stopping.stop_strings.empty()) {
      EXPECT_EQ(rec.Tokens(name), ReferenceTokens(alone)) << name;
    }
    EXPECT_TRUE(rec.Finished(name));
  }
  EXPECT_EQ(t->engine->Stats().kv_blocks_used, 0);
}

TEST(EngineLookaheadTest, AFailureAtLaunchOrAtTheWaitEndsOnlyItsRows) {
  // At launch: a prompt holding the fake's failing token fails its step.
  {
    std::vector<Job> jobs = Mix(6);
    jobs.push_back({.name = "bad", .request = Request({1, 61, 2}, 5), .submit_at_step = 20});
    Outcome ahead;
    RunJobs(true, {.fail_on_token = 61}, {}, jobs, &ahead);
    EXPECT_EQ(ahead.rec.Final("bad").finish_reason, FinishReason::kError);
    for (const Job& job : jobs) {
      if (job.name != "bad" && job.submit_at_step > 20) {
        EXPECT_NE(ahead.rec.Final(job.name).finish_reason, FinishReason::kError);
      }
    }
  }
  // At the wait: the rows of launch 5 end with the error, the rest streams.
  {
    const std::vector<Job> jobs = Mix(10);
    Outcome sync, ahead;
    RunJobs(false, {}, {}, jobs, &sync);
    RunJobs(true, {.fail_wait_of_launch = 5}, {}, jobs, &ahead);
    int failed = 0;
    for (const Job& job : jobs) {
      const StreamOutput f = ahead.rec.Final(job.name);
      if (f.finish_reason == FinishReason::kError) {
        ++failed;
        EXPECT_EQ(f.error.message(), "injected device error");
      } else {
        EXPECT_EQ(ahead.rec.Tokens(job.name), sync.rec.Tokens(job.name)) << job.name;
      }
    }
    EXPECT_GT(failed, 0);
    EXPECT_LT(failed, static_cast<int>(jobs.size()));
    EXPECT_EQ(ahead.stats.kv_blocks_used, 0);
  }
}

TEST(EngineLookaheadTest, ThreadedEngineDrains) {
  const std::vector<Job> jobs = Mix(12);
  Outcome sync;
  RunJobs(false, {}, {}, jobs, &sync);
  FakeRunnerOptions runner;
  runner.device_sampling = true;
  EngineOptions options;
  options.async_scheduling = true;
  options.clock = RealClock::Get();
  auto t = MakeTestEngine(runner, options, /*threaded=*/true);
  Recorder rec;
  for (const Job& job : jobs) {
    GenerationRequest request = job.request;
    request.on_output = rec.Callback(job.name);
    ASSERT_TRUE(t->engine->Submit(std::move(request)).ok());
  }
  ASSERT_TRUE(t->engine->Drain(absl::Seconds(60)).ok());
  EXPECT_THAT(rec.Violations(), IsEmpty());
  for (const Job& job : jobs) EXPECT_EQ(rec.Tokens(job.name), sync.rec.Tokens(job.name));
}

}  // namespace
}  // namespace onecard::engine::testing
