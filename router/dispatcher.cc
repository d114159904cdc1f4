// Dispatcher (see dispatcher.h). Tested by tests/router/dispatcher_test.cc.
#include "router/dispatcher.h"

#include <algorithm>
#include <cassert>

#include "absl/strings/str_cat.h"

namespace onecard::router {
namespace {
constexpr size_t kPumpWindow = 64;  // queue entries looked at per pass
}  // namespace

Dispatcher::Dispatcher(const QueueOptions& queue_options, const WorkerPoolOptions& pool_options,
                       const Clock* clock)
    : clock_(clock), queue_(queue_options), pool_(pool_options, clock) {}

void Dispatcher::Run(Ready& ready) {
  for (auto& [callback, result] : ready) callback(std::move(result));
}

absl::Status Dispatcher::Enqueue(Pending pending, bool ignore_bounds) {
  const DispatchRequest& r = pending.request;
  // A first submission waits for a worker in the queue; a retry with
  // nowhere else to go ends now.
  if (!pending.exclude.empty() && !pool_.AnyUsable(pending.exclude)) {
    return absl::UnavailableError("no healthy worker");
  }
  QueueEntry entry{r.id, r.priority, r.cost_tokens, pending.first_enqueued, r.deadline};
  absl::Status status = queue_.Push(entry, ignore_bounds);
  if (!status.ok()) return status;
  assert(!pending_.contains(r.id) && "request ids are unique while queued");
  pending_.emplace(r.id, std::move(pending));
  return absl::OkStatus();
}

absl::Status Dispatcher::Submit(DispatchRequest request) {
  Ready ready;
  absl::Status status;
  {
    absl::MutexLock lock(&mu_);
    status = Enqueue(Pending{std::move(request), clock_->Now(), {}}, false);
    if (status.ok()) Pump(ready);
  }
  Run(ready);
  return status;
}

absl::Status Dispatcher::Resubmit(DispatchRequest request, absl::Time first_enqueued,
                                  absl::flat_hash_set<std::string> exclude) {
  Ready ready;
  absl::Status status;
  {
    absl::MutexLock lock(&mu_);
    status = Enqueue(Pending{std::move(request), first_enqueued, std::move(exclude)}, true);
    if (status.ok()) Pump(ready);
  }
  Run(ready);
  return status;
}

void Dispatcher::End(uint64_t id, absl::StatusOr<Assignment> result, Ready& ready) {
  auto it = pending_.find(id);
  assert(it != pending_.end() && "End is called once per pending request");
  ready.emplace_back(std::move(it->second.request.on_done), std::move(result));
  pending_.erase(it);
}

bool Dispatcher::Cancel(uint64_t id) {
  Ready ready;
  {
    absl::MutexLock lock(&mu_);
    if (!queue_.Remove(id).has_value()) return false;
    End(id, absl::CancelledError("cancelled while queued"), ready);
  }
  Run(ready);
  return true;
}

void Dispatcher::Pump(Ready& ready) {
  const absl::Time now = clock_->Now();
  size_t window = kPumpWindow;
  while (!queue_.empty()) {
    bool progress = false;
    std::vector<uint64_t> ids;
    for (const QueueEntry* e : queue_.InOrder(window)) ids.push_back(e->id);
    for (uint64_t id : ids) {
      Pending& p = pending_.at(id);
      if (std::optional<WorkerPool::Picked> w = pool_.Pick(p.request.affinity_hash, p.exclude)) {
        queue_.Remove(id);
        End(id, Assignment{w->id, w->address, now - p.first_enqueued}, ready);
        progress = true;
      } else if (!p.exclude.empty() && !pool_.AnyUsable(p.exclude)) {
        queue_.Remove(id);
        End(id, absl::UnavailableError("no healthy worker left for the request"), ready);
        progress = true;
      } else if (p.exclude.empty()) {
        return;  // no room for it, so none for the entries behind it either
      }
    }
    // Only retries that exclude the workers with room were looked at: look
    // further down the queue.
    if (!progress) {
      if (ids.size() < window) return;
      window *= 2;
    }
  }
}

void Dispatcher::ExpireQueued(Ready& ready) {
  const absl::Time now = clock_->Now();
  const std::string timeout = absl::FormatDuration(queue_.options().queue_timeout);
  for (QueueEntry& e : queue_.Expire(now)) {
    bool own_deadline =
        e.deadline <= now && e.deadline <= e.enqueued + queue_.options().queue_timeout;
    absl::Status status =
        own_deadline ? absl::DeadlineExceededError("deadline passed while queued in the router")
        : pool_.AnyUsable(pending_.at(e.id).exclude)
            ? absl::DeadlineExceededError(
                  absl::StrCat("waited in the router queue past the queue timeout (", timeout, ")"))
            : absl::UnavailableError(
                  absl::StrCat("no healthy worker within the queue timeout (", timeout, ")"));
    End(e.id, std::move(status), ready);
  }
}

void Dispatcher::Finish(const std::string& worker_id, CallOutcome outcome) {
  Ready ready;
  {
    absl::MutexLock lock(&mu_);
    pool_.Finish(worker_id, outcome);
    Pump(ready);
  }
  Run(ready);
}

void Dispatcher::SetWorkers(const std::vector<WorkerDesc>& workers) {
  Ready ready;
  {
    absl::MutexLock lock(&mu_);
    pool_.SetWorkers(workers);
    Pump(ready);
  }
  Run(ready);
}

void Dispatcher::Tick() {
  Ready ready;
  {
    absl::MutexLock lock(&mu_);
    ExpireQueued(ready);
    Pump(ready);
  }
  Run(ready);
}

absl::Time Dispatcher::NextWakeTime() {
  absl::MutexLock lock(&mu_);
  if (queue_.empty()) return absl::InfiniteFuture();
  return std::min(queue_.NextExpiry(), pool_.NextProbeTime());
}

std::array<int64_t, kNumPriorityClasses> Dispatcher::QueueDepths() {
  absl::MutexLock lock(&mu_);
  return {queue_.depth(PriorityClass::kInteractive), queue_.depth(PriorityClass::kStandard),
          queue_.depth(PriorityClass::kBatch)};
}

std::vector<WorkerSnapshot> Dispatcher::Workers() {
  absl::MutexLock lock(&mu_);
  return pool_.Snapshot();
}

bool Dispatcher::AnyUsableWorker() {
  absl::MutexLock lock(&mu_);
  return pool_.AnyUsable({});
}

std::string Dispatcher::CheckInvariants() {
  absl::MutexLock lock(&mu_);
  if (std::string q = queue_.CheckInvariants(); !q.empty()) return "queue: " + q;
  if (std::string w = pool_.CheckInvariants(); !w.empty()) return "pool: " + w;
  if (static_cast<int64_t>(pending_.size()) != queue_.depth()) {
    return absl::StrCat("pending ", pending_.size(), " != queued ", queue_.depth());
  }
  for (const QueueEntry* e : queue_.InOrder(pending_.size())) {
    if (!pending_.contains(e->id)) return absl::StrCat("queued id ", e->id, " not pending");
  }
  return "";
}

}  // namespace onecard::router
