// Randomized operation sequences through the simulated engine
// (scheduler_driver.h): adds, removals, aging on a fake clock, swap and
// recompute, FIFO in some runs; CheckInvariants() after every call and every
// step's plan checked against the documented order.
#include <map>
#include <random>
#include <set>
#include <vector>

#include "engine/scheduler/scheduler.h"
#include "gtest/gtest.h"
#include "tests/engine/scheduler/scheduler_driver.h"

namespace onecard::engine {
namespace {

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
