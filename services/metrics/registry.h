// Registry: the control plane's table of workers and routers (design.md §1).
// Workers and routers register, then stream load reports; an entry silent
// for longer than its expiry turns unhealthy (and stops counting in the
// aggregates), and one silent for twice as long is dropped. Every
// change bumps `version` and wakes the subscribers (the WatchWorkers streams
// and nothing else: the registry never calls out over the network).
//
// Contract:
// - RegisterWorker/RegisterRouter need a non-empty id and address
//   (InvalidArgument naming the field). Registering an id again replaces its
//   address and info and restarts its sequence numbers (a restarted process).
// - A worker id is bound to the owner (the identity the caller proved, see
//   services/common/service_auth.h) and the address that registered it while
//   that registration is live (reported within worker_expiry): registering
//   it from another owner or address, or reporting for it from another
//   owner or with another address, is PermissionDenied. So a rogue caller
//   cannot take over a live worker's id and its traffic.
// - Report*Load answers NotFound for an id that is not registered (the
//   client then registers again) and ignores a report whose sequence is not
//   above the last one applied (an older stream racing a newer one).
// - WorkerLeft forgets a worker whose report stream ended (it stopped, or
//   its connection broke and it will register again), so routers stop
//   sending to it at once instead of after the expiry.
// - Time comes only from the injected `now` function; Sweep() applies expiry.
// Tested by tests/services/metrics/registry_test.cc (fake clock).
#ifndef ONECARD_SERVICES_METRICS_REGISTRY_H_
#define ONECARD_SERVICES_METRICS_REGISTRY_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "onecard/v1/control.pb.h"

namespace onecard::services::metrics {

struct RegistryOptions {
  // How often clients are asked to report (RegisterWorkerResponse).
  absl::Duration report_interval = absl::Milliseconds(250);
  // Silence after which a worker (router) is unhealthy and leaves the
  // aggregates; after twice as long it is dropped from the tables.
  absl::Duration worker_expiry = absl::Seconds(2);
  absl::Duration router_expiry = absl::Seconds(2);
  // How long after the registry's creation its worker table is held back
  // from WatchWorkers (see published_from()); MetricsService sets 6s.
  absl::Duration table_warmup = absl::ZeroDuration();
};

// A worker as the aggregates see it: the latest report, when it came, and
// whether it still counts.
struct WorkerView {
  v1::WorkerEntry entry;  // entry.load is unset before the first report
  bool live = false;      // reported (or registered) within the expiry
};

struct RouterView {
  std::string router_id;
  std::optional<v1::RouterLoadReport> load;
  bool live = false;
};

struct RegistrySnapshot {
  std::vector<WorkerView> workers;  // ordered by worker_id
  std::vector<RouterView> routers;  // ordered by router_id
  int64_t version = 0;
};

class Registry {
 public:
  using NowFunction = std::function<absl::Time()>;
  using Listener = std::function<void()>;

  explicit Registry(RegistryOptions options, NowFunction now = absl::Now);

  // `owner` is the caller's proven identity ("" when services are open).
  absl::Status RegisterWorker(const v1::RegisterWorkerRequest &request,
                              std::string_view owner = "");
  // On success *registration (optional) is the registration the report was
  // applied to, for WorkerLeft.
  absl::Status ReportWorkerLoad(const v1::WorkerLoadReport &report, std::string_view owner = "",
                                int64_t *registration = nullptr);
  // The report stream of `registration` of `worker_id` ended: the worker is
  // removed, unless it has registered again since.
  void WorkerLeft(const std::string &worker_id, int64_t registration);
  absl::Status RegisterRouter(const v1::RegisterRouterRequest &request);
  absl::Status ReportRouterLoad(const v1::RouterLoadReport &report);

  // Applies expiry and removal at the current time (a change bumps the
  // version), then wakes every subscriber, also when nothing changed, so
  // that rate-limited watch streams can send what they held back.
  void Sweep();

  // The worker table for WatchWorkers; `model` empty means every model.
  v1::WorkerTable WorkerTable(std::string_view model) const;
  RegistrySnapshot Snapshot() const;
  int64_t version() const;
  absl::Time Now() const { return now_(); }
  // The time from which the worker table may be sent: creation plus
  // table_warmup. Before it the table may still miss live workers that have
  // not registered again since a restart of the control plane.
  absl::Time published_from() const { return created_ + options_.table_warmup; }
  const RegistryOptions &options() const { return options_; }

  // `listener` runs after every change, on the thread that made it, outside
  // the table's lock; it must not call Subscribe/Unsubscribe. Unsubscribe
  // returns only once no call of that listener is running.
  int64_t Subscribe(Listener listener);
  void Unsubscribe(int64_t id);

 private:
  struct WorkerState {
    v1::WorkerEntry entry;
    std::string owner;
    int64_t registration = 0;  // registry-wide count of RegisterWorker calls
    absl::Time last_seen;
    int64_t last_sequence = 0;
  };
  struct RouterState {
    v1::RegisterRouterRequest registration;
    std::optional<v1::RouterLoadReport> load;
    absl::Time last_seen;
    int64_t last_sequence = 0;
  };

  bool SweepLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Notify();

  const RegistryOptions options_;
  const NowFunction now_;
  const absl::Time created_;

  mutable absl::Mutex mu_;
  std::map<std::string, WorkerState> workers_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, RouterState> routers_ ABSL_GUARDED_BY(mu_);
  int64_t version_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t registrations_ ABSL_GUARDED_BY(mu_) = 0;

  absl::Mutex listeners_mu_;  // held while listeners run (see Unsubscribe)
  std::map<int64_t, Listener> listeners_ ABSL_GUARDED_BY(listeners_mu_);
  int64_t next_listener_id_ ABSL_GUARDED_BY(listeners_mu_) = 1;
};

}  // namespace onecard::services::metrics

#endif  // ONECARD_SERVICES_METRICS_REGISTRY_H_
