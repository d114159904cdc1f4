// onecard.v1.ControlPlane over the Registry; see control_service.h.
// Tested by tests/services/metrics/control_service_test.cc.
#include "services/metrics/control_service.h"

#include <functional>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "engine/common/log.h"
#include "google/protobuf/duration.pb.h"
#include "services/common/status.h"

namespace onecard::services::metrics {
namespace {

void SetDuration(absl::Duration d, google::protobuf::Duration *out) {
  const int64_t nanos = absl::ToInt64Nanoseconds(d);
  out->set_seconds(nanos / 1000000000);
  out->set_nanos(static_cast<int32_t>(nanos % 1000000000));
}

// One client stream of load reports, applied one by one as they arrive;
// `on_end` (optional) runs once, when the stream ends (before its status
// goes out, so the client sees the effect when it has the status). Made
// with a refusal, it ends the stream at once with that status.
template <typename Report>
class ReportReactor final : public grpc::ServerReadReactor<Report> {
 public:
  using Apply = std::function<absl::Status(const Report &)>;

  ReportReactor(Apply apply, std::function<void()> on_end)
      : apply_(std::move(apply)), on_end_(std::move(on_end)) {
    this->StartRead(&report_);
  }
  explicit ReportReactor(const absl::Status &refusal) { this->Finish(ToGrpcStatus(refusal)); }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the client half-closed, or the call ended
      End(grpc::Status::OK);
      return;
    }
    const absl::Status status = apply_(report_);
    if (!status.ok()) {
      End(ToGrpcStatus(status));
      return;
    }
    this->StartRead(&report_);
  }

  void OnDone() override {
    if (on_end_) on_end_();  // not run yet: the call ended without a last read
    delete this;
  }

 private:
  void End(grpc::Status status) {
    if (on_end_) std::exchange(on_end_, nullptr)();
    this->Finish(std::move(status));
  }

  const Apply apply_;
  std::function<void()> on_end_;
  Report report_;
};

// A WatchWorkers call refused before any table.
class RefusedWatch final : public grpc::ServerWriteReactor<v1::WorkerTable> {
 public:
  explicit RefusedWatch(const absl::Status &refusal) { Finish(ToGrpcStatus(refusal)); }
  void OnDone() override { delete this; }
};

// What a worker's report stream last applied to: the registration that
// WorkerLeft forgets when the stream ends.
struct ReportedRegistration {
  std::string worker_id;
  int64_t registration = 0;  // 0: nothing applied
};

// One WatchWorkers stream; see control_service.h for the sending rules.
class WatchReactor final : public grpc::ServerWriteReactor<v1::WorkerTable> {
 public:
  WatchReactor(Registry *registry, ClusterMetrics *metrics, std::string model,
               absl::Duration min_interval)
      : registry_(registry),
        metrics_(metrics),
        model_(std::move(model)),
        min_interval_(min_interval) {
    metrics_->WatchStreamOpened();
    subscription_ = registry_->Subscribe([this] { MaybeWrite(); });
    MaybeWrite();
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    if (!ok) {
      FinishLocked(grpc::Status(grpc::StatusCode::UNAVAILABLE, "worker table write failed"));
      return;
    }
    WriteLocked();
  }

  void OnCancel() override {
    absl::MutexLock lock(&mu_);
    FinishLocked(grpc::Status::CANCELLED);
  }

  void OnDone() override {
    registry_->Unsubscribe(subscription_);  // no listener call runs after this
    metrics_->WatchStreamClosed();
    delete this;
  }

 private:
  void MaybeWrite() {
    absl::MutexLock lock(&mu_);
    WriteLocked();
  }

  void WriteLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_ || writing_) return;
    if (registry_->version() == sent_version_) return;
    const absl::Time now = registry_->Now();
    if (now < registry_->published_from()) return;  // warming up: a later Tick sends
    if (sent_version_ >= 0 && now - last_write_ < min_interval_) return;  // next Tick
    table_ = registry_->WorkerTable(model_);
    sent_version_ = table_.version();
    last_write_ = now;
    writing_ = true;
    StartWrite(&table_);
  }

  void FinishLocked(grpc::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_) return;
    finished_ = true;
    Finish(std::move(status));
  }

  Registry *const registry_;
  ClusterMetrics *const metrics_;
  const std::string model_;
  const absl::Duration min_interval_;
  int64_t subscription_ = 0;

  absl::Mutex mu_;
  v1::WorkerTable table_ ABSL_GUARDED_BY(mu_);  // the message being written
  int64_t sent_version_ ABSL_GUARDED_BY(mu_) = -1;
  absl::Time last_write_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace

ControlService::ControlService(Registry *registry, ClusterMetrics *metrics,
                               absl::Duration watch_min_interval,
                               std::shared_ptr<const ServiceAuth> auth)
    : registry_(registry),
      metrics_(metrics),
      watch_min_interval_(watch_min_interval),
      auth_(std::move(auth)) {}

absl::StatusOr<std::string> ControlService::Authorize(const grpc::CallbackServerContext &context,
                                                      ServiceRole role, const char *method) const {
  if (auth_ == nullptr) return std::string();
  absl::StatusOr<ServicePeer> peer = auth_->Authorize(context, role);
  if (peer.ok()) return peer->identity;
  Log(LogLevel::kWarn, "metrics", "refused %s from %s: %s", method, context.peer(),
      peer.status().ToString());
  return peer.status();
}

void ControlService::Tick() { registry_->Sweep(); }

grpc::ServerUnaryReactor *ControlService::RegisterWorker(grpc::CallbackServerContext *context,
                                                         const v1::RegisterWorkerRequest *request,
                                                         v1::RegisterWorkerResponse *response) {
  absl::StatusOr<std::string> owner = Authorize(*context, ServiceRole::kWorker, "RegisterWorker");
  absl::Status status = owner.status();
  if (owner.ok()) {
    status = registry_->RegisterWorker(*request, *owner);
    if (!status.ok()) {
      Log(LogLevel::kWarn, "metrics", "refused RegisterWorker from %s: %s", context->peer(),
          status.ToString());
    }
  }
  if (status.ok()) {
    metrics_->CountRegistration(ClientKind::kWorker);
    SetDuration(registry_->options().report_interval, response->mutable_report_interval());
  }
  grpc::ServerUnaryReactor *reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

grpc::ServerReadReactor<v1::WorkerLoadReport> *ControlService::ReportWorkerLoad(
    grpc::CallbackServerContext *context, v1::ReportLoadResponse * /*response*/) {
  absl::StatusOr<std::string> owner = Authorize(*context, ServiceRole::kWorker, "ReportWorkerLoad");
  if (!owner.ok()) return new ReportReactor<v1::WorkerLoadReport>(owner.status());
  auto applied = std::make_shared<ReportedRegistration>();
  return new ReportReactor<v1::WorkerLoadReport>(
      [this, owner = *owner, applied](const v1::WorkerLoadReport &r) {
        int64_t registration = 0;
        absl::Status status = registry_->ReportWorkerLoad(r, owner, &registration);
        if (!status.ok()) return status;
        metrics_->CountLoadReport(ClientKind::kWorker);
        *applied = {r.worker_id(), registration};
        return status;
      },
      [this, applied] {
        if (applied->registration != 0) {
          registry_->WorkerLeft(applied->worker_id, applied->registration);
        }
      });
}

grpc::ServerUnaryReactor *ControlService::RegisterRouter(grpc::CallbackServerContext *context,
                                                         const v1::RegisterRouterRequest *request,
                                                         v1::RegisterRouterResponse *response) {
  absl::StatusOr<std::string> owner = Authorize(*context, ServiceRole::kRouter, "RegisterRouter");
  const absl::Status status = owner.ok() ? registry_->RegisterRouter(*request) : owner.status();
  if (status.ok()) {
    metrics_->CountRegistration(ClientKind::kRouter);
    SetDuration(registry_->options().report_interval, response->mutable_report_interval());
  }
  grpc::ServerUnaryReactor *reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

grpc::ServerReadReactor<v1::RouterLoadReport> *ControlService::ReportRouterLoad(
    grpc::CallbackServerContext *context, v1::ReportLoadResponse * /*response*/) {
  absl::StatusOr<std::string> owner = Authorize(*context, ServiceRole::kRouter, "ReportRouterLoad");
  if (!owner.ok()) return new ReportReactor<v1::RouterLoadReport>(owner.status());
  return new ReportReactor<v1::RouterLoadReport>(
      [this](const v1::RouterLoadReport &r) {
        absl::Status status = registry_->ReportRouterLoad(r);
        if (status.ok()) metrics_->CountLoadReport(ClientKind::kRouter);
        return status;
      },
      nullptr);
}

grpc::ServerWriteReactor<v1::WorkerTable> *ControlService::WatchWorkers(
    grpc::CallbackServerContext *context, const v1::WatchWorkersRequest *request) {
  absl::StatusOr<std::string> owner = Authorize(*context, ServiceRole::kRouter, "WatchWorkers");
  if (!owner.ok()) return new RefusedWatch(owner.status());
  return new WatchReactor(registry_, metrics_, request->model(), watch_min_interval_);
}

}  // namespace onecard::services::metrics
