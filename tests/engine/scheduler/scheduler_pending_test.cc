// Tests of the scheduler's look-ahead (scheduler.h: "Look-ahead"): pending
// tokens planned as decodes, resolved oldest first, kept out of the prefix
// cache until resolved; a last pending token gets no further chunk; a waiting
// sequence with a pending token is not admitted. CheckInvariants() after
// every call.
#include <vector>

#include "engine/common/pending_token.h"
#include "engine/scheduler/scheduler.h"
#include "gtest/gtest.h"
#include "tests/engine/scheduler/scheduler_driver.h"

namespace onecard::engine {
namespace {

// Schedule, then what the engine does right after launching the plan:
// OnStepComputed and a pending token for each chunk wanting logits.
SchedulerOutput LaunchAhead(Scheduler& s, bool last = false) {
  SchedulerOutput plan = s.Schedule();
  s.OnStepComputed(plan);
  for (const ScheduledChunk& c : plan.chunks) {
    if (c.want_logits) s.AppendPendingToken(c.seq_id, last);
  }
  EXPECT_TRUE(s.CheckInvariants().ok()) << s.CheckInvariants();
  return plan;
}

TEST(SchedulerPendingTest, APendingTokenIsDecodedThenResolvedOldestFirst) {
  Scheduler s(Options(16));
  ASSERT_TRUE(s.Add(1, Prompt(3), 0).ok());
  SchedulerOutput p1 = LaunchAhead(s);  // the prompt; token 3 pending
  ASSERT_EQ(p1.chunks.size(), 1u);
  EXPECT_EQ(s.Find(1)->num_pending_tokens, 1);
  SchedulerOutput p2 = LaunchAhead(s);  // decodes the pending token 3; token 4 pending
  ASSERT_EQ(p2.chunks.size(), 1u);
  EXPECT_EQ(p2.chunks[0].start_pos, 3);
  EXPECT_EQ(p2.chunks[0].num_tokens, 1);
  EXPECT_TRUE(p2.chunks[0].want_logits);
  const Sequence& seq = *s.Find(1);
  EXPECT_EQ(seq.num_pending_tokens, 2);
  EXPECT_EQ(seq.token_ids, (std::vector<int32_t>{1, 2, 3, kPendingToken, kPendingToken}));
  s.ResolvePendingToken(1, 40);  // step 1's token
  EXPECT_EQ(seq.token_ids, (std::vector<int32_t>{1, 2, 3, 40, kPendingToken}));
  EXPECT_EQ(seq.num_resolved(), 4);
  ASSERT_TRUE(s.CheckInvariants().ok()) << s.CheckInvariants();
  s.ResolvePendingToken(1, 41);
  EXPECT_EQ(seq.token_ids, (std::vector<int32_t>{1, 2, 3, 40, 41}));
  EXPECT_EQ(seq.num_pending_tokens, 0);
  ASSERT_TRUE(s.CheckInvariants().ok()) << s.CheckInvariants();
}

TEST(SchedulerPendingTest, ABlockIsCachedOnlyOnceItsPendingTokenIsResolved) {
  Scheduler s(Options(16));
  ASSERT_TRUE(s.Add(1, Prompt(3), 0).ok());  // block 0 = {1, 2, 3, pending}
  LaunchAhead(s);
  LaunchAhead(s);  // position 3 computed, its token still pending
  EXPECT_EQ(s.block_manager().num_cached_blocks(), 0);
  s.ResolvePendingToken(1, 9);
  EXPECT_EQ(s.block_manager().num_cached_blocks(), 1);
  // A prompt starting with the resolved block hits it.
  ASSERT_TRUE(s.Add(2, {1, 2, 3, 9, 5}, 0).ok());
  SchedulerOutput p = s.Schedule();
  ASSERT_EQ(p.admitted, std::vector<int64_t>{2});
  EXPECT_EQ(s.Find(2)->num_cached_tokens, 4);
  ASSERT_TRUE(s.CheckInvariants().ok()) << s.CheckInvariants();
}

TEST(SchedulerPendingTest, ALastPendingTokenGetsNoFurtherChunk) {
  Scheduler s(Options(16));
  ASSERT_TRUE(s.Add(1, Prompt(3), 0).ok());
  ASSERT_TRUE(s.Add(2, Prompt(3, 10), 0).ok());
  SchedulerOutput p1 = s.Schedule();
  s.OnStepComputed(p1);
  s.AppendPendingToken(1, /*last=*/true);
  s.AppendPendingToken(2, /*last=*/false);
  ASSERT_TRUE(s.CheckInvariants().ok()) << s.CheckInvariants();
  SchedulerOutput p2 = s.Schedule();
  ASSERT_EQ(p2.chunks.size(), 1u);
  EXPECT_EQ(p2.chunks[0].seq_id, 2);
  EXPECT_EQ(s.num_running(), 2);  // 1 keeps its slot and blocks until it is removed
  s.ResolvePendingToken(1, 7);
  s.Remove(1);
  ASSERT_TRUE(s.CheckInvariants().ok()) << s.CheckInvariants();
}

TEST(SchedulerPendingTest, APreemptedSequenceWaitsForItsPendingTokenBeforeAdmission) {
  // Blocks of 4 tokens, three of them: 1 and 2 take one each for 4-token
  // prompts; their decodes need a block each, and only one is free.
  Scheduler s(Options(/*num_blocks=*/3));
  ASSERT_TRUE(s.Add(1, Prompt(4), 0).ok());
  ASSERT_TRUE(s.Add(2, Prompt(4, 20), 0).ok());
  LaunchAhead(s);
  SchedulerOutput p2 = s.Schedule();  // 1's decode takes the free block; 2 is preempted
  ASSERT_EQ(p2.chunks.size(), 1u);
  EXPECT_EQ(p2.chunks[0].seq_id, 1);
  EXPECT_EQ(p2.preempted, std::vector<int64_t>{2});
  ASSERT_TRUE(s.CheckInvariants().ok()) << s.CheckInvariants();
  const Sequence& two = *s.Find(2);
  EXPECT_EQ(two.status, SequenceStatus::kWaiting);
  EXPECT_EQ(two.num_pending_tokens, 1);
  s.OnStepComputed(p2);
  s.ResolvePendingToken(1, 50);
  s.Remove(1);  // room for 2 again
  SchedulerOutput p3 = s.Schedule();
  EXPECT_TRUE(p3.empty()) << "a sequence with a pending token must not be admitted";
  EXPECT_TRUE(p3.preempted.empty());
  ASSERT_TRUE(s.CheckInvariants().ok()) << s.CheckInvariants();
  s.ResolvePendingToken(2, 60);
  // Recomputed: its prompt's block is a prefix hit, the resolved token runs.
  SchedulerOutput p4 = s.Schedule();
  ASSERT_EQ(p4.chunks.size(), 1u);
  EXPECT_EQ(p4.chunks[0].seq_id, 2);
  EXPECT_EQ(p4.chunks[0].start_pos, 4);
  EXPECT_EQ(p4.chunks[0].num_tokens, 1);
  EXPECT_EQ(s.Find(2)->token_ids.back(), 60);
  ASSERT_TRUE(s.CheckInvariants().ok()) << s.CheckInvariants();
}

}  // namespace
}  // namespace onecard::engine
