// WorkerPool: the router's view of its workers and the dispatch policy.
//
// Pick chooses, among workers that are healthy, not draining, not ejected and
// have room, the least loaded one. Load is the worker's last report (waiting
// + running) corrected by what this router did since: the router's own
// in-flight count now minus its in-flight count when that report arrived
// (never below the router's in-flight count). Ties go to prefix affinity: the
// worker with the highest hash(affinity, worker id) (rendezvous hashing), so
// requests sharing a prompt prefix land on the same worker while the set of
// workers changes little.
//
// Room: estimated load < capacity (WorkerDesc::capacity, or the pool default
// when 0), and KV usage below kv_watermark when the report says so. The
// router only dispatches into room, so the queue stays in the router, where
// priority applies.
//
// Ejection: eject_after_failures consecutive failures eject a worker for
// eject_base, doubling with each ejection up to eject_max. When the time is
// up the worker is probed: one request at a time until one succeeds (back in,
// backoff reset) or fails (ejected again, for longer).
//
// Not thread-safe; the Dispatcher holds the lock.
// Tested by tests/router/worker_pool_test.cc (fake clock, invariant checks,
// random operation sequences).
#ifndef ONECARD_ROUTER_WORKER_POOL_H_
#define ONECARD_ROUTER_WORKER_POOL_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/time/time.h"
#include "engine/common/clock.h"

namespace onecard::router {

struct WorkerLoad {
  int64_t waiting = 0;
  int64_t running = 0;
  int64_t kv_blocks_used = 0;
  int64_t kv_blocks_total = 0;
  bool draining = false;
  // The report's sequence number: a new value means a new report, which
  // resets the in-flight correction.
  int64_t sequence = 0;
};

// A worker as the table (control plane or static config) describes it.
struct WorkerDesc {
  std::string id;
  std::string address;
  bool healthy = true;
  int64_t capacity = 0;            // max requests in flight from this router; 0 = default
  std::optional<WorkerLoad> load;  // the latest report, when there is one
  int32_t context_length = 0;      // what it serves (ModelInfo); 0 = unknown
};

struct WorkerPoolOptions {
  int64_t default_capacity = 8;
  double kv_watermark = 0.98;  // no dispatch at or above this KV usage; 0 = off
  int32_t eject_after_failures = 3;
  absl::Duration eject_base = absl::Seconds(1);
  absl::Duration eject_max = absl::Seconds(30);
};

enum class CallOutcome {
  kSuccess,  // the worker served the call (any normal end, or a client cancel)
  kFailure,  // the worker failed it: unreachable, crashed, internal error
  kNeutral,  // says nothing about health (e.g. worker RESOURCE_EXHAUSTED)
};

struct WorkerSnapshot {
  std::string id;
  std::string address;
  int64_t in_flight = 0;
  int64_t estimated_load = 0;
  bool healthy = false;
  bool ejected = false;
  bool probing = false;
};

class WorkerPool {
 public:
  WorkerPool(const WorkerPoolOptions& options, const Clock* clock)
      : options_(options), clock_(clock) {}

  // Replaces the table: new workers join, known ones take the new
  // description and load (their ejection state survives), and workers not in
  // `workers` leave; one with calls in flight stays, unpickable, until they
  // finish, so its in-flight count stays exact if it comes back.
  void SetWorkers(const std::vector<WorkerDesc>& workers);
  // Picks a worker for a request (see above) and counts it in flight;
  // nullopt when no eligible worker has room.
  struct Picked {
    std::string id;
    std::string address;
  };
  std::optional<Picked> Pick(uint64_t affinity_hash,
                             const absl::flat_hash_set<std::string>& exclude);
  // A call to `worker_id` ended. Unknown ids are ignored.
  void Finish(const std::string& worker_id, CallOutcome outcome);

  // Whether any worker outside `exclude` is healthy, not draining and not
  // ejected now (room or not): false means a request could only wait for a
  // table change or a probe time.
  bool AnyUsable(const absl::flat_hash_set<std::string>& exclude) const;
  // The earliest time an ejected worker becomes probeable (InfiniteFuture
  // when none is ejected).
  absl::Time NextProbeTime() const;
  std::vector<WorkerSnapshot> Snapshot() const;
  int64_t in_flight(const std::string& worker_id) const;
  std::string CheckInvariants() const;

 private:
  struct State {
    WorkerDesc desc;
    int64_t in_flight = 0;
    int64_t in_flight_at_report = 0;
    int32_t consecutive_failures = 0;
    int32_t ejections = 0;  // in a row, for the backoff
    absl::Time ejected_until = absl::InfinitePast();
    bool probing = false;   // back from ejection, on trial
    bool departed = false;  // left the table; calls still in flight
  };
  int64_t Capacity(const State& s) const;
  int64_t EstimatedLoad(const State& s) const;
  bool Eligible(const State& s, absl::Time now) const;
  bool HasRoom(const State& s) const;
  void Eject(State& s, absl::Time now);

  WorkerPoolOptions options_;
  const Clock* clock_;
  std::map<std::string, State> workers_;  // ordered: deterministic ties
};

// A 64-bit hash of the first `max_tokens` prompt token ids (FNV-1a over
// their bytes), the prefix-affinity key.
uint64_t PrefixAffinityHash(const std::vector<int32_t>& token_ids, size_t max_tokens);

}  // namespace onecard::router

#endif  // ONECARD_ROUTER_WORKER_POOL_H_
