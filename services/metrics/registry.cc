// Registry of workers and routers; see registry.h. Tested by
// tests/services/metrics/registry_test.cc.
#include "services/metrics/registry.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace onecard::services::metrics {
namespace {

google::protobuf::Timestamp ToTimestamp(absl::Time t) {
  google::protobuf::Timestamp ts;
  const int64_t nanos = absl::ToUnixNanos(t);
  int64_t seconds = nanos / 1000000000;
  int64_t rest = nanos % 1000000000;
  if (rest < 0) {
    rest += 1000000000;
    seconds -= 1;
  }
  ts.set_seconds(seconds);
  ts.set_nanos(static_cast<int32_t>(rest));
  return ts;
}

// An owner in messages: open mode has none.
std::string Describe(std::string_view owner) {
  return owner.empty() ? std::string("an unauthenticated caller")
                       : absl::StrCat("'", std::string(owner), "'");
}

}  // namespace

Registry::Registry(RegistryOptions options, NowFunction now)
    : options_(options), now_(std::move(now)), created_(now_()) {}

absl::Status Registry::RegisterWorker(const v1::RegisterWorkerRequest &request,
                                      std::string_view owner) {
  if (request.worker_id().empty()) {
    return absl::InvalidArgumentError("RegisterWorkerRequest.worker_id is empty");
  }
  if (request.address().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("RegisterWorkerRequest.address is empty (worker ", request.worker_id(), ")"));
  }
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = now_();
    auto it = workers_.find(request.worker_id());
    if (it != workers_.end() && now - it->second.last_seen <= options_.worker_expiry &&
        (it->second.owner != owner || it->second.entry.address() != request.address())) {
      return absl::PermissionDeniedError(absl::StrCat(
          "worker id ", request.worker_id(), " is registered by ", Describe(it->second.owner),
          " at ", it->second.entry.address(), "; refused for ", Describe(owner), " at ",
          request.address(), " while that registration is live"));
    }
    WorkerState &state = workers_[request.worker_id()];
    state.owner = std::string(owner);
    state.registration = ++registrations_;
    state.entry.set_worker_id(request.worker_id());
    state.entry.set_address(request.address());
    state.entry.set_metrics_address(request.metrics_address());
    *state.entry.mutable_info() = request.info();
    state.entry.clear_load();
    state.entry.set_healthy(true);
    *state.entry.mutable_last_report() = ToTimestamp(now);
    state.last_seen = now;
    state.last_sequence = 0;
    ++version_;
  }
  Notify();
  return absl::OkStatus();
}

absl::Status Registry::ReportWorkerLoad(const v1::WorkerLoadReport &report, std::string_view owner,
                                        int64_t *registration) {
  if (report.worker_id().empty()) {
    return absl::InvalidArgumentError("WorkerLoadReport.worker_id is empty");
  }
  {
    absl::MutexLock lock(&mu_);
    auto it = workers_.find(report.worker_id());
    if (it == workers_.end()) {
      return absl::NotFoundError(absl::StrCat("worker ", report.worker_id(), " is not registered"));
    }
    WorkerState &state = it->second;
    if (state.owner != owner || state.entry.address() != report.address()) {
      return absl::PermissionDeniedError(
          absl::StrCat("worker ", report.worker_id(), " is registered by ", Describe(state.owner),
                       " at ", state.entry.address(), "; a report from ", Describe(owner), " for ",
                       report.address(), " is refused"));
    }
    if (registration != nullptr) *registration = state.registration;
    if (report.sequence() != 0 && report.sequence() <= state.last_sequence) {
      return absl::OkStatus();  // stale: an older stream racing a newer one
    }
    const absl::Time now = now_();
    state.last_sequence = report.sequence();
    state.last_seen = now;
    *state.entry.mutable_load() = report;
    *state.entry.mutable_last_report() = ToTimestamp(now);
    state.entry.set_healthy(!report.draining());
    ++version_;
  }
  Notify();
  return absl::OkStatus();
}

void Registry::WorkerLeft(const std::string &worker_id, int64_t registration) {
  {
    absl::MutexLock lock(&mu_);
    auto it = workers_.find(worker_id);
    if (it == workers_.end() || it->second.registration != registration) return;
    workers_.erase(it);
    ++version_;
  }
  Notify();
}

absl::Status Registry::RegisterRouter(const v1::RegisterRouterRequest &request) {
  if (request.router_id().empty()) {
    return absl::InvalidArgumentError("RegisterRouterRequest.router_id is empty");
  }
  if (request.address().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("RegisterRouterRequest.address is empty (router ", request.router_id(), ")"));
  }
  {
    absl::MutexLock lock(&mu_);
    RouterState &state = routers_[request.router_id()];
    state.registration = request;
    state.load.reset();
    state.last_seen = now_();
    state.last_sequence = 0;
    ++version_;
  }
  Notify();
  return absl::OkStatus();
}

absl::Status Registry::ReportRouterLoad(const v1::RouterLoadReport &report) {
  if (report.router_id().empty()) {
    return absl::InvalidArgumentError("RouterLoadReport.router_id is empty");
  }
  {
    absl::MutexLock lock(&mu_);
    auto it = routers_.find(report.router_id());
    if (it == routers_.end()) {
      return absl::NotFoundError(absl::StrCat("router ", report.router_id(), " is not registered"));
    }
    RouterState &state = it->second;
    if (report.sequence() != 0 && report.sequence() <= state.last_sequence) {
      return absl::OkStatus();
    }
    state.last_sequence = report.sequence();
    state.last_seen = now_();
    state.load = report;
    ++version_;
  }
  Notify();
  return absl::OkStatus();
}

bool Registry::SweepLocked(absl::Time now) {
  bool changed = false;
  for (auto it = workers_.begin(); it != workers_.end();) {
    WorkerState &state = it->second;
    if (now - state.last_seen > 2 * options_.worker_expiry) {
      it = workers_.erase(it);
      changed = true;
      continue;
    }
    const bool draining = state.entry.has_load() && state.entry.load().draining();
    const bool healthy = now - state.last_seen <= options_.worker_expiry && !draining;
    if (healthy != state.entry.healthy()) {
      state.entry.set_healthy(healthy);
      changed = true;
    }
    ++it;
  }
  for (auto it = routers_.begin(); it != routers_.end();) {
    if (now - it->second.last_seen > 2 * options_.router_expiry) {
      it = routers_.erase(it);
      changed = true;
    } else {
      ++it;
    }
  }
  if (changed) ++version_;
  return changed;
}

void Registry::Sweep() {
  {
    absl::MutexLock lock(&mu_);
    SweepLocked(now_());
  }
  Notify();
}

v1::WorkerTable Registry::WorkerTable(std::string_view model) const {
  v1::WorkerTable table;
  absl::MutexLock lock(&mu_);
  for (const auto &[id, state] : workers_) {
    if (!model.empty() && state.entry.info().model().id() != model) continue;
    *table.add_workers() = state.entry;
  }
  table.set_version(version_);
  *table.mutable_generated_at() = ToTimestamp(now_());
  return table;
}

RegistrySnapshot Registry::Snapshot() const {
  RegistrySnapshot snapshot;
  absl::MutexLock lock(&mu_);
  const absl::Time now = now_();
  for (const auto &[id, state] : workers_) {
    snapshot.workers.push_back({state.entry, now - state.last_seen <= options_.worker_expiry});
  }
  for (const auto &[id, state] : routers_) {
    snapshot.routers.push_back({id, state.load, now - state.last_seen <= options_.router_expiry});
  }
  snapshot.version = version_;
  return snapshot;
}

int64_t Registry::version() const {
  absl::MutexLock lock(&mu_);
  return version_;
}

int64_t Registry::Subscribe(Listener listener) {
  absl::MutexLock lock(&listeners_mu_);
  const int64_t id = next_listener_id_++;
  listeners_.emplace(id, std::move(listener));
  return id;
}

void Registry::Unsubscribe(int64_t id) {
  absl::MutexLock lock(&listeners_mu_);
  listeners_.erase(id);
}

void Registry::Notify() {
  absl::MutexLock lock(&listeners_mu_);
  for (auto &[id, listener] : listeners_) listener();
}

}  // namespace onecard::services::metrics
