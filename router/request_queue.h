// RequestQueue: the router's bounded priority queue of admitted requests
// waiting for a worker with room.
//
// Order. Every entry gets a fixed rank time when it is pushed:
//   rank = enqueued + class_offset[class] + min(cost * cost_per_token, max_cost_term)
// and the smallest rank goes first (ties: arrival order). Read at one moment
// this is "class first, then the shortest expected cost": a fresh interactive
// request ranks class_offset[standard] ahead of a fresh standard one, and a
// short prompt ahead of a long one of its class. It is also aging: a waiting
// entry's rank stands still while every new arrival's rank is at least its
// arrival time, so an entry waiting for W ranks as if its class offset and cost
// were W smaller.
//
// Aging bound (tested): once the clock passes an entry's rank time, no newly
// pushed entry can rank ahead of it, so at most max_depth - 1 entries are
// dispatched before it, and it goes with the max_depth-th dispatch at the
// latest. With dispatches at most `interval` apart, an entry leaves within
//   class_offset[class] + max_cost_term + max_depth * interval
// of being pushed, however many higher-class requests keep arriving. (With
// the defaults, a batch request behind a full queue of 4096 waits at most
// 10 s + 4096 dispatch intervals.)
//
// Bounds: max_depth in total and max_depth_per_class[class]; a push past
// either is refused. Expiry: an entry leaves with a timeout at
// min(enqueued + queue_timeout, its own deadline).
//
// With fifo = true the rank is the arrival time alone (the baseline that the
// serve-priority benchmark compares against).
//
// Not thread-safe; the Dispatcher holds the lock.
// Tested by tests/router/request_queue_test.cc (fake times, invariant checks
// after every operation, random operation sequences).
#ifndef ONECARD_ROUTER_REQUEST_QUEUE_H_
#define ONECARD_ROUTER_REQUEST_QUEUE_H_

#include <array>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/time/time.h"

namespace onecard::router {

// Scheduling classes, most urgent first (onecard.v1.Priority maps onto them).
enum class PriorityClass : int { kInteractive = 0, kStandard = 1, kBatch = 2 };
inline constexpr int kNumPriorityClasses = 3;
const char* PriorityClassName(PriorityClass priority);  // "interactive", ...

struct QueueOptions {
  int64_t max_depth = 4096;
  // 0 = only max_depth applies to that class.
  std::array<int64_t, kNumPriorityClasses> max_depth_per_class = {0, 0, 0};
  absl::Duration queue_timeout = absl::Seconds(60);
  // How far behind a fresh interactive request each class starts.
  std::array<absl::Duration, kNumPriorityClasses> class_offset = {
      absl::ZeroDuration(), absl::Seconds(2), absl::Seconds(8)};
  // The expected-cost term: each token of prompt + max_tokens ranks an entry
  // this much later, up to max_cost_term.
  absl::Duration cost_per_token = absl::Milliseconds(1);
  absl::Duration max_cost_term = absl::Seconds(2);
  bool fifo = false;
};

struct QueueEntry {
  uint64_t id = 0;
  PriorityClass priority = PriorityClass::kStandard;
  int64_t cost_tokens = 0;  // prompt + max_tokens
  absl::Time enqueued;
  absl::Time deadline = absl::InfiniteFuture();  // the request's own
  // Filled by Push:
  absl::Time rank;
  absl::Time expires;
  uint64_t sequence = 0;
};

class RequestQueue {
 public:
  explicit RequestQueue(const QueueOptions& options) : options_(options) {}

  // Adds an entry (id unique among queued ones). ResourceExhausted naming the
  // bound when the queue or the entry's class is full, unless ignore_bounds
  // (a retry re-entering with its first enqueue time, which ranks it early).
  absl::Status Push(QueueEntry entry, bool ignore_bounds = false);
  // The entries in dispatch order (rank, then arrival), for the dispatcher
  // to walk; valid until the next change.
  std::vector<const QueueEntry*> InOrder(size_t limit) const;
  std::optional<QueueEntry> Pop();  // the head
  std::optional<QueueEntry> Remove(uint64_t id);
  // Removes and returns every entry whose expiry is <= now, oldest first.
  std::vector<QueueEntry> Expire(absl::Time now);
  // The earliest expiry among queued entries (InfiniteFuture when empty).
  absl::Time NextExpiry() const;

  int64_t depth() const { return static_cast<int64_t>(entries_.size()); }
  int64_t depth(PriorityClass priority) const {
    return depth_by_class_[static_cast<int>(priority)];
  }
  bool empty() const { return entries_.empty(); }
  // The rank time an entry pushed now would get.
  absl::Time RankFor(PriorityClass priority, int64_t cost_tokens, absl::Time enqueued) const;
  // Empty when consistent; otherwise what is wrong (tests call it after
  // every operation).
  std::string CheckInvariants() const;
  const QueueOptions& options() const { return options_; }

 private:
  using Key = std::pair<absl::Time, uint64_t>;  // (rank or expiry, sequence)
  std::optional<QueueEntry> Take(uint64_t id);

  QueueOptions options_;
  uint64_t next_sequence_ = 0;
  absl::flat_hash_map<uint64_t, QueueEntry> entries_;
  std::set<std::pair<Key, uint64_t>> by_rank_;    // ((rank, seq), id)
  std::set<std::pair<Key, uint64_t>> by_expiry_;  // ((expires, seq), id)
  std::array<int64_t, kNumPriorityClasses> depth_by_class_ = {0, 0, 0};
};

}  // namespace onecard::router

#endif  // ONECARD_ROUTER_REQUEST_QUEUE_H_
