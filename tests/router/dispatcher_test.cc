// Tests router/dispatcher.h with a FakeClock: dispatch into room, priority
// order when room frees, queue timeout and deadline, cancel while queued,
// refusals (queue full, no healthy worker), retries that avoid the failed
// worker, a worker table that empties under a queue, the aging bound with a
// simulated worker under a continuous stream of interactive requests, and
// random sequences where every request ends exactly once.
#include "router/dispatcher.h"

#include <map>
#include <random>

#include "engine/common/clock.h"
#include "gtest/gtest.h"

namespace onecard::router {
namespace {

WorkerDesc Worker(const std::string& id, int64_t capacity) {
  WorkerDesc d;
  d.id = id;
  d.address = "addr-" + id;
  d.capacity = capacity;
  return d;
}

// Records every callback by request id.
struct Outcomes {
  std::map<uint64_t, absl::StatusOr<Assignment>> by_id;
  std::vector<uint64_t> order;  // ids in the order they were dispatched
  DispatchRequest Make(uint64_t id, PriorityClass priority, int64_t cost = 10) {
    DispatchRequest r;
    r.id = id;
    r.priority = priority;
    r.cost_tokens = cost;
    r.on_done = [this, id](absl::StatusOr<Assignment> a) {
      EXPECT_FALSE(by_id.contains(id)) << "request " << id << " ended twice";
      if (a.ok()) order.push_back(id);
      by_id.insert_or_assign(id, std::move(a));
    };
    return r;
  }
};

TEST(DispatcherTest, DispatchesIntoRoomThenByPriority) {
  FakeClock clock;
  Dispatcher d(QueueOptions{}, WorkerPoolOptions{}, &clock);
  d.SetWorkers({Worker("a", 1)});
  Outcomes out;
  ASSERT_TRUE(d.Submit(out.Make(1, PriorityClass::kBatch)).ok());
  ASSERT_TRUE(out.by_id.at(1).ok());
  EXPECT_EQ(out.by_id.at(1)->address, "addr-a");
  ASSERT_TRUE(d.Submit(out.Make(2, PriorityClass::kBatch)).ok());
  ASSERT_TRUE(d.Submit(out.Make(3, PriorityClass::kStandard, 500)).ok());
  ASSERT_TRUE(d.Submit(out.Make(4, PriorityClass::kStandard, 20)).ok());
  ASSERT_TRUE(d.Submit(out.Make(5, PriorityClass::kInteractive)).ok());
  EXPECT_EQ(out.by_id.size(), 1u);  // no room: the rest wait in the router
  EXPECT_EQ(d.QueueDepths(), (std::array<int64_t, 3>{1, 2, 1}));
  for (int i = 0; i < 4; ++i) {
    clock.Advance(absl::Milliseconds(10));
    d.Finish("a", CallOutcome::kSuccess);
    ASSERT_EQ(d.CheckInvariants(), "");
  }
  EXPECT_EQ(out.order, (std::vector<uint64_t>{1, 5, 4, 3, 2}));
  EXPECT_EQ(out.by_id.at(2)->queue_wait, absl::Milliseconds(40));
}

TEST(DispatcherTest, QueueTimeoutAndDeadlineEndQueuedRequests) {
  FakeClock clock;
  QueueOptions q;
  q.queue_timeout = absl::Seconds(5);
  Dispatcher d(q, WorkerPoolOptions{}, &clock);
  d.SetWorkers({Worker("a", 1)});
  Outcomes out;
  ASSERT_TRUE(d.Submit(out.Make(1, PriorityClass::kStandard)).ok());  // running
  ASSERT_TRUE(d.Submit(out.Make(2, PriorityClass::kStandard)).ok());
  DispatchRequest with_deadline = out.Make(3, PriorityClass::kStandard);
  with_deadline.deadline = clock.Now() + absl::Seconds(1);
  ASSERT_TRUE(d.Submit(std::move(with_deadline)).ok());
  EXPECT_EQ(d.NextWakeTime(), clock.Now() + absl::Seconds(1));
  clock.Advance(absl::Seconds(1));
  d.Tick();
  ASSERT_TRUE(out.by_id.contains(3));
  EXPECT_EQ(out.by_id.at(3).status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(out.by_id.at(3).status().message().find("deadline"), std::string::npos);
  clock.Advance(absl::Seconds(4));
  d.Tick();
  EXPECT_EQ(out.by_id.at(2).status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(out.by_id.at(2).status().message().find("queue timeout"), std::string::npos);
  EXPECT_EQ(d.CheckInvariants(), "");
}

TEST(DispatcherTest, CancelWhileQueued) {
  FakeClock clock;
  Dispatcher d(QueueOptions{}, WorkerPoolOptions{}, &clock);
  d.SetWorkers({Worker("a", 1)});
  Outcomes out;
  ASSERT_TRUE(d.Submit(out.Make(1, PriorityClass::kStandard)).ok());
  ASSERT_TRUE(d.Submit(out.Make(2, PriorityClass::kStandard)).ok());
  EXPECT_FALSE(d.Cancel(1));  // already dispatched: the caller cancels the call
  EXPECT_TRUE(d.Cancel(2));
  EXPECT_EQ(out.by_id.at(2).status().code(), absl::StatusCode::kCancelled);
  d.Finish("a", CallOutcome::kSuccess);
  EXPECT_EQ(out.order, (std::vector<uint64_t>{1}));
  EXPECT_EQ(d.CheckInvariants(), "");
}

TEST(DispatcherTest, RefusesWhenFull) {
  FakeClock clock;
  QueueOptions q;
  q.max_depth = 1;
  Dispatcher d(q, WorkerPoolOptions{}, &clock);
  Outcomes out;
  d.SetWorkers({Worker("a", 1)});
  ASSERT_TRUE(d.Submit(out.Make(2, PriorityClass::kStandard)).ok());
  ASSERT_TRUE(d.Submit(out.Make(3, PriorityClass::kStandard)).ok());
  absl::Status s = d.Submit(out.Make(4, PriorityClass::kStandard));
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_FALSE(out.by_id.contains(4));  // refused at Submit: no callback
}

// Issue 22: "no healthy worker" failed at once; such a request now waits in
// the queue (a worker table being rebuilt fills again), bounded by the queue
// timeout and its deadline, and then fails UNAVAILABLE.
TEST(DispatcherTest, NoWorkerWaitsInTheQueueThenUnavailable) {
  FakeClock clock;
  QueueOptions q;
  q.queue_timeout = absl::Seconds(5);
  Dispatcher d(q, WorkerPoolOptions{}, &clock);
  Outcomes out;
  ASSERT_TRUE(d.Submit(out.Make(1, PriorityClass::kStandard)).ok());
  ASSERT_TRUE(d.Submit(out.Make(2, PriorityClass::kStandard)).ok());
  DispatchRequest short_deadline = out.Make(3, PriorityClass::kStandard);
  short_deadline.deadline = clock.Now() + absl::Seconds(1);
  ASSERT_TRUE(d.Submit(std::move(short_deadline)).ok());
  EXPECT_TRUE(out.by_id.empty());
  clock.Advance(absl::Seconds(1));
  d.Tick();
  EXPECT_EQ(out.by_id.at(3).status().code(), absl::StatusCode::kDeadlineExceeded);
  clock.Advance(absl::Seconds(1));
  d.SetWorkers({Worker("a", 1)});  // the table is back: the first one goes
  ASSERT_TRUE(out.by_id.at(1).ok());
  EXPECT_EQ(out.by_id.at(1)->queue_wait, absl::Seconds(2));
  d.SetWorkers({});  // gone again: request 2 keeps waiting
  EXPECT_FALSE(out.by_id.contains(2));
  clock.Advance(absl::Seconds(3));
  d.Tick();
  EXPECT_EQ(out.by_id.at(2).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(out.by_id.at(2).status().message().find("no healthy worker"), std::string::npos);
  d.Finish("a", CallOutcome::kSuccess);
  EXPECT_EQ(d.CheckInvariants(), "");
}

TEST(DispatcherTest, RetryAvoidsTheFailedWorker) {
  FakeClock clock;
  Dispatcher d(QueueOptions{}, WorkerPoolOptions{}, &clock);
  d.SetWorkers({Worker("a", 1), Worker("b", 1)});
  Outcomes out;
  ASSERT_TRUE(d.Submit(out.Make(1, PriorityClass::kStandard)).ok());
  ASSERT_TRUE(d.Submit(out.Make(2, PriorityClass::kStandard)).ok());
  std::string failed = out.by_id.at(1)->worker_id;
  std::string other = out.by_id.at(2)->worker_id;
  ASSERT_NE(failed, other);
  ASSERT_TRUE(d.Submit(out.Make(3, PriorityClass::kStandard)).ok());  // waits
  // Request 1's worker fails before its first token: retry elsewhere. The
  // freed slot on the failed worker goes to 3, not to the retry.
  absl::Time first = clock.Now();
  clock.Advance(absl::Milliseconds(5));
  Outcomes retry;
  ASSERT_TRUE(d.Resubmit(retry.Make(1, PriorityClass::kStandard), first, {failed}).ok());
  d.Finish(failed, CallOutcome::kFailure);
  EXPECT_EQ(out.by_id.at(3)->worker_id, failed);
  EXPECT_FALSE(retry.by_id.contains(1));
  d.Finish(other, CallOutcome::kSuccess);
  ASSERT_TRUE(retry.by_id.at(1).ok());
  EXPECT_EQ(retry.by_id.at(1)->worker_id, other);
  EXPECT_EQ(retry.by_id.at(1)->queue_wait, absl::Milliseconds(5));
  // A retry with nowhere else to go ends UNAVAILABLE.
  Outcomes lone;
  EXPECT_EQ(d.Resubmit(lone.Make(9, PriorityClass::kStandard), first, {"a", "b"}).code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(d.CheckInvariants(), "");
}

TEST(DispatcherTest, QueuedRetriesFailWhenNoWorkerIsLeft) {
  FakeClock clock;
  Dispatcher d(QueueOptions{}, WorkerPoolOptions{}, &clock);
  d.SetWorkers({Worker("a", 1), Worker("b", 1)});
  Outcomes out;
  ASSERT_TRUE(d.Submit(out.Make(1, PriorityClass::kStandard)).ok());
  ASSERT_TRUE(d.Submit(out.Make(2, PriorityClass::kStandard)).ok());
  const std::string failed = out.by_id.at(1)->worker_id;
  Outcomes retry;
  ASSERT_TRUE(d.Resubmit(retry.Make(1, PriorityClass::kStandard), clock.Now(), {failed}).ok());
  EXPECT_FALSE(retry.by_id.contains(1));  // the other worker is busy: it waits
  d.SetWorkers({Worker(failed, 1)});      // only the failed worker is left
  EXPECT_EQ(retry.by_id.at(1).status().code(), absl::StatusCode::kUnavailable);
  d.Finish("a", CallOutcome::kSuccess);  // the calls in flight end
  d.Finish("b", CallOutcome::kSuccess);
  EXPECT_EQ(d.CheckInvariants(), "");
}

// Acceptance: under a continuous stream of interactive requests a batch
// request still completes within the documented aging bound. One worker with
// room for one request; each request takes `service` on it; interactive
// requests arrive faster than it serves.
TEST(DispatcherTest, BatchCompletesWithinAgingBoundUnderInteractiveStream) {
  FakeClock clock;
  QueueOptions q;
  q.max_depth = 32;
  q.queue_timeout = absl::Hours(1);
  Dispatcher d(q, WorkerPoolOptions{}, &clock);
  d.SetWorkers({Worker("w", 1)});
  const absl::Duration service = absl::Milliseconds(200);
  const absl::Duration bound = q.class_offset[2] + q.max_cost_term + q.max_depth * service;
  Outcomes out;
  const uint64_t kBatch = 999'999;
  absl::Time batch_submitted, batch_done = absl::InfiniteFuture();
  absl::Time busy_until = clock.Now();
  bool busy = false;
  uint64_t next = 1;
  size_t dispatched_seen = 0;
  for (int tick = 0; tick < 5000 && batch_done == absl::InfiniteFuture(); ++tick) {
    clock.Advance(absl::Milliseconds(50));  // four arrivals per service time
    (void)d.Submit(out.Make(next++, PriorityClass::kInteractive, 30));  // may be full
    if (busy && clock.Now() >= busy_until) {
      busy = false;
      if (out.order.back() == kBatch) batch_done = clock.Now();
      d.Finish("w", CallOutcome::kSuccess);
    }
    if (out.order.size() > dispatched_seen) {  // the worker took the next one
      dispatched_seen = out.order.size();
      busy = true;
      busy_until = clock.Now() + service;
      if (tick >= 200 && batch_submitted == absl::Time()) {
        // The queue is full of interactive work; the dispatch made one slot.
        ASSERT_EQ(d.QueueDepths()[0], q.max_depth - 1);
        ASSERT_TRUE(d.Submit(out.Make(kBatch, PriorityClass::kBatch, 5000)).ok());
        batch_submitted = clock.Now();
      }
    }
    ASSERT_EQ(d.CheckInvariants(), "") << tick;
  }
  ASSERT_TRUE(out.by_id.contains(kBatch)) << "the batch request was refused or starved";
  ASSERT_NE(batch_done, absl::InfiniteFuture()) << "the batch request starved";
  EXPECT_LE(batch_done - batch_submitted, bound + service);
  EXPECT_GE(batch_done - batch_submitted, q.class_offset[2]);
}

// Random submits, cancels, finishes, table changes and ticks: every request
// ends exactly once (Outcomes checks), invariants hold after each step, and
// at the end everything submitted has ended or is still queued.
TEST(DispatcherTest, RandomSequencesEndEveryRequestOnce) {
  std::mt19937 rng(4242);
  FakeClock clock;
  QueueOptions q;
  q.max_depth = 20;
  q.queue_timeout = absl::Seconds(3);
  WorkerPoolOptions p;
  p.eject_base = absl::Milliseconds(500);
  Dispatcher d(q, p, &clock);
  Outcomes out;
  std::vector<std::string> running;  // worker of each dispatched, unfinished call
  size_t dispatched_seen = 0;
  uint64_t next = 1;
  int64_t accepted = 0;
  for (int step = 0; step < 20000; ++step) {
    int op = rng() % 10;
    if (op < 4) {
      DispatchRequest r = out.Make(next++, static_cast<PriorityClass>(rng() % 3), rng() % 900);
      if (rng() % 5 == 0) r.deadline = clock.Now() + absl::Milliseconds(rng() % 4000);
      if (d.Submit(std::move(r)).ok()) ++accepted;
    } else if (op < 6 && !running.empty()) {
      size_t i = rng() % running.size();
      std::string w = running[i];
      running.erase(running.begin() + i);
      d.Finish(w, static_cast<CallOutcome>(rng() % 3));
    } else if (op == 6) {
      d.Cancel(1 + rng() % next);
    } else if (op == 7) {
      std::vector<WorkerDesc> table;
      for (const char* id : {"a", "b", "c"}) {
        if (rng() % 4) table.push_back(Worker(id, 1 + rng() % 3));
      }
      d.SetWorkers(table);
    } else {
      clock.Advance(absl::Milliseconds(rng() % 400));
      d.Tick();
    }
    while (out.order.size() > dispatched_seen) {
      running.push_back(out.by_id.at(out.order[dispatched_seen++])->worker_id);
    }
    ASSERT_EQ(d.CheckInvariants(), "") << step;
    std::array<int64_t, 3> depths = d.QueueDepths();
    ASSERT_EQ(accepted, static_cast<int64_t>(out.by_id.size()) + depths[0] + depths[1] + depths[2])
        << step;
  }
}

}  // namespace
}  // namespace onecard::router
