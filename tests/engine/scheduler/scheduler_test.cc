// Tests of Scheduler: hand-built steps (chunked prefill, phase order, the
// prefill order by effective priority and remaining cost, no overtaking,
// limits, preemption by blocks and by priority, by swap or by recompute,
// aging on a fake clock and its bound, prefix hits, arrival order under
// options.fifo) and randomized operation
// sequences driven through a simulated engine whose KV pool and swap space
// record the token written at each slot (swaps copy them, in the contract's
// order): every chunk must read back its whole context through its block
// table.
// CheckInvariants() runs after every call, and every step's plan is checked
// against the documented order (Driver::CheckOrder).
#include "engine/scheduler/scheduler.h"

#include <map>
#include <numeric>
#include <optional>
#include <random>
#include <set>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"

namespace onecard::engine {
namespace {

constexpr int32_t kBs = 4;
constexpr absl::Duration kAging = absl::Seconds(10);

// The aging clock of tests that do not move time: it never advances.
FakeClock* StillClock() {
  static FakeClock* clock = new FakeClock();
  return clock;
}

SchedulerOptions Options(int32_t num_blocks, int32_t budget = 64, int32_t max_seqs = 8,
                         bool caching = true) {
  return {.max_num_seqs = max_seqs,
          .max_batched_tokens = budget,
          .max_context = 1 << 20,
          .blocks = {.num_blocks = num_blocks, .block_size = kBs, .enable_prefix_caching = caching},
          .aging_interval = kAging,
          .clock = StillClock()};
}

// Options whose aging clock is `clock`.
SchedulerOptions AgingOptions(FakeClock* clock, int32_t num_blocks, int32_t budget,
                              absl::Duration aging = kAging) {
  SchedulerOptions options = Options(num_blocks, budget);
  options.aging_interval = aging;
  options.clock = clock;
  return options;
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
        pool_(static_cast<size_t>(options.blocks.num_blocks) * kBs, -1),
        host_pool_(static_cast<size_t>(options.num_swap_blocks) * kBs, -1) {}

  Scheduler& scheduler() { return scheduler_; }
  void Add(int64_t id, std::vector<int32_t> prompt, int32_t priority, int32_t target_len) {
    ASSERT_TRUE(scheduler_.Add(id, std::move(prompt), priority).ok());
    targets_[id] = target_len;
  }
  // Runs one step; returns the plan.
  SchedulerOutput Step() {
    const std::map<int64_t, Before> before = WaitingNow();
    SchedulerOutput out = scheduler_.Schedule();
    EXPECT_TRUE(scheduler_.CheckInvariants().ok()) << scheduler_.CheckInvariants();
    CheckPlan(out);
    CheckSwaps(out);
    CheckOrder(before, out);
    Swap(out);
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
  // Every live sequence: whether it waits (swapped or not), and its
  // uncomputed tokens.
  struct Before {
    bool waiting = false;
    int32_t uncomputed = 0;
  };
  std::map<int64_t, Before> WaitingNow() const {
    std::map<int64_t, Before> before;
    for (const auto& [id, target] : targets_) {
      const Sequence* seq = scheduler_.Find(id);
      if (seq != nullptr) {
        before[id] = {seq->status != SequenceStatus::kRunning, seq->num_uncomputed()};
      }
    }
    return before;
  }
  // The swap lists: independent copies (no host block twice in swap_out, no
  // device block twice in swap_in), swapped_out among the preempted, each
  // swapped-out sequence holding its computed tokens' blocks.
  void CheckSwaps(const SchedulerOutput& out) {
    std::set<int32_t> hosts, devices;
    for (const KvBlockCopy& c : out.swap_out) {
      EXPECT_TRUE(hosts.insert(c.host_block).second) << "host block " << c.host_block;
      EXPECT_LT(c.host_block, options_.num_swap_blocks);
    }
    for (const KvBlockCopy& c : out.swap_in) {
      EXPECT_TRUE(devices.insert(c.device_block).second) << "device block " << c.device_block;
    }
    const std::set<int64_t> preempted(out.preempted.begin(), out.preempted.end());
    int32_t blocks_out = 0;
    for (int64_t id : out.swapped_out) {
      EXPECT_TRUE(preempted.contains(id)) << id;
      const Sequence& seq = *scheduler_.Find(id);
      if (seq.status == SequenceStatus::kSwapped) EXPECT_GT(seq.num_computed_tokens, 0) << id;
      blocks_out += (seq.num_computed_tokens + kBs - 1) / kBs;
    }
    if (out.swapped_in.empty()) EXPECT_EQ(blocks_out, static_cast<int32_t>(out.swap_out.size()));
    if (options_.num_swap_blocks == 0) {
      EXPECT_TRUE(out.swap_out.empty() && out.swap_in.empty());
    }
  }
  // The swaps in the contract's order: every swap_out copy, then every
  // swap_in copy. Without prefix caching no freed block is read again unless
  // written first, so the blocks swapped out are poisoned in between.
  void Swap(const SchedulerOutput& out) {
    auto device = [&](int32_t block) { return pool_.begin() + static_cast<size_t>(block) * kBs; };
    auto host = [&](int32_t block) {
      return host_pool_.begin() + static_cast<size_t>(block) * kBs;
    };
    for (const KvBlockCopy& c : out.swap_out) {
      std::copy(device(c.device_block), device(c.device_block) + kBs, host(c.host_block));
    }
    if (!options_.blocks.enable_prefix_caching) {
      for (const KvBlockCopy& c : out.swap_out) std::fill_n(device(c.device_block), kBs, -7);
    }
    for (const KvBlockCopy& c : out.swap_in) {
      std::copy(host(c.host_block), host(c.host_block) + kBs, device(c.device_block));
    }
  }
  // The keys of the contract, as of this step, written from Sequence fields.
  using Key = std::tuple<int64_t, int32_t, int64_t, int64_t>;
  Key PrefillKey(const Sequence& seq, int32_t uncomputed) const {
    return {-scheduler_.EffectivePriority(seq), options_.fifo ? 0 : uncomputed, seq.arrival,
            seq.id};
  }
  std::tuple<int64_t, int64_t, int64_t> RankKey(const Sequence& seq) const {
    return {-scheduler_.EffectivePriority(seq), seq.arrival, seq.id};
  }
  // The documented order: decodes before every prefill chunk; prefill chunks
  // in prefill order; no waiting sequence left waiting ranks before one
  // admitted (no overtaking); every preempted sequence ranks below each
  // running one left without a chunk.
  void CheckOrder(const std::map<int64_t, Before>& before, const SchedulerOutput& out) {
    const std::set<int64_t> preempted(out.preempted.begin(), out.preempted.end());
    const std::set<int64_t> swapped(out.swapped_out.begin(), out.swapped_out.end());
    // Waiting when the prefills were planned: before the step, or preempted.
    auto was_waiting = [&](int64_t id) { return before.at(id).waiting || preempted.contains(id); };
    // Its uncomputed tokens then: a recompute's victim has none computed.
    auto waiting_cost = [&](int64_t id) {
      const bool recomputed = preempted.contains(id) && !swapped.contains(id);
      return recomputed ? scheduler_.Find(id)->num_tokens() : before.at(id).uncomputed;
    };
    std::set<int64_t> chunked;
    std::vector<Key> admitted;
    std::optional<Key> last_prefill;
    for (const ScheduledChunk& c : out.chunks) {
      chunked.insert(c.seq_id);
      const Sequence& seq = *scheduler_.Find(c.seq_id);
      const bool decode = !was_waiting(c.seq_id) && seq.num_uncomputed() == 1;
      if (decode) {
        EXPECT_FALSE(last_prefill.has_value()) << "decode of " << c.seq_id << " after a prefill";
        continue;
      }
      const Key key =
          PrefillKey(seq, was_waiting(c.seq_id) ? waiting_cost(c.seq_id) : seq.num_uncomputed());
      if (last_prefill.has_value()) {
        EXPECT_LT(*last_prefill, key) << "prefill of " << c.seq_id << " out of prefill order";
      }
      last_prefill = key;
      if (was_waiting(c.seq_id)) admitted.push_back(key);
    }
    for (const auto& [id, unused] : before) {
      const Sequence& seq = *scheduler_.Find(id);
      if (seq.status != SequenceStatus::kRunning) {
        for (const Key& a : admitted) EXPECT_LT(a, PrefillKey(seq, seq.num_uncomputed())) << id;
      } else if (!chunked.contains(id)) {
        for (int64_t victim : preempted) {
          EXPECT_LT(RankKey(seq), RankKey(*scheduler_.Find(victim))) << victim << " over " << id;
        }
      }
    }
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
  std::vector<int32_t> pool_;       // [num_blocks * block_size]
  std::vector<int32_t> host_pool_;  // [num_swap_blocks * block_size]
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
// tiny pools, swap spaces (none, or 1 to 12 host blocks) and aging on a fake
// clock (off, or intervals of 1 to 5 s with 0 to 2 s a step): every sequence
// that finishes must equal its solo run, and every plan follows the
// documented order (Driver::CheckOrder) and swap ordering (Driver::Swap).
TEST(SchedulerTest, RandomOperationSequences) {
  int64_t preemptions = 0;
  int64_t swap_preemptions = 0;
  int64_t swapped_in_blocks = 0;
  int64_t aged = 0;  // checks of a sequence whose effective priority had risen
  for (uint64_t seed = 0; seed < 30; ++seed) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    std::mt19937_64 rng(seed);
    auto uniform = [&](int32_t lo, int32_t hi) {
      return std::uniform_int_distribution<int32_t>(lo, hi)(rng);
    };
    const int32_t num_blocks = uniform(6, 24);
    FakeClock clock;
    SchedulerOptions options = Options(num_blocks, uniform(1, 16), uniform(1, 6), seed % 3 != 0);
    options.fifo = seed % 5 == 4;
    options.aging_interval = absl::Seconds(seed % 4 == 0 ? 0 : uniform(1, 5));
    options.clock = &clock;
    options.num_swap_blocks = seed % 5 == 1 ? 0 : uniform(1, 12);
    Driver d(options);
    // The aging epoch of a time, from the contract (the clock starts at the
    // scheduler's construction).
    const absl::Time origin = clock.Now();
    auto epoch = [&](absl::Time t) {
      absl::Duration unused;
      return options.aging_interval == absl::ZeroDuration()
                 ? 0
                 : absl::IDivDuration(t - origin, options.aging_interval, &unused);
    };
    std::map<int64_t, std::pair<int32_t, absl::Time>> added;                // priority, time of Add
    std::map<int64_t, std::pair<std::vector<int32_t>, int32_t>> submitted;  // prompt, target
    std::vector<int64_t> live;
    std::set<int64_t> removed;
    for (int step = 0; step < 2300 && (step < 300 || !live.empty()); ++step) {
      if (step < 300 && uniform(0, 2) == 0) {
        std::vector<int32_t> prompt = RandomPrompt(rng);
        const int32_t target = std::min<int32_t>(num_blocks * kBs, prompt.size() + uniform(1, 12));
        submitted[step] = {prompt, target};
        added[step] = {uniform(0, 2), clock.Now()};
        d.Add(step, prompt, added[step].first, target);
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
      for (int64_t id : live) {
        const Sequence* seq = d.scheduler().Find(id);
        if (seq == nullptr) continue;
        const auto& [priority, time] = added.at(id);
        const int64_t expected = options.fifo ? 0 : priority + epoch(clock.Now()) - epoch(time);
        ASSERT_EQ(d.scheduler().EffectivePriority(*seq), expected) << id;
        aged += !options.fifo && expected != priority;
      }
      clock.Advance(absl::Seconds(uniform(0, 2)));
    }
    EXPECT_EQ(d.scheduler().num_running() + d.scheduler().num_waiting(), 0);
    for (const auto& [id, tokens] : d.finished()) {
      EXPECT_FALSE(removed.contains(id));
      EXPECT_EQ(tokens, RunAlone(submitted.at(id).first, submitted.at(id).second)) << id;
    }
    EXPECT_EQ(d.finished().size() + removed.size(), submitted.size());
    const SchedulerStats stats = d.scheduler().Stats();
    preemptions += stats.num_preemptions;
    swap_preemptions += stats.num_swap_preemptions;
    swapped_in_blocks += stats.num_swapped_in_blocks;
    EXPECT_EQ(stats.swap_blocks_used, 0);
    EXPECT_EQ(stats.num_swapped, 0);
  }
  EXPECT_GT(preemptions, swap_preemptions) << "the random runs never recomputed";
  EXPECT_GT(swap_preemptions, 0) << "the random runs never swapped";
  EXPECT_GT(swapped_in_blocks, 0) << "the random runs never copied a block back";
  EXPECT_GT(aged, 0) << "the random runs never exercised aging";
}

}  // namespace
}  // namespace onecard::engine
