// Tests router/request_queue.h with explicit times: class order, shortest
// cost within a class, aging, FIFO mode, bounds, timeouts, the documented
// aging bound under a continuous stream of interactive requests, and random
// operation sequences against a brute-force model with invariant checks.
#include "router/request_queue.h"

#include <algorithm>
#include <random>
#include <tuple>

#include "gtest/gtest.h"

namespace onecard::router {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1000);

QueueEntry Entry(uint64_t id, PriorityClass priority, int64_t cost, absl::Time at) {
  QueueEntry e;
  e.id = id;
  e.priority = priority;
  e.cost_tokens = cost;
  e.enqueued = at;
  return e;
}

std::vector<uint64_t> PopAll(RequestQueue& q) {
  std::vector<uint64_t> ids;
  while (auto e = q.Pop()) {
    ids.push_back(e->id);
    EXPECT_EQ(q.CheckInvariants(), "");
  }
  return ids;
}

TEST(RequestQueueTest, ClassFirstThenShortestCost) {
  RequestQueue q(QueueOptions{});
  ASSERT_TRUE(q.Push(Entry(1, PriorityClass::kBatch, 10, kT0)).ok());
  ASSERT_TRUE(q.Push(Entry(2, PriorityClass::kStandard, 900, kT0)).ok());
  ASSERT_TRUE(q.Push(Entry(3, PriorityClass::kInteractive, 1500, kT0)).ok());
  ASSERT_TRUE(q.Push(Entry(4, PriorityClass::kStandard, 50, kT0)).ok());
  ASSERT_TRUE(q.Push(Entry(5, PriorityClass::kInteractive, 20, kT0)).ok());
  EXPECT_EQ(q.CheckInvariants(), "");
  EXPECT_EQ(q.depth(PriorityClass::kStandard), 2);
  EXPECT_EQ(PopAll(q), (std::vector<uint64_t>{5, 3, 4, 2, 1}));
}

TEST(RequestQueueTest, EqualRanksLeaveInArrivalOrder) {
  RequestQueue q(QueueOptions{});
  for (uint64_t id = 0; id < 10; ++id) {
    ASSERT_TRUE(q.Push(Entry(id, PriorityClass::kStandard, 7, kT0)).ok());
  }
  EXPECT_EQ(PopAll(q), (std::vector<uint64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
}

TEST(RequestQueueTest, WaitingRaisesPriority) {
  QueueOptions options;  // standard starts 2 s behind interactive
  RequestQueue q(options);
  ASSERT_TRUE(q.Push(Entry(1, PriorityClass::kStandard, 0, kT0)).ok());
  // An interactive request 1.9 s later still goes first; 2.1 s later it
  // does not: the standard one has aged past it.
  ASSERT_TRUE(q.Push(Entry(2, PriorityClass::kInteractive, 0, kT0 + absl::Seconds(1.9))).ok());
  ASSERT_TRUE(q.Push(Entry(3, PriorityClass::kInteractive, 0, kT0 + absl::Seconds(2.1))).ok());
  EXPECT_EQ(PopAll(q), (std::vector<uint64_t>{2, 1, 3}));
}

TEST(RequestQueueTest, CostTermIsCapped) {
  QueueOptions options;
  RequestQueue q(options);
  EXPECT_EQ(q.RankFor(PriorityClass::kStandard, 100, kT0),
            kT0 + options.class_offset[1] + 100 * options.cost_per_token);
  EXPECT_EQ(q.RankFor(PriorityClass::kStandard, 1 << 30, kT0),
            kT0 + options.class_offset[1] + options.max_cost_term);
}

TEST(RequestQueueTest, FifoIgnoresClassAndCost) {
  QueueOptions options;
  options.fifo = true;
  RequestQueue q(options);
  ASSERT_TRUE(q.Push(Entry(1, PriorityClass::kBatch, 4000, kT0)).ok());
  ASSERT_TRUE(q.Push(Entry(2, PriorityClass::kInteractive, 1, kT0 + absl::Milliseconds(1))).ok());
  ASSERT_TRUE(q.Push(Entry(3, PriorityClass::kStandard, 5, kT0 + absl::Milliseconds(2))).ok());
  EXPECT_EQ(PopAll(q), (std::vector<uint64_t>{1, 2, 3}));
}

TEST(RequestQueueTest, BoundsRefuseWithTheirName) {
  QueueOptions options;
  options.max_depth = 3;
  options.max_depth_per_class = {0, 0, 1};
  RequestQueue q(options);
  ASSERT_TRUE(q.Push(Entry(1, PriorityClass::kBatch, 1, kT0)).ok());
  absl::Status s = q.Push(Entry(2, PriorityClass::kBatch, 1, kT0));
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("batch"), std::string::npos) << s;
  ASSERT_TRUE(q.Push(Entry(3, PriorityClass::kStandard, 1, kT0)).ok());
  ASSERT_TRUE(q.Push(Entry(4, PriorityClass::kStandard, 1, kT0)).ok());
  s = q.Push(Entry(5, PriorityClass::kInteractive, 1, kT0));
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("max_depth 3"), std::string::npos) << s;
  // A retry passes the bounds.
  EXPECT_TRUE(q.Push(Entry(6, PriorityClass::kInteractive, 1, kT0), true).ok());
  EXPECT_EQ(q.depth(), 4);
  EXPECT_EQ(q.CheckInvariants(), "");
}

TEST(RequestQueueTest, ExpiresAtQueueTimeoutOrOwnDeadline) {
  QueueOptions options;
  options.queue_timeout = absl::Seconds(10);
  RequestQueue q(options);
  ASSERT_TRUE(q.Push(Entry(1, PriorityClass::kStandard, 1, kT0)).ok());
  QueueEntry with_deadline = Entry(2, PriorityClass::kStandard, 1, kT0);
  with_deadline.deadline = kT0 + absl::Seconds(3);
  ASSERT_TRUE(q.Push(with_deadline).ok());
  ASSERT_TRUE(q.Push(Entry(3, PriorityClass::kStandard, 1, kT0 + absl::Seconds(5))).ok());
  EXPECT_EQ(q.NextExpiry(), kT0 + absl::Seconds(3));
  EXPECT_TRUE(q.Expire(kT0 + absl::Seconds(2.999)).empty());
  std::vector<QueueEntry> gone = q.Expire(kT0 + absl::Seconds(3));
  ASSERT_EQ(gone.size(), 1u);
  EXPECT_EQ(gone[0].id, 2u);
  gone = q.Expire(kT0 + absl::Seconds(10));
  ASSERT_EQ(gone.size(), 1u);
  EXPECT_EQ(gone[0].id, 1u);
  EXPECT_EQ(q.depth(), 1);
  EXPECT_EQ(q.NextExpiry(), kT0 + absl::Seconds(15));
  EXPECT_EQ(q.CheckInvariants(), "");
}

// The documented aging bound. A server takes the head every `interval`;
// interactive requests arrive twice as fast as it serves, so the queue stays
// full of higher-class work. A batch request pushed into that stream must
// leave within class_offset[batch] + max_cost_term + max_depth intervals.
TEST(RequestQueueTest, BatchRequestLeavesWithinAgingBoundUnderInteractiveFlood) {
  QueueOptions options;
  options.max_depth = 50;
  options.queue_timeout = absl::Hours(1);
  RequestQueue q(options);
  const absl::Duration interval = absl::Milliseconds(100);
  const absl::Duration bound =
      options.class_offset[2] + options.max_cost_term + options.max_depth * interval;
  absl::Time now = kT0;
  uint64_t next_id = 1;
  const uint64_t kBatchId = 1'000'000;
  absl::Time batch_pushed;
  absl::Duration batch_wait = absl::InfiniteDuration();
  for (int tick = 0; tick < 2000 && batch_wait == absl::InfiniteDuration(); ++tick) {
    now += interval / 2;
    (void)q.Push(Entry(next_id++, PriorityClass::kInteractive, 20 + tick % 7, now));  // may be full
    if (tick == 100) {  // the queue is full of interactive work by now
      ASSERT_EQ(q.depth(), options.max_depth);
      q.Pop();  // make room the way a dispatch would
      ASSERT_TRUE(q.Push(Entry(kBatchId, PriorityClass::kBatch, 1 << 20, now)).ok());
      batch_pushed = now;
    }
    if (tick % 2 == 1) {
      std::optional<QueueEntry> head = q.Pop();
      ASSERT_TRUE(head.has_value());
      if (head->id == kBatchId) batch_wait = now - batch_pushed;
    }
    ASSERT_EQ(q.CheckInvariants(), "") << tick;
  }
  ASSERT_NE(batch_wait, absl::InfiniteDuration()) << "the batch request starved";
  EXPECT_LE(batch_wait, bound);
  // And it did wait behind interactive work, rather than going first.
  EXPECT_GE(batch_wait, options.class_offset[2]);
}

// Random pushes, pops, removals and expiries against a brute-force model:
// the queue always pops the model's minimum of (rank, arrival).
TEST(RequestQueueTest, RandomOperationsMatchBruteForceModel) {
  for (bool fifo : {false, true}) {
    std::mt19937 rng(fifo ? 7 : 8);
    QueueOptions options;
    options.fifo = fifo;
    options.max_depth = 40;
    options.max_depth_per_class = {0, 25, 10};
    options.queue_timeout = absl::Seconds(20);
    RequestQueue q(options);
    std::vector<QueueEntry> model;
    absl::Time now = kT0;
    uint64_t next_id = 0, seq = 0;
    auto head = [&]() {
      return std::min_element(model.begin(), model.end(), [](const auto& a, const auto& b) {
        return std::tie(a.rank, a.sequence) < std::tie(b.rank, b.sequence);
      });
    };
    for (int step = 0; step < 20000; ++step) {
      int op = rng() % 10;
      if (op < 4) {
        QueueEntry e = Entry(next_id++, static_cast<PriorityClass>(rng() % 3), rng() % 3000, now);
        if (rng() % 4 == 0) e.deadline = now + absl::Milliseconds(rng() % 30000);
        int cls = static_cast<int>(e.priority);
        bool fits = static_cast<int64_t>(model.size()) < options.max_depth &&
                    (options.max_depth_per_class[cls] == 0 ||
                     q.depth(e.priority) < options.max_depth_per_class[cls]);
        absl::Status s = q.Push(e);
        ASSERT_EQ(s.ok(), fits) << s;
        if (fits) {
          e.rank = q.RankFor(e.priority, e.cost_tokens, e.enqueued);
          e.expires = std::min(e.enqueued + options.queue_timeout, e.deadline);
          e.sequence = seq++;
          model.push_back(e);
        }
      } else if (op < 7) {
        std::optional<QueueEntry> got = q.Pop();
        ASSERT_EQ(got.has_value(), !model.empty());
        if (got) {
          auto want = head();
          ASSERT_EQ(got->id, want->id) << step;
          model.erase(want);
        }
      } else if (op == 7 && !model.empty()) {
        size_t i = rng() % model.size();
        ASSERT_TRUE(q.Remove(model[i].id).has_value());
        model.erase(model.begin() + i);
      } else if (op == 8) {
        now += absl::Milliseconds(rng() % 2000);
        std::vector<QueueEntry> gone = q.Expire(now);
        size_t expected = std::count_if(model.begin(), model.end(),
                                        [&](const QueueEntry& e) { return e.expires <= now; });
        ASSERT_EQ(gone.size(), expected);
        std::erase_if(model, [&](const QueueEntry& e) { return e.expires <= now; });
      } else {
        ASSERT_FALSE(q.Remove(next_id + 100).has_value());
      }
      ASSERT_EQ(q.depth(), static_cast<int64_t>(model.size()));
      ASSERT_EQ(q.CheckInvariants(), "") << step;
    }
  }
}

}  // namespace
}  // namespace onecard::router
