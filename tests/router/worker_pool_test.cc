// Tests router/worker_pool.h with a FakeClock: least-loaded choice with the
// report correction, prefix-affinity ties, room and the KV watermark,
// unhealthy and draining workers, ejection with backoff and probing, workers
// leaving with calls in flight, and random operation sequences with
// invariant checks.
#include "router/worker_pool.h"

#include <map>
#include <random>

#include "engine/common/clock.h"
#include "gtest/gtest.h"

namespace onecard::router {
namespace {

WorkerDesc Worker(const std::string& id, int64_t capacity = 4) {
  WorkerDesc d;
  d.id = id;
  d.address = id + ":1";
  d.capacity = capacity;
  return d;
}

WorkerDesc WithLoad(WorkerDesc d, int64_t waiting, int64_t running, int64_t sequence) {
  WorkerLoad load;
  load.waiting = waiting;
  load.running = running;
  load.sequence = sequence;
  d.load = load;
  return d;
}

std::string PickId(WorkerPool& pool, uint64_t hash = 0,
                   const absl::flat_hash_set<std::string>& exclude = {}) {
  std::optional<WorkerPool::Picked> p = pool.Pick(hash, exclude);
  EXPECT_EQ(pool.CheckInvariants(), "");
  return p ? p->id : "";
}

TEST(WorkerPoolTest, PicksLeastLoadedByInFlight) {
  FakeClock clock;
  WorkerPool pool(WorkerPoolOptions{}, &clock);
  pool.SetWorkers({Worker("a"), Worker("b"), Worker("c")});
  std::map<std::string, int> count;
  for (int i = 0; i < 9; ++i) ++count[PickId(pool, i * 7919)];
  EXPECT_EQ(count["a"], 3);
  EXPECT_EQ(count["b"], 3);
  EXPECT_EQ(count["c"], 3);
}

TEST(WorkerPoolTest, ReportCorrectedByOwnInFlight) {
  FakeClock clock;
  WorkerPool pool(WorkerPoolOptions{}, &clock);
  // a reports 3 busy (someone else's), b reports nothing yet.
  pool.SetWorkers({WithLoad(Worker("a", 10), 1, 2, 1), Worker("b", 10)});
  EXPECT_EQ(PickId(pool), "b");
  EXPECT_EQ(PickId(pool), "b");
  EXPECT_EQ(PickId(pool), "b");         // b: 3 of ours vs a: 3 reported
  std::string first = PickId(pool, 0);  // a tie at 3: affinity decides
  std::string second = PickId(pool, 0);
  EXPECT_NE(first, second);  // then the other one is less loaded
  // A new report from a that counts our call in it resets the correction.
  pool.SetWorkers({WithLoad(Worker("a", 10), 0, 2, 2), Worker("b", 10)});
  std::vector<WorkerSnapshot> snap = pool.Snapshot();
  EXPECT_EQ(snap[0].estimated_load, 2);  // 2 reported; our 1 is inside it
  EXPECT_EQ(snap[1].estimated_load, 4);
  // The same report again (same sequence) changes nothing.
  pool.SetWorkers({WithLoad(Worker("a", 10), 0, 2, 2), Worker("b", 10)});
  EXPECT_EQ(pool.Snapshot()[0].estimated_load, 2);
}

TEST(WorkerPoolTest, AffinityBreaksTiesStablyAndSpreads) {
  FakeClock clock;
  WorkerPoolOptions options;
  WorkerPool pool(options, &clock);
  pool.SetWorkers({Worker("a", 100), Worker("b", 100), Worker("c", 100)});
  std::map<std::string, int> seen;
  for (uint64_t h = 0; h < 60; ++h) {
    std::string first = PickId(pool, h * 0x9E3779B97F4A7C15ULL);
    pool.Finish(first, CallOutcome::kSuccess);
    // With equal loads the same prefix lands on the same worker again.
    std::string second = PickId(pool, h * 0x9E3779B97F4A7C15ULL);
    pool.Finish(second, CallOutcome::kSuccess);
    EXPECT_EQ(first, second);
    ++seen[first];
  }
  EXPECT_EQ(seen.size(), 3u);  // different prefixes spread over the workers
  EXPECT_EQ(PrefixAffinityHash({1, 2, 3, 4}, 2), PrefixAffinityHash({1, 2, 9}, 2));
  EXPECT_NE(PrefixAffinityHash({1, 2, 3, 4}, 3), PrefixAffinityHash({1, 2, 9}, 3));
}

TEST(WorkerPoolTest, DispatchesOnlyIntoRoom) {
  FakeClock clock;
  WorkerPoolOptions options;
  options.kv_watermark = 0.9;
  WorkerPool pool(options, &clock);
  pool.SetWorkers({Worker("a", 2)});
  EXPECT_EQ(PickId(pool), "a");
  EXPECT_EQ(PickId(pool), "a");
  EXPECT_EQ(PickId(pool), "");  // full
  EXPECT_TRUE(pool.AnyUsable({}));
  pool.Finish("a", CallOutcome::kSuccess);
  EXPECT_EQ(PickId(pool), "a");
  // KV usage at the watermark: no room whatever the count says.
  WorkerDesc kv_full = WithLoad(Worker("b", 8), 0, 0, 1);
  kv_full.load->kv_blocks_used = 90;
  kv_full.load->kv_blocks_total = 100;
  pool.SetWorkers({Worker("a", 2), kv_full});
  EXPECT_EQ(PickId(pool), "");
}

TEST(WorkerPoolTest, SkipsUnhealthyDrainingAndExcluded) {
  FakeClock clock;
  WorkerPool pool(WorkerPoolOptions{}, &clock);
  WorkerDesc sick = Worker("a");
  sick.healthy = false;
  WorkerDesc draining = WithLoad(Worker("b"), 0, 0, 1);
  draining.load->draining = true;
  pool.SetWorkers({sick, draining, Worker("c")});
  EXPECT_EQ(PickId(pool), "c");
  EXPECT_EQ(PickId(pool, 0, {"c"}), "");
  EXPECT_FALSE(pool.AnyUsable({"c"}));
  EXPECT_TRUE(pool.AnyUsable({}));
}

TEST(WorkerPoolTest, EjectsAfterFailuresThenProbesBackIn) {
  FakeClock clock;
  WorkerPoolOptions options;
  options.eject_after_failures = 3;
  options.eject_base = absl::Seconds(1);
  options.eject_max = absl::Seconds(3);
  WorkerPool pool(options, &clock);
  pool.SetWorkers({Worker("a", 8)});
  for (int i = 0; i < 3; ++i) ASSERT_EQ(PickId(pool), "a");
  pool.Finish("a", CallOutcome::kFailure);
  pool.Finish("a", CallOutcome::kFailure);
  EXPECT_EQ(pool.CheckInvariants(), "");
  EXPECT_FALSE(pool.Snapshot()[0].ejected);
  pool.Finish("a", CallOutcome::kFailure);
  EXPECT_TRUE(pool.Snapshot()[0].ejected);
  EXPECT_EQ(PickId(pool), "");
  EXPECT_FALSE(pool.AnyUsable({}));
  EXPECT_EQ(pool.NextProbeTime(), clock.Now() + absl::Seconds(1));
  clock.Advance(absl::Seconds(1));
  // Probing: one call at a time. It fails: ejected again, for twice as long.
  ASSERT_EQ(PickId(pool), "a");
  EXPECT_EQ(PickId(pool), "");
  pool.Finish("a", CallOutcome::kFailure);
  EXPECT_EQ(pool.NextProbeTime(), clock.Now() + absl::Seconds(2));
  clock.Advance(absl::Seconds(2));
  ASSERT_EQ(PickId(pool), "a");
  pool.Finish("a", CallOutcome::kFailure);
  EXPECT_EQ(pool.NextProbeTime(), clock.Now() + absl::Seconds(3));  // capped at eject_max
  clock.Advance(absl::Seconds(3));
  // The probe succeeds: back in, full capacity, backoff reset.
  ASSERT_EQ(PickId(pool), "a");
  pool.Finish("a", CallOutcome::kSuccess);
  for (int i = 0; i < 8; ++i) ASSERT_EQ(PickId(pool), "a") << i;
  for (int i = 0; i < 8; ++i) pool.Finish("a", CallOutcome::kFailure);
  EXPECT_EQ(pool.NextProbeTime(), clock.Now() + absl::Seconds(1));
}

TEST(WorkerPoolTest, SuccessResetsTheFailureCountAndNeutralIsNeutral) {
  FakeClock clock;
  WorkerPool pool(WorkerPoolOptions{}, &clock);
  pool.SetWorkers({Worker("a", 8)});
  for (int round = 0; round < 5; ++round) {
    for (int i = 0; i < 4; ++i) ASSERT_EQ(PickId(pool), "a");
    pool.Finish("a", CallOutcome::kFailure);
    pool.Finish("a", CallOutcome::kFailure);
    pool.Finish("a", CallOutcome::kNeutral);
    pool.Finish("a", CallOutcome::kSuccess);
  }
  EXPECT_FALSE(pool.Snapshot()[0].ejected);
}

TEST(WorkerPoolTest, DepartedWorkerKeepsCountUntilItsCallsEnd) {
  FakeClock clock;
  WorkerPool pool(WorkerPoolOptions{}, &clock);
  pool.SetWorkers({Worker("a", 2), Worker("b", 2)});
  ASSERT_EQ(PickId(pool, 1, {"b"}), "a");
  pool.SetWorkers({Worker("b", 2)});
  EXPECT_EQ(PickId(pool, 0, {"b"}), "");              // a left: not pickable
  pool.SetWorkers({Worker("a", 2), Worker("b", 2)});  // a is back
  EXPECT_EQ(pool.in_flight("a"), 1);
  pool.SetWorkers({Worker("b", 2)});
  pool.Finish("a", CallOutcome::kSuccess);  // its last call: now it is gone
  EXPECT_EQ(pool.Snapshot().size(), 1u);
  EXPECT_EQ(pool.CheckInvariants(), "");
  pool.Finish("a", CallOutcome::kSuccess);  // unknown now: ignored
}

// Random picks, finishes, table changes and time steps: invariants hold, no
// worker gets more than its capacity from a pick, and every pick is a worker
// that was eligible.
TEST(WorkerPoolTest, RandomOperationsKeepInvariants) {
  std::mt19937 rng(99);
  FakeClock clock;
  WorkerPoolOptions options;
  options.eject_base = absl::Milliseconds(300);
  WorkerPool pool(options, &clock);
  const std::vector<std::string> ids = {"w0", "w1", "w2", "w3"};
  std::vector<std::string> calls;  // worker of each open call
  int64_t sequence = 0;
  for (int step = 0; step < 30000; ++step) {
    int op = rng() % 10;
    if (op < 4) {
      absl::flat_hash_set<std::string> exclude;
      if (rng() % 5 == 0) exclude.insert(ids[rng() % ids.size()]);
      std::optional<WorkerPool::Picked> p = pool.Pick(rng(), exclude);
      if (p) {
        ASSERT_FALSE(exclude.contains(p->id));
        ASSERT_EQ(p->address, p->id + ":1");
        calls.push_back(p->id);
        for (const WorkerSnapshot& w : pool.Snapshot()) {
          if (w.id == p->id) ASSERT_FALSE(w.ejected && w.in_flight > 0 && !w.probing);
        }
      }
    } else if (op < 7 && !calls.empty()) {
      size_t i = rng() % calls.size();
      pool.Finish(calls[i], static_cast<CallOutcome>(rng() % 3));
      calls.erase(calls.begin() + i);
    } else if (op == 7) {
      std::vector<WorkerDesc> table;
      for (const std::string& id : ids) {
        if (rng() % 6 == 0) continue;  // this one left the table
        WorkerDesc d = Worker(id, 1 + rng() % 4);
        d.healthy = rng() % 8 != 0;
        if (rng() % 2) d = WithLoad(d, rng() % 3, rng() % 3, ++sequence);
        table.push_back(d);
      }
      pool.SetWorkers(table);
    } else {
      clock.Advance(absl::Milliseconds(rng() % 200));
    }
    ASSERT_EQ(pool.CheckInvariants(), "") << step;
    int64_t open = 0;
    for (const WorkerSnapshot& w : pool.Snapshot()) open += w.in_flight;
    ASSERT_EQ(open, static_cast<int64_t>(calls.size())) << step;
  }
}

}  // namespace
}  // namespace onecard::router
