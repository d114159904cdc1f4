// Dispatcher: the router's admission core, joining the RequestQueue (who goes
// next) and the WorkerPool (where it goes). Thread-safe; every callback runs
// outside its lock.
//
// A request is submitted once. It is then either placed on a worker (its
// callback gets an Assignment and the caller must call Finish when the
// worker call ends) or ended without one (the callback gets the status):
//   DEADLINE_EXCEEDED  its deadline passed while it waited, or it waited past
//                      the queue timeout with every worker busy;
//   UNAVAILABLE        it waited the queue timeout and no healthy worker came
//                      (a request finding none waits: a worker table being
//                      rebuilt, an ejected worker's probe time), or, for a
//                      retry, no worker it may use is left;
//   CANCELLED          Cancel was called while it was queued.
// Submit itself refuses with RESOURCE_EXHAUSTED (queue full) only; Resubmit
// also with UNAVAILABLE (no healthy worker but those it excludes); then no
// callback follows.
//
// Dispatch happens on every event that can make room or add work (Submit,
// Finish, SetWorkers, Tick); Tick also expires entries and lets probe times
// pass. The owner calls Tick at NextWakeTime() (or on a short period).
// Tested by tests/router/dispatcher_test.cc with a FakeClock.
#ifndef ONECARD_ROUTER_DISPATCHER_H_
#define ONECARD_ROUTER_DISPATCHER_H_

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "engine/common/clock.h"
#include "router/request_queue.h"
#include "router/worker_pool.h"

namespace onecard::router {

struct Assignment {
  std::string worker_id;
  std::string address;
  absl::Duration queue_wait;  // first submit -> this dispatch
};

using DispatchCallback = std::function<void(absl::StatusOr<Assignment>)>;

struct DispatchRequest {
  uint64_t id = 0;  // unique among queued requests
  PriorityClass priority = PriorityClass::kStandard;
  int64_t cost_tokens = 0;  // prompt + max_tokens
  uint64_t affinity_hash = 0;
  absl::Time deadline = absl::InfiniteFuture();
  DispatchCallback on_done;
};

class Dispatcher {
 public:
  Dispatcher(const QueueOptions& queue_options, const WorkerPoolOptions& pool_options,
             const Clock* clock);

  absl::Status Submit(DispatchRequest request);
  // A retry after a worker failed before the first token: re-enters the
  // queue past its bounds with its first enqueue time (so it ranks early),
  // never to go to the workers in `exclude`.
  absl::Status Resubmit(DispatchRequest request, absl::Time first_enqueued,
                        absl::flat_hash_set<std::string> exclude);
  // Ends a queued request with CANCELLED; false when it is not queued.
  bool Cancel(uint64_t id);
  // A worker call ended: frees its slot and dispatches what now fits.
  void Finish(const std::string& worker_id, CallOutcome outcome);
  void SetWorkers(const std::vector<WorkerDesc>& workers);
  void Tick();
  absl::Time NextWakeTime();

  std::array<int64_t, kNumPriorityClasses> QueueDepths();
  std::vector<WorkerSnapshot> Workers();
  bool AnyUsableWorker();
  // Empty when the queue, the pool and the pending table agree.
  std::string CheckInvariants();

 private:
  struct Pending {
    DispatchRequest request;
    absl::Time first_enqueued;
    absl::flat_hash_set<std::string> exclude;
  };
  using Ready = std::vector<std::pair<DispatchCallback, absl::StatusOr<Assignment>>>;

  absl::Status Enqueue(Pending pending, bool ignore_bounds) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Pump(Ready& ready) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ExpireQueued(Ready& ready) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void End(uint64_t id, absl::StatusOr<Assignment> result, Ready& ready)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static void Run(Ready& ready);

  const Clock* clock_;
  absl::Mutex mu_;
  RequestQueue queue_ ABSL_GUARDED_BY(mu_);
  WorkerPool pool_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, Pending> pending_ ABSL_GUARDED_BY(mu_);
};

}  // namespace onecard::router

#endif  // ONECARD_ROUTER_DISPATCHER_H_
