// onecard.v1.ControlPlane over the Registry; see control_service.h.
// Tested by tests/services/metrics/control_service_test.cc.
#include "services/metrics/control_service.h"

#include <functional>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "google/protobuf/duration.pb.h"
#include "services/common/status.h"

namespace onecard::services::metrics {
namespace {

void SetDuration(absl::Duration d, google::protobuf::Duration *out) {
  const int64_t nanos = absl::ToInt64Nanoseconds(d);
  out->set_seconds(nanos / 1000000000);
  out->set_nanos(static_cast<int32_t>(nanos % 1000000000));
}

// One client stream of load reports, applied one by one as they arrive.
template <typename Report>
class ReportReactor final : public grpc::ServerReadReactor<Report> {
 public:
  using Apply = std::function<absl::Status(const Report &)>;

  explicit ReportReactor(Apply apply) : apply_(std::move(apply)) { this->StartRead(&report_); }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the client half-closed, or the call ended
      this->Finish(grpc::Status::OK);
      return;
    }
    const absl::Status status = apply_(report_);
    if (!status.ok()) {
      this->Finish(ToGrpcStatus(status));
      return;
    }
    this->StartRead(&report_);
  }

  void OnDone() override { delete this; }

 private:
  const Apply apply_;
  Report report_;
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
                               absl::Duration watch_min_interval)
    : registry_(registry), metrics_(metrics), watch_min_interval_(watch_min_interval) {}

void ControlService::Tick() { registry_->Sweep(); }

grpc::ServerUnaryReactor *ControlService::RegisterWorker(grpc::CallbackServerContext *context,
                                                         const v1::RegisterWorkerRequest *request,
                                                         v1::RegisterWorkerResponse *response) {
  const absl::Status status = registry_->RegisterWorker(*request);
  if (status.ok()) {
    metrics_->CountRegistration(ClientKind::kWorker);
    SetDuration(registry_->options().report_interval, response->mutable_report_interval());
  }
  grpc::ServerUnaryReactor *reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

grpc::ServerReadReactor<v1::WorkerLoadReport> *ControlService::ReportWorkerLoad(
    grpc::CallbackServerContext * /*context*/, v1::ReportLoadResponse * /*response*/) {
  return new ReportReactor<v1::WorkerLoadReport>([this](const v1::WorkerLoadReport &r) {
    absl::Status status = registry_->ReportWorkerLoad(r);
    if (status.ok()) metrics_->CountLoadReport(ClientKind::kWorker);
    return status;
  });
}

grpc::ServerUnaryReactor *ControlService::RegisterRouter(grpc::CallbackServerContext *context,
                                                         const v1::RegisterRouterRequest *request,
                                                         v1::RegisterRouterResponse *response) {
  const absl::Status status = registry_->RegisterRouter(*request);
  if (status.ok()) {
    metrics_->CountRegistration(ClientKind::kRouter);
    SetDuration(registry_->options().report_interval, response->mutable_report_interval());
  }
  grpc::ServerUnaryReactor *reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

grpc::ServerReadReactor<v1::RouterLoadReport> *ControlService::ReportRouterLoad(
    grpc::CallbackServerContext * /*context*/, v1::ReportLoadResponse * /*response*/) {
  return new ReportReactor<v1::RouterLoadReport>([this](const v1::RouterLoadReport &r) {
    absl::Status status = registry_->ReportRouterLoad(r);
    if (status.ok()) metrics_->CountLoadReport(ClientKind::kRouter);
    return status;
  });
}

grpc::ServerWriteReactor<v1::WorkerTable> *ControlService::WatchWorkers(
    grpc::CallbackServerContext * /*context*/, const v1::WatchWorkersRequest *request) {
  return new WatchReactor(registry_, metrics_, request->model(), watch_min_interval_);
}

}  // namespace onecard::services::metrics
