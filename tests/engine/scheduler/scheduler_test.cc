// Tests of Scheduler, hand-built steps: chunked prefill, phase order, the
// prefill order by effective priority and remaining cost, no overtaking,
// limits, preemption by blocks and by priority, by swap or by recompute,
// aging on a fake clock and its bound, prefix hits, arrival order under
// options.fifo. Each runs through the simulated engine of scheduler_driver.h
// (every chunk must read back its whole context through its block table;
// CheckInvariants() after every call; every step's plan checked against the
// documented order). Randomized sequences: scheduler_random_test.cc.
#include "engine/scheduler/scheduler.h"

#include <vector>

#include "gtest/gtest.h"
#include "tests/engine/scheduler/scheduler_driver.h"

namespace onecard::engine {
namespace {

TEST(SchedulerTest, ChunkedPrefillUnderTheTokenBudget) {
  Driver d(Options(16, /*budget=*/4));
  d.Add(1, Prompt(10), 0, 12);
  SchedulerOutput s1 = d.Step();
  ASSERT_EQ(s1.chunks.size(), 1u);
  EXPECT_EQ(s1.admitted, std::vector<int64_t>{1});
  EXPECT_EQ(s1.chunks[0].num_tokens, 4);
  EXPECT_FALSE(s1.chunks[0].want_logits);
  SchedulerOutput s2 = d.Step();
  EXPECT_EQ(s2.chunks[0].start_pos, 4);
  EXPECT_TRUE(s2.admitted.empty());
  SchedulerOutput s3 = d.Step();
  EXPECT_EQ(s3.chunks[0].start_pos, 8);
  EXPECT_EQ(s3.chunks[0].num_tokens, 2);
  EXPECT_TRUE(s3.chunks[0].want_logits);
  SchedulerOutput s4 = d.Step();  // a decode of the sampled token
  EXPECT_EQ(s4.chunks[0].start_pos, 10);
  EXPECT_EQ(s4.chunks[0].num_tokens, 1);
  d.Step();
  EXPECT_EQ(d.finished().at(1), RunAlone(Prompt(10), 12));
  EXPECT_TRUE(d.scheduler().Schedule().empty());
  EXPECT_EQ(d.scheduler().block_manager().num_used_blocks(), 0);
}

// long_prefill_token_threshold: no prefill chunk takes more than 16 tokens,
// so a long prompt spreads over steps and the budget left goes to the next
// sequence in prefill order.
TEST(SchedulerTest, LongPrefillTokenThresholdCapsEveryPrefillChunk) {
  SchedulerOptions options = Options(64, /*budget=*/64);
  options.long_prefill_token_threshold = 16;
  Driver d(options);
  d.Add(1, Prompt(50), 0, 52);
  d.Add(2, Prompt(40, 100), 0, 42);
  d.Add(3, Prompt(10, 200), 0, 12);
  SchedulerOutput s = d.Step();
  ASSERT_EQ(s.chunks.size(), 3u);  // prefill order: fewest tokens first
  EXPECT_EQ(s.chunks[0].seq_id, 3);
  EXPECT_EQ(s.chunks[0].num_tokens, 10);
  EXPECT_EQ(s.chunks[1].seq_id, 2);
  EXPECT_EQ(s.chunks[1].num_tokens, 16);
  EXPECT_EQ(s.chunks[2].seq_id, 1);
  EXPECT_EQ(s.chunks[2].num_tokens, 16);
  EXPECT_EQ(s.num_batched_tokens, 42);  // under the budget of 64: the cap, not the budget
  s = d.Step();                         // 3's decode; 2 and 1 another 16 each
  ASSERT_EQ(s.chunks.size(), 3u);
  EXPECT_EQ(s.chunks[0].num_tokens, 1);
  EXPECT_EQ(s.chunks[1].num_tokens, 16);
  EXPECT_EQ(s.chunks[2].num_tokens, 16);
  for (int i = 0; i < 100 && d.finished().size() < 3; ++i) d.Step();
  ASSERT_EQ(d.finished().size(), 3u);
  EXPECT_EQ(d.finished().at(1), RunAlone(Prompt(50), 52));
  EXPECT_EQ(d.finished().at(2), RunAlone(Prompt(40, 100), 42));
  EXPECT_EQ(d.finished().at(3), RunAlone(Prompt(10, 200), 12));
}

TEST(SchedulerTest, DecodesThenPrefillsByEffectivePriorityThenRemainingCost) {
  Driver d(Options(64, /*budget=*/8));
  d.Add(1, Prompt(2), 0, 100);   // decodes after step 1
  d.Add(2, Prompt(20), 0, 100);  // a long prompt: partial prefill
  d.Step();                      // 1: prompt 2 tokens; 2: 6 of 20
  d.Add(3, Prompt(3, 40), 0, 100);
  d.Add(4, Prompt(3, 50), 5, 100);  // later, but higher priority
  SchedulerOutput s = d.Step();
  ASSERT_EQ(s.chunks.size(), 4u);
  EXPECT_EQ(s.chunks[0].seq_id, 1);  // the decode first
  EXPECT_EQ(s.chunks[0].num_tokens, 1);
  EXPECT_EQ(s.chunks[1].seq_id, 4);  // priority 5 before the partial prefill
  EXPECT_EQ(s.chunks[1].num_tokens, 3);
  EXPECT_EQ(s.chunks[2].seq_id, 3);  // priority 0, 3 tokens left: before 2's 14
  EXPECT_EQ(s.chunks[2].num_tokens, 3);
  EXPECT_EQ(s.chunks[3].seq_id, 2);  // the rest of the budget
  EXPECT_EQ(s.chunks[3].num_tokens, 1);
  EXPECT_EQ(s.admitted, (std::vector<int64_t>{4, 3}));
  s = d.Step();  // three decodes, then 2's next 5 tokens
  ASSERT_EQ(s.chunks.size(), 4u);
  EXPECT_EQ(s.chunks[3].seq_id, 2);
  EXPECT_EQ(s.chunks[3].start_pos, 7);
  EXPECT_EQ(s.chunks[3].num_tokens, 5);
}

// Issue 20: a short high-priority prompt is not held behind a long prefill
// of a lower class; it gets its chunk in the next step, and the long one the
// budget left.
TEST(SchedulerTest, AShortHighPriorityPromptRunsInTheNextStepBesideALongPrefill) {
  Driver d(Options(/*num_blocks=*/1100, /*budget=*/512));
  d.Add(1, Prompt(4000), /*priority=*/0, 4001);
  d.Step();
  d.Step();  // 1024 of 4000 computed
  d.Add(2, Prompt(50, 9000), /*priority=*/2, 52);
  SchedulerOutput s = d.Step();
  ASSERT_EQ(s.chunks.size(), 2u);
  EXPECT_EQ(s.chunks[0].seq_id, 2);
  EXPECT_EQ(s.chunks[0].num_tokens, 50);
  EXPECT_TRUE(s.chunks[0].want_logits);
  EXPECT_EQ(s.chunks[1].seq_id, 1);
  EXPECT_EQ(s.chunks[1].start_pos, 1024);
  EXPECT_EQ(s.chunks[1].num_tokens, 462);
  s = d.Step();  // 2's decode, then the long prefill
  ASSERT_EQ(s.chunks.size(), 2u);
  EXPECT_EQ(s.chunks[0].seq_id, 2);
  EXPECT_EQ(s.chunks[1].num_tokens, 511);
  for (int i = 0; i < 20 && d.finished().size() < 2; ++i) d.Step();
  ASSERT_EQ(d.finished().size(), 2u);
  EXPECT_EQ(d.finished().at(1), RunAlone(Prompt(4000), 4001));
  EXPECT_EQ(d.finished().at(2), RunAlone(Prompt(50, 9000), 52));
}

// The same when the long prefill holds the pool: phase 1 preempts it.
TEST(SchedulerTest, AShortHighPriorityPromptPreemptsALongPrefillHoldingThePool) {
  Driver d(Options(/*num_blocks=*/1005, /*budget=*/512));
  d.Add(1, Prompt(4000), /*priority=*/0, 4001);  // 1000 blocks
  d.Step();
  d.Add(2, Prompt(50, 9000), /*priority=*/2, 52);  // 13 blocks; 5 are free
  SchedulerOutput s = d.Step();
  EXPECT_EQ(s.preempted, std::vector<int64_t>{1});
  ASSERT_EQ(s.chunks.size(), 1u);
  EXPECT_EQ(s.chunks[0].seq_id, 2);
  EXPECT_EQ(s.chunks[0].num_tokens, 50);
  for (int i = 0; i < 20 && d.finished().size() < 2; ++i) d.Step();
  ASSERT_EQ(d.finished().size(), 2u);
  EXPECT_EQ(d.finished().at(1), RunAlone(Prompt(4000), 4001));
}

TEST(SchedulerTest, EqualPriorityFewerTokensLeftFirst) {
  Driver d(Options(/*num_blocks=*/128, /*budget=*/64));
  d.Add(1, Prompt(300), 1, 301);
  d.Step();  // 236 tokens left
  d.Add(2, Prompt(40, 1000), 1, 41);
  d.Add(3, Prompt(20, 2000), 1, 21);  // added last, shortest
  SchedulerOutput s = d.Step();
  ASSERT_EQ(s.chunks.size(), 3u);
  EXPECT_EQ(s.chunks[0].seq_id, 3);
  EXPECT_EQ(s.chunks[0].num_tokens, 20);
  EXPECT_EQ(s.chunks[1].seq_id, 2);
  EXPECT_EQ(s.chunks[1].num_tokens, 40);
  EXPECT_EQ(s.chunks[2].seq_id, 1);  // the budget left
  EXPECT_EQ(s.chunks[2].num_tokens, 4);
  EXPECT_EQ(s.admitted, (std::vector<int64_t>{3, 2}));
}

SchedulerOptions FifoOptions(int32_t num_blocks, int32_t budget) {
  SchedulerOptions o = Options(num_blocks, budget);
  o.fifo = true;
  return o;
}

// options.fifo: the same arrivals as the two tests above, in arrival order:
// the short high-priority prompt waits for the long prefill's chunks, and is
// not let in by preempting it.
TEST(SchedulerTest, FifoKeepsArrivalOrderWhateverThePriority) {
  Driver d(FifoOptions(/*num_blocks=*/1100, /*budget=*/512));
  d.Add(1, Prompt(4000), /*priority=*/0, 4001);
  d.Step();
  d.Step();  // 1024 of 4000 computed
  d.Add(2, Prompt(50, 9000), /*priority=*/2, 52);
  SchedulerOutput s = d.Step();
  ASSERT_EQ(s.chunks.size(), 1u);
  EXPECT_EQ(s.chunks[0].seq_id, 1);
  EXPECT_EQ(s.chunks[0].num_tokens, 512);
  EXPECT_EQ(d.scheduler().EffectivePriority(*d.scheduler().Find(2)),
            d.scheduler().EffectivePriority(*d.scheduler().Find(1)));
  int steps = 1;
  while (d.scheduler().Find(2)->num_computed_tokens == 0) {
    d.Step();
    ++steps;
  }
  EXPECT_EQ(steps, 6);  // 1's last 2976 prompt tokens, 512 a step; 2 in the sixth's 96 left
  for (int i = 0; i < 20 && d.finished().size() < 2; ++i) d.Step();
  ASSERT_EQ(d.finished().size(), 2u);
  EXPECT_EQ(d.finished().at(2), RunAlone(Prompt(50, 9000), 52));

  Driver full(FifoOptions(/*num_blocks=*/1005, /*budget=*/512));
  full.Add(1, Prompt(4000), /*priority=*/0, 4001);  // 1000 blocks
  full.Step();
  full.Add(2, Prompt(50, 9000), /*priority=*/2, 52);  // 13 blocks; 5 are free
  s = full.Step();
  EXPECT_TRUE(s.preempted.empty());
  ASSERT_EQ(s.chunks.size(), 1u);
  EXPECT_EQ(s.chunks[0].seq_id, 1);
}

TEST(SchedulerTest, FifoPrefillsInArrivalOrderWhateverTheCost) {
  Driver d(FifoOptions(/*num_blocks=*/128, /*budget=*/64));
  d.Add(1, Prompt(300), 1, 301);
  d.Step();  // 236 tokens left
  d.Add(2, Prompt(40, 1000), 1, 41);
  d.Add(3, Prompt(20, 2000), 1, 21);  // added last, shortest
  SchedulerOutput s = d.Step();
  ASSERT_EQ(s.chunks.size(), 1u);
  EXPECT_EQ(s.chunks[0].seq_id, 1);
  EXPECT_EQ(s.chunks[0].num_tokens, 64);
  EXPECT_TRUE(s.admitted.empty());
}

TEST(SchedulerTest, AWaitingSequenceThatCannotStartStopsAdmissionNotPrefills) {
  {  // 10 blocks; 1 holds 6. 2 (5 blocks) cannot start; 3 fits, but is after it.
    Driver d(Options(/*num_blocks=*/10, /*budget=*/16));
    d.Add(1, Prompt(24), 1, 25);
    d.Step();  // 8 tokens left
    d.Add(2, Prompt(20, 100), 0, 21);
    d.Add(3, Prompt(4, 200), -1, 5);
    SchedulerOutput s = d.Step();
    ASSERT_EQ(s.chunks.size(), 1u);  // budget is left, yet 3 does not overtake 2
    EXPECT_EQ(s.chunks[0].seq_id, 1);
    EXPECT_TRUE(s.preempted.empty());
    EXPECT_EQ(d.scheduler().Find(3)->status, SequenceStatus::kWaiting);
  }
  {  // 1 holds 10 of 12 blocks; 2, shorter and of its class, cannot start:
     // 1's prefill, after 2 in prefill order, still gets its chunk.
    Driver d(Options(/*num_blocks=*/12, /*budget=*/16));
    d.Add(1, Prompt(40), 0, 41);
    d.Step();  // 24 tokens left
    d.Add(2, Prompt(12, 100), 0, 13);
    SchedulerOutput s = d.Step();
    ASSERT_EQ(s.chunks.size(), 1u);
    EXPECT_EQ(s.chunks[0].seq_id, 1);
    EXPECT_EQ(s.chunks[0].num_tokens, 16);
    EXPECT_EQ(d.scheduler().Find(2)->status, SequenceStatus::kWaiting);
  }
}

// A priority-0 prompt of 24 tokens is added `offset` after the scheduler
// starts; then every second a fresh priority-2 prompt of 16 tokens (the whole
// budget) arrives and a step runs. Returns how long the first waited for its
// first chunk (nullopt: not within max_steps).
std::optional<absl::Duration> WaitUnderAHighPriorityStream(absl::Duration aging,
                                                           absl::Duration offset, int max_steps) {
  FakeClock clock;
  Driver d(AgingOptions(&clock, /*num_blocks=*/64, /*budget=*/16, aging));
  clock.Advance(offset);
  const absl::Time added = clock.Now();
  d.Add(1, Prompt(24, 100), /*priority=*/0, 25);
  for (int step = 0; step < max_steps; ++step) {
    d.Add(1000 + step, Prompt(16, 200 + step), /*priority=*/2, 16);  // done at its prompt's end
    const SchedulerOutput s = d.Step();
    EXPECT_FALSE(s.chunks.empty());
    if (!s.chunks.empty() && s.chunks[0].seq_id == 1) {
      EXPECT_EQ(d.scheduler().EffectivePriority(*d.scheduler().Find(1)), 3);
      EXPECT_EQ(s.chunks[0].num_tokens, 16);
      return clock.Now() - added;
    }
    clock.Advance(absl::Seconds(1));
  }
  return std::nullopt;
}

// The contract's bound: behind priority 2, a priority-0 sequence ranks ahead
// of every one added (2 - 0 + 1) * aging_interval after it. Here it loses the
// ties of the third epoch on cost (24 tokens against 16), so it gets its
// first chunk at the third epoch boundary: the bound itself when added at an
// epoch's start.
TEST(SchedulerTest, AgingBoundsTheWaitBehindAStreamOfHigherPriority) {
  for (absl::Duration offset : {absl::ZeroDuration(), absl::Seconds(3), absl::Seconds(9)}) {
    SCOPED_TRACE(::testing::Message() << "added at " << offset);
    const std::optional<absl::Duration> waited = WaitUnderAHighPriorityStream(kAging, offset, 100);
    ASSERT_TRUE(waited.has_value()) << "starved";
    EXPECT_LE(*waited, 3 * kAging);
    EXPECT_EQ(*waited, 3 * kAging - offset);
  }
  // Without aging the stream starves it.
  EXPECT_EQ(WaitUnderAHighPriorityStream(absl::ZeroDuration(), absl::ZeroDuration(), 100),
            std::nullopt);
}

TEST(SchedulerTest, EffectivePriorityRisesOneClassAnInterval) {
  FakeClock clock;
  Scheduler s(AgingOptions(&clock, 16, 64));
  clock.Advance(kAging / 2);
  ASSERT_TRUE(s.Add(1, Prompt(3), 1).ok());  // in epoch 0
  EXPECT_EQ(s.EffectivePriority(*s.Find(1)), 1);
  clock.Advance(kAging / 2 - absl::Nanoseconds(1));
  s.Schedule();
  EXPECT_EQ(s.EffectivePriority(*s.Find(1)), 1);
  clock.Advance(absl::Nanoseconds(1));  // the first epoch boundary
  s.Schedule();
  EXPECT_EQ(s.EffectivePriority(*s.Find(1)), 2);
  clock.Advance(10 * kAging);
  s.Schedule();
  EXPECT_EQ(s.EffectivePriority(*s.Find(1)), 12);
  ASSERT_INVARIANTS(s);
}

TEST(SchedulerTest, MaxNumSeqsLimitsRunning) {
  Driver d(Options(64, /*budget=*/64, /*max_seqs=*/2));
  for (int64_t id = 1; id <= 3; ++id) d.Add(id, Prompt(3, 10 * id), 0, 6);
  SchedulerOutput s = d.Step();
  EXPECT_EQ(s.chunks.size(), 2u);
  EXPECT_EQ(d.scheduler().num_running(), 2);
  EXPECT_EQ(d.scheduler().num_waiting(), 1);
  for (int i = 0; i < 20 && d.finished().size() < 3; ++i) d.Step();
  ASSERT_EQ(d.finished().size(), 3u);
  for (int64_t id = 1; id <= 3; ++id)
    EXPECT_EQ(d.finished().at(id), RunAlone(Prompt(3, 10 * id), 6));
}

TEST(SchedulerTest, WaitingIsCountedByPriority) {
  Driver d(Options(64, /*budget=*/64, /*max_seqs=*/1));
  EXPECT_TRUE(d.scheduler().NumWaitingByPriority().empty());
  d.Add(1, Prompt(3, 10), 0, 6);
  d.Add(2, Prompt(3, 20), 5, 6);
  d.Add(3, Prompt(3, 30), 0, 6);
  EXPECT_EQ(d.scheduler().NumWaitingByPriority(), (std::map<int32_t, int64_t>{{0, 2}, {5, 1}}));
  d.Step();  // 2 runs: the only slot goes to the highest priority
  EXPECT_EQ(d.scheduler().NumWaitingByPriority(), (std::map<int32_t, int64_t>{{0, 2}}));
  EXPECT_EQ(d.scheduler().num_waiting(), 2);
}

// With 6 blocks of 4 (options): three sequences of 7 prompt tokens take 2
// blocks each; the first decode past 8 tokens needs a seventh block. Runs
// them to that step and returns its plan.
SchedulerOutput StepToASeventhBlock(Driver& d) {
  d.Add(1, Prompt(7, 10), 0, 12);
  d.Add(2, Prompt(7, 20), 1, 12);  // highest priority
  d.Add(3, Prompt(7, 30), 0, 12);  // lowest priority, latest arrival: the victim
  d.Step();                        // prefill all three
  SchedulerOutput s = d.Step();    // decode position 7: still inside block 2
  EXPECT_TRUE(s.preempted.empty());
  return d.Step();  // position 8 needs a third block each: 3 is preempted
}

TEST(SchedulerTest, OutOfBlocksPreemptsLowestPriorityLatestArrivalByRecompute) {
  Driver d(Options(6, /*budget=*/64));
  SchedulerOutput s = StepToASeventhBlock(d);
  EXPECT_EQ(s.preempted, std::vector<int64_t>{3});
  EXPECT_EQ(d.scheduler().Stats().num_preemptions, 1);
  const Sequence* victim = d.scheduler().Find(3);
  ASSERT_NE(victim, nullptr);
  EXPECT_EQ(victim->status, SequenceStatus::kWaiting);
  EXPECT_EQ(victim->num_computed_tokens, 0);
  EXPECT_EQ(victim->num_tokens(), 9);  // its sampled tokens stay, as prompt
  EXPECT_EQ(victim->num_preemptions, 1);
  for (int i = 0; i < 40 && d.finished().size() < 3; ++i) d.Step();
  ASSERT_EQ(d.finished().size(), 3u);
  for (int64_t id = 1; id <= 3; ++id) {
    EXPECT_EQ(d.finished().at(id), RunAlone(Prompt(7, 10 * id), 12)) << "seq " << id;
  }
}

// The same pressure with a swap space: 3 is swapped out with its 8
// computed tokens (two blocks) and resumes past them, its two blocks copied
// back (no prefix caching here, so nothing else holds them).
TEST(SchedulerTest, OutOfBlocksPreemptsBySwapWhenTheSwapSpaceHasRoom) {
  SchedulerOptions options = Options(6, /*budget=*/64, /*max_seqs=*/8, /*caching=*/false);
  options.num_swap_blocks = 4;
  Driver d(options);
  SchedulerOutput s = StepToASeventhBlock(d);
  EXPECT_EQ(s.preempted, std::vector<int64_t>{3});
  EXPECT_EQ(s.swapped_out, std::vector<int64_t>{3});
  ASSERT_EQ(s.swap_out.size(), 2u);
  EXPECT_EQ(s.swap_out[0].host_block, 0);  // a fresh swap space: one run
  EXPECT_EQ(s.swap_out[1].host_block, 1);
  const Sequence* victim = d.scheduler().Find(3);
  EXPECT_EQ(victim->status, SequenceStatus::kSwapped);
  EXPECT_EQ(victim->num_computed_tokens, 8);
  EXPECT_EQ(victim->num_tokens(), 9);
  SchedulerStats stats = d.scheduler().Stats();
  EXPECT_EQ(stats.num_preemptions, 1);
  EXPECT_EQ(stats.num_swap_preemptions, 1);
  EXPECT_EQ(stats.num_swapped, 1);
  EXPECT_EQ(stats.swap_blocks_used, 2);
  bool resumed = false;
  for (int i = 0; i < 40 && d.finished().size() < 3; ++i) {
    s = d.Step();
    if (s.swapped_in.empty()) continue;
    resumed = true;
    EXPECT_EQ(s.swapped_in, std::vector<int64_t>{3});
    EXPECT_EQ(s.swap_in.size(), 2u);
    for (const ScheduledChunk& c : s.chunks) {
      if (c.seq_id == 3) EXPECT_EQ(c.start_pos, 8) << "resumed past its computed tokens";
    }
  }
  EXPECT_TRUE(resumed);
  ASSERT_EQ(d.finished().size(), 3u);
  for (int64_t id = 1; id <= 3; ++id) {
    EXPECT_EQ(d.finished().at(id), RunAlone(Prompt(7, 10 * id), 12)) << "seq " << id;
  }
  stats = d.scheduler().Stats();
  EXPECT_EQ(stats.num_swapped_out_blocks, 2);
  EXPECT_EQ(stats.num_swapped_in_blocks, 2);
  EXPECT_EQ(stats.swap_blocks_used, 0);
}

// A swap space too small for the victim's blocks: recompute, as without one.
TEST(SchedulerTest, RecomputesWhenTheSwapSpaceIsFull) {
  SchedulerOptions options = Options(6, /*budget=*/64);
  options.num_swap_blocks = 1;
  Driver d(options);
  const SchedulerOutput s = StepToASeventhBlock(d);
  EXPECT_EQ(s.preempted, std::vector<int64_t>{3});
  EXPECT_TRUE(s.swapped_out.empty());
  EXPECT_TRUE(s.swap_out.empty());
  EXPECT_EQ(d.scheduler().Find(3)->status, SequenceStatus::kWaiting);
  EXPECT_EQ(d.scheduler().Find(3)->num_computed_tokens, 0);
  for (int i = 0; i < 40 && d.finished().size() < 3; ++i) d.Step();
  ASSERT_EQ(d.finished().size(), 3u);
  EXPECT_EQ(d.finished().at(3), RunAlone(Prompt(7, 30), 12));
  EXPECT_EQ(d.scheduler().Stats().num_swap_preemptions, 0);
}

// With prefix caching the victim's full blocks stay cached on the device
// after the swap-out; on resume those nobody evicted are prefix hits, and
// only the others are copied back.
TEST(SchedulerTest, ResumeTakesStillCachedBlocksAndCopiesTheRest) {
  SchedulerOptions options = Options(4, /*budget=*/64);
  options.num_swap_blocks = 4;
  Driver d(options);
  d.Add(1, Prompt(7, 10), 1, 9);
  d.Add(2, Prompt(7, 20), 0, 10);
  d.Step();
  d.Step();
  // Both need a third block: 2 is swapped out (blocks of tokens 0-3 and
  // 4-7); 1's new block evicts the least recently freed, 2's second.
  SchedulerOutput s = d.Step();
  EXPECT_EQ(s.swapped_out, std::vector<int64_t>{2});
  ASSERT_EQ(s.swap_out.size(), 2u);
  s = d.Step();  // 1 finished last step; 2 resumes
  ASSERT_EQ(s.swapped_in, std::vector<int64_t>{2});
  ASSERT_EQ(s.swap_in.size(), 1u);
  EXPECT_EQ(s.swap_in[0].host_block, 1);  // the second block's copy
  ASSERT_EQ(s.chunks.size(), 1u);
  EXPECT_EQ(s.chunks[0].start_pos, 8);
  for (int i = 0; i < 40 && d.finished().size() < 2; ++i) d.Step();
  EXPECT_EQ(d.finished().at(2), RunAlone(Prompt(7, 20), 10));
}

// Under KV pressure the victim is the lowest effective priority: 1, of
// class 0, has aged three classes before 2 and 3 arrive, so 3 (class 1) goes.
TEST(SchedulerTest, OutOfBlocksPreemptsTheLowestEffectivePriority) {
  FakeClock clock;
  Driver d(AgingOptions(&clock, /*num_blocks=*/6, /*budget=*/64));
  d.Add(1, Prompt(7, 10), 0, 12);
  clock.Advance(3 * kAging);
  d.Add(2, Prompt(7, 20), 2, 12);
  d.Add(3, Prompt(7, 30), 1, 12);
  d.Step();
  d.Step();
  SchedulerOutput s = d.Step();  // each needs a third block
  EXPECT_EQ(s.preempted, std::vector<int64_t>{3});
  EXPECT_EQ(d.scheduler().EffectivePriority(*d.scheduler().Find(1)), 3);
  EXPECT_EQ(d.scheduler().EffectivePriority(*d.scheduler().Find(2)), 2);
  EXPECT_EQ(d.scheduler().EffectivePriority(*d.scheduler().Find(3)), 1);
  for (int i = 0; i < 40 && d.finished().size() < 3; ++i) d.Step();
  ASSERT_EQ(d.finished().size(), 3u);
  EXPECT_EQ(d.finished().at(3), RunAlone(Prompt(7, 30), 12));
}

TEST(SchedulerTest, ASequenceThatIsItselfTheLowestWaits) {
  Driver d(Options(4, /*budget=*/64));
  d.Add(1, Prompt(7, 10), 1, 10);
  d.Add(2, Prompt(7, 20), 0, 10);
  d.Step();
  d.Step();
  SchedulerOutput s = d.Step();  // both need a third block; 2 ranks last
  EXPECT_EQ(s.preempted, std::vector<int64_t>{2});
  ASSERT_EQ(s.chunks.size(), 1u);
  EXPECT_EQ(s.chunks[0].seq_id, 1);
  for (int i = 0; i < 40 && d.finished().size() < 2; ++i) d.Step();
  EXPECT_EQ(d.finished().at(2), RunAlone(Prompt(7, 20), 10));
}

TEST(SchedulerTest, HigherPriorityWaitingPreemptsLowerRunning) {
  Driver d(Options(4, /*budget=*/64));
  d.Add(1, Prompt(6, 10), 0, 14);
  d.Add(2, Prompt(6, 20), 0, 14);
  d.Step();
  d.Add(3, Prompt(5, 30), 2, 8);  // needs 2 blocks; none free
  SchedulerOutput s = d.Step();
  EXPECT_EQ(s.preempted, std::vector<int64_t>{2});
  ASSERT_EQ(s.admitted, std::vector<int64_t>{3});
  d.Add(4, Prompt(5, 40), 0, 8);  // equal priority to the running ones: waits
  s = d.Step();
  EXPECT_TRUE(s.preempted.empty());
  for (int i = 0; i < 80 && d.finished().size() < 4; ++i) d.Step();
  ASSERT_EQ(d.finished().size(), 4u);
  EXPECT_EQ(d.finished().at(2), RunAlone(Prompt(6, 20), 14));
}

TEST(SchedulerTest, PrefixHitsStartPastTheCachedTokens) {
  Driver d(Options(32, /*budget=*/64));
  d.Add(1, Prompt(10), 0, 11);
  d.Step();
  d.Add(2, Prompt(13), 0, 14);  // shares 8 computed tokens (2 blocks)
  SchedulerOutput s = d.Step();
  ASSERT_EQ(s.chunks.size(), 2u);
  EXPECT_EQ(s.chunks[1].seq_id, 2);
  EXPECT_EQ(s.chunks[1].start_pos, 8);
  EXPECT_EQ(s.chunks[1].num_tokens, 5);
  EXPECT_EQ(d.scheduler().Find(2)->num_cached_tokens, 8);
}

TEST(SchedulerTest, AddRejectsBadPrompts) {
  SchedulerOptions options = Options(4);
  options.max_context = 10;
  Scheduler s(options);
  EXPECT_EQ(s.max_context(), 10);
  EXPECT_EQ(s.Add(1, {}, 0).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.Add(1, Prompt(11), 0).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(s.Add(1, Prompt(10), 0).ok());
  EXPECT_EQ(s.Add(1, Prompt(3), 0).code(), absl::StatusCode::kInvalidArgument);
  options.max_context = 1000;  // capped by the pool: 4 blocks of 4
  EXPECT_EQ(Scheduler(options).max_context(), 16);
}

TEST(SchedulerTest, RemoveFreesBlocksWhereverTheSequenceIs) {
  Driver d(Options(8, /*budget=*/4, /*max_seqs=*/1));
  d.Add(1, Prompt(9), 0, 20);
  d.Add(2, Prompt(12, 50), 0, 20);  // after 1 in prefill order: waits for the slot
  d.Step();
  EXPECT_EQ(d.scheduler().block_manager().num_used_blocks(), 3);
  d.scheduler().Remove(2);  // waiting
  d.scheduler().Remove(1);  // running, mid-prefill
  ASSERT_INVARIANTS(d.scheduler());
  EXPECT_EQ(d.scheduler().block_manager().num_used_blocks(), 0);
  EXPECT_EQ(d.scheduler().num_running() + d.scheduler().num_waiting(), 0);
  EXPECT_TRUE(d.scheduler().Schedule().empty());
}

}  // namespace
}  // namespace onecard::engine
