// Tests of Scheduler: hand-built steps (chunked prefill, phase order, limits,
// preemption by blocks and by priority, prefix hits) and randomized operation
// sequences driven through a simulated engine whose KV pool records the token
// written at each slot: every chunk must read back its whole context through
// its block table. CheckInvariants() runs after every call.
#include "engine/scheduler/scheduler.h"

#include <map>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "gtest/gtest.h"

namespace onecard::engine {
namespace {

constexpr int32_t kBs = 4;

SchedulerOptions Options(int32_t num_blocks, int32_t budget = 64, int32_t max_seqs = 8,
                         bool caching = true) {
  return {
      .max_num_seqs = max_seqs,
      .max_batched_tokens = budget,
      .max_context = 1 << 20,
      .blocks = {.num_blocks = num_blocks, .block_size = kBs, .enable_prefix_caching = caching}};
}

std::vector<int32_t> Prompt(int32_t n, int32_t first = 1) {
  std::vector<int32_t> v(n);
  std::iota(v.begin(), v.end(), first);
  return v;
}

// The next token a sequence gets in these tests: a function of its context.
int32_t NextToken(const std::vector<int32_t>& tokens) {
  uint64_t h = 1469598103934665603ull;
  for (int32_t t : tokens) h = (h ^ static_cast<uint32_t>(t)) * 1099511628211ull;
  return static_cast<int32_t>(h % 50);
}

#define ASSERT_INVARIANTS(s) ASSERT_TRUE((s).CheckInvariants().ok()) << (s).CheckInvariants()

// A simulated engine step: checks the plan, "computes" it against a KV pool
// of token ids, appends tokens, and removes sequences that reached their
// target length.
class Driver {
 public:
  explicit Driver(const SchedulerOptions& options)
      : options_(options),
        scheduler_(options),
        pool_(static_cast<size_t>(options.blocks.num_blocks) * kBs, -1) {}

  Scheduler& scheduler() { return scheduler_; }
  void Add(int64_t id, std::vector<int32_t> prompt, int32_t priority, int32_t target_len) {
    ASSERT_TRUE(scheduler_.Add(id, std::move(prompt), priority).ok());
    targets_[id] = target_len;
  }
  // Runs one step; returns the plan.
  SchedulerOutput Step() {
    SchedulerOutput out = scheduler_.Schedule();
    EXPECT_TRUE(scheduler_.CheckInvariants().ok()) << scheduler_.CheckInvariants();
    CheckPlan(out);
    for (const ScheduledChunk& c : out.chunks) Compute(c);
    scheduler_.OnStepComputed(out);
    EXPECT_TRUE(scheduler_.CheckInvariants().ok()) << scheduler_.CheckInvariants();
    for (const ScheduledChunk& c : out.chunks) {
      if (!c.want_logits) continue;
      const Sequence* seq = scheduler_.Find(c.seq_id);
      if (seq->num_tokens() >= targets_.at(c.seq_id)) {
        finished_[c.seq_id] = seq->token_ids;
        scheduler_.Remove(c.seq_id);
      } else {
        scheduler_.AppendToken(c.seq_id, NextToken(seq->token_ids));
      }
    }
    EXPECT_TRUE(scheduler_.CheckInvariants().ok()) << scheduler_.CheckInvariants();
    return out;
  }
  const std::map<int64_t, std::vector<int32_t>>& finished() const { return finished_; }

 private:
  void CheckPlan(const SchedulerOutput& out) {
    EXPECT_LE(out.num_batched_tokens, options_.max_batched_tokens);
    EXPECT_LE(static_cast<int32_t>(out.chunks.size()), options_.max_num_seqs);
    std::set<int64_t> seen;
    int32_t total = 0;
    for (const ScheduledChunk& c : out.chunks) {
      EXPECT_TRUE(seen.insert(c.seq_id).second) << "two chunks for seq " << c.seq_id;
      const Sequence* seq = scheduler_.Find(c.seq_id);
      ASSERT_NE(seq, nullptr);
      EXPECT_EQ(seq->status, SequenceStatus::kRunning);
      EXPECT_EQ(c.start_pos, seq->num_computed_tokens);
      EXPECT_GT(c.num_tokens, 0);
      EXPECT_EQ(c.want_logits, c.start_pos + c.num_tokens == seq->num_tokens());
      total += c.num_tokens;
    }
    EXPECT_EQ(total, out.num_batched_tokens);
  }
  // Writes the chunk's tokens into its slots, then reads the whole context.
  void Compute(const ScheduledChunk& c) {
    const Sequence* seq = scheduler_.Find(c.seq_id);
    const int32_t end = c.start_pos + c.num_tokens;
    std::span<const int32_t> table = scheduler_.BlockTable(c.seq_id, end);
    ASSERT_EQ(static_cast<int32_t>(table.size()), (end + kBs - 1) / kBs);
    for (int32_t p = c.start_pos; p < end; ++p) {
      pool_[static_cast<size_t>(table[p / kBs]) * kBs + p % kBs] = seq->token_ids[p];
    }
    for (int32_t p = 0; p < end; ++p) {
      ASSERT_EQ(pool_[static_cast<size_t>(table[p / kBs]) * kBs + p % kBs], seq->token_ids[p])
          << "seq " << c.seq_id << " reads a wrong KV slot at position " << p;
    }
  }

  SchedulerOptions options_;
  Scheduler scheduler_;
  std::vector<int32_t> pool_;  // [num_blocks * block_size]
  std::map<int64_t, int32_t> targets_;
  std::map<int64_t, std::vector<int32_t>> finished_;
};

// The tokens a sequence ends with when run alone (no batching, no preemption).
std::vector<int32_t> RunAlone(std::vector<int32_t> prompt, int32_t target_len) {
  while (static_cast<int32_t>(prompt.size()) < target_len) prompt.push_back(NextToken(prompt));
  return prompt;
}

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

TEST(SchedulerTest, DecodesThenPartialPrefillsThenWaitingByPriorityThenArrival) {
  Driver d(Options(64, /*budget=*/8));
  d.Add(1, Prompt(2), 0, 100);   // decodes after step 1
  d.Add(2, Prompt(20), 0, 100);  // a long prompt: partial prefill
  d.Step();                      // 1: prompt 2 tokens; 2: 6 of 20
  d.Add(3, Prompt(3, 40), 0, 100);
  d.Add(4, Prompt(3, 50), 5, 100);  // later, but higher priority
  SchedulerOutput s = d.Step();
  ASSERT_EQ(s.chunks.size(), 2u);
  EXPECT_EQ(s.chunks[0].seq_id, 1);  // decode first
  EXPECT_EQ(s.chunks[0].num_tokens, 1);
  EXPECT_EQ(s.chunks[1].seq_id, 2);  // then the partial prefill takes the rest
  EXPECT_EQ(s.chunks[1].num_tokens, 7);
  s = d.Step();  // decode 1, then 2's last 7 tokens: budget full
  ASSERT_EQ(s.chunks.size(), 2u);
  EXPECT_EQ(s.chunks[1].num_tokens, 7);
  EXPECT_TRUE(s.chunks[1].want_logits);
  s = d.Step();  // two decodes, then 4 (priority 5) before 3 (earlier)
  ASSERT_EQ(s.chunks.size(), 4u);
  EXPECT_EQ(s.chunks[2].seq_id, 4);
  EXPECT_EQ(s.chunks[3].seq_id, 3);
  EXPECT_EQ(s.chunks[3].num_tokens, 3);
  EXPECT_EQ(s.admitted, (std::vector<int64_t>{4, 3}));
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

TEST(SchedulerTest, OutOfBlocksPreemptsLowestPriorityLatestArrivalByRecompute) {
  // 6 blocks of 4: three sequences of 7 prompt tokens take 2 blocks each;
  // the first decode past 8 tokens needs a seventh block.
  Driver d(Options(6, /*budget=*/64));
  d.Add(1, Prompt(7, 10), 0, 12);
  d.Add(2, Prompt(7, 20), 1, 12);  // highest priority
  d.Add(3, Prompt(7, 30), 0, 12);  // lowest priority, latest arrival: the victim
  d.Step();                        // prefill all three
  SchedulerOutput s = d.Step();    // decode position 7: still inside block 2
  EXPECT_TRUE(s.preempted.empty());
  s = d.Step();  // position 8 needs a third block each: 3 is preempted
  EXPECT_EQ(s.preempted, std::vector<int64_t>{3});
  EXPECT_EQ(d.scheduler().num_preemptions(), 1);
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
  d.Add(2, Prompt(3), 0, 20);
  d.Step();
  EXPECT_EQ(d.scheduler().block_manager().num_used_blocks(), 3);
  d.scheduler().Remove(2);  // waiting
  d.scheduler().Remove(1);  // running, mid-prefill
  ASSERT_INVARIANTS(d.scheduler());
  EXPECT_EQ(d.scheduler().block_manager().num_used_blocks(), 0);
  EXPECT_EQ(d.scheduler().num_running() + d.scheduler().num_waiting(), 0);
  EXPECT_TRUE(d.scheduler().Schedule().empty());
}

// A random prompt: a shared stem of 0-2 blocks, then 1-6 random tokens.
std::vector<int32_t> RandomPrompt(std::mt19937_64& rng) {
  auto uniform = [&](int32_t lo, int32_t hi) {
    return std::uniform_int_distribution<int32_t>(lo, hi)(rng);
  };
  std::vector<int32_t> prompt = Prompt(uniform(0, 2) * kBs, uniform(0, 2) * 100);
  for (int32_t i = uniform(1, 6); i > 0; --i) prompt.push_back(uniform(0, 9));
  return prompt;
}

// Random arrivals, priorities, prompt lengths with shared stems, removals,
// and tiny pools: every sequence that finishes must equal its solo run.
TEST(SchedulerTest, RandomOperationSequences) {
  int64_t preemptions = 0;
  for (uint64_t seed = 0; seed < 30; ++seed) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    std::mt19937_64 rng(seed);
    auto uniform = [&](int32_t lo, int32_t hi) {
      return std::uniform_int_distribution<int32_t>(lo, hi)(rng);
    };
    const int32_t num_blocks = uniform(6, 24);
    Driver d(Options(num_blocks, uniform(1, 16), uniform(1, 6), seed % 3 != 0));
    std::map<int64_t, std::pair<std::vector<int32_t>, int32_t>> submitted;  // prompt, target
    std::vector<int64_t> live;
    std::set<int64_t> removed;
    for (int step = 0; step < 2300 && (step < 300 || !live.empty()); ++step) {
      if (step < 300 && uniform(0, 2) == 0) {
        std::vector<int32_t> prompt = RandomPrompt(rng);
        const int32_t target = std::min<int32_t>(num_blocks * kBs, prompt.size() + uniform(1, 12));
        submitted[step] = {prompt, target};
        d.Add(step, prompt, uniform(0, 2), target);
      }
      live.clear();
      for (const auto& [id, unused] : submitted) {
        if (!removed.contains(id) && !d.finished().contains(id)) live.push_back(id);
      }
      if (step < 300 && uniform(0, 9) == 0 && !live.empty()) {
        const int64_t id = live[uniform(0, static_cast<int32_t>(live.size()) - 1)];
        d.scheduler().Remove(id);
        removed.insert(id);
        ASSERT_INVARIANTS(d.scheduler());
      }
      d.Step();
      if (HasFailure()) return;
    }
    EXPECT_EQ(d.scheduler().num_running() + d.scheduler().num_waiting(), 0);
    for (const auto& [id, tokens] : d.finished()) {
      EXPECT_FALSE(removed.contains(id));
      EXPECT_EQ(tokens, RunAlone(submitted.at(id).first, submitted.at(id).second)) << id;
    }
    EXPECT_EQ(d.finished().size() + removed.size(), submitted.size());
    preemptions += d.scheduler().num_preemptions();
  }
  EXPECT_GT(preemptions, 0) << "the random runs never exercised preemption";
}

}  // namespace
}  // namespace onecard::engine
