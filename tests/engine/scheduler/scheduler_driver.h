// The scheduler tests' simulated engine (Driver: each step's plan checked
// against the documented order, "computed" against a KV pool of token ids,
// tokens appended) and their options and prompts. Shared by scheduler_test.cc
// and scheduler_random_test.cc.
#ifndef ONECARD_TESTS_ENGINE_SCHEDULER_SCHEDULER_DRIVER_H_
#define ONECARD_TESTS_ENGINE_SCHEDULER_SCHEDULER_DRIVER_H_

#include <algorithm>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <span>
#include <tuple>
#include <vector>

#include "absl/time/time.h"
#include "engine/common/clock.h"
#include "engine/scheduler/scheduler.h"
#include "gtest/gtest.h"

namespace onecard::engine {

inline constexpr int32_t kBs = 4;
inline constexpr absl::Duration kAging = absl::Seconds(10);

// The aging clock of tests that do not move time: it never advances.
inline FakeClock* StillClock() {
  static FakeClock* clock = new FakeClock();
  return clock;
}

inline SchedulerOptions Options(int32_t num_blocks, int32_t budget = 64, int32_t max_seqs = 8,
                                bool caching = true) {
  return {.max_num_seqs = max_seqs,
          .max_batched_tokens = budget,
          .max_context = 1 << 20,
          .blocks = {.num_blocks = num_blocks, .block_size = kBs, .enable_prefix_caching = caching},
          .aging_interval = kAging,
          .clock = StillClock()};
}

// Options whose aging clock is `clock`.
inline SchedulerOptions AgingOptions(FakeClock* clock, int32_t num_blocks, int32_t budget,
                                     absl::Duration aging = kAging) {
  SchedulerOptions options = Options(num_blocks, budget);
  options.aging_interval = aging;
  options.clock = clock;
  return options;
}

inline std::vector<int32_t> Prompt(int32_t n, int32_t first = 1) {
  std::vector<int32_t> v(n);
  std::iota(v.begin(), v.end(), first);
  return v;
}

// The next token a sequence gets in these tests: a function of its context.
inline int32_t NextToken(const std::vector<int32_t>& tokens) {
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
inline std::vector<int32_t> RunAlone(std::vector<int32_t> prompt, int32_t target_len) {
  while (static_cast<int32_t>(prompt.size()) < target_len) prompt.push_back(NextToken(prompt));
  return prompt;
}

}  // namespace onecard::engine

#endif  // ONECARD_TESTS_ENGINE_SCHEDULER_SCHEDULER_DRIVER_H_
