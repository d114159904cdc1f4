// ControlPlaneClient: the worker-table watch and the router's load reports
// (see control_plane_client.h). Tested by
// tests/router/control_plane_client_test.cc.
#include "router/control_plane_client.h"

#include <algorithm>

#include "engine/common/log.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "services/common/config_bounds.h"
#include "services/common/proto_time.h"

namespace onecard::router {

ControlPlaneClient::ControlPlaneClient(ControlPlaneOptions options, TableCallback on_table,
                                       LoadSource load)
    : options_(std::move(options)), on_table_(std::move(on_table)), load_(std::move(load)) {
  stub_ = onecard::v1::ControlPlane::NewStub(grpc::CreateChannel(
      options_.address, options_.auth != nullptr ? options_.auth->ChannelCredentials()
                                                 : grpc::InsecureChannelCredentials()));
}

ControlPlaneClient::~ControlPlaneClient() { Stop(); }

void ControlPlaneClient::Start() {
  watch_thread_ = std::thread([this] { WatchLoop(); });
  report_thread_ = std::thread([this] { ReportLoop(); });
}

void ControlPlaneClient::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_ && !watch_thread_.joinable() && !report_thread_.joinable()) return;
    stopping_ = true;
    if (watch_context_ != nullptr) watch_context_->TryCancel();
  }
  if (watch_thread_.joinable()) watch_thread_.join();
  if (report_thread_.joinable()) report_thread_.join();  // ends after a last report
}

bool ControlPlaneClient::Stopping() {
  absl::MutexLock lock(&mu_);
  return stopping_;
}

bool ControlPlaneClient::SleepFor(absl::Duration d) {
  absl::MutexLock lock(&mu_);
  auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; };
  return !mu_.AwaitWithTimeout(absl::Condition(&stopping), d);
}

void ControlPlaneClient::Attach(grpc::ClientContext* context) const {
  if (options_.auth != nullptr) options_.auth->Attach(services::ServiceRole::kRouter, context);
}

int64_t ControlPlaneClient::tables_received() const {
  absl::MutexLock lock(&mu_);
  return tables_received_;
}

int64_t ControlPlaneClient::reports_sent() const {
  absl::MutexLock lock(&mu_);
  return reports_sent_;
}

bool ControlPlaneClient::WatchOnce() {
  grpc::ClientContext context;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return false;
    watch_context_ = &context;
  }
  Attach(&context);
  onecard::v1::WatchWorkersRequest request;
  request.set_router_id(options_.router_id);
  request.set_model(options_.model);
  std::unique_ptr<grpc::ClientReader<onecard::v1::WorkerTable>> reader =
      stub_->WatchWorkers(&context, request);
  onecard::v1::WorkerTable table;
  bool any = false;
  while (reader->Read(&table)) {
    {
      absl::MutexLock lock(&mu_);
      ++tables_received_;
    }
    on_table_(table, /*first_of_stream=*/!any);
    any = true;
  }
  grpc::Status status = reader->Finish();
  {
    absl::MutexLock lock(&mu_);
    watch_context_ = nullptr;
  }
  if (!Stopping()) {
    Log(LogLevel::kWarn, "router", "worker watch on %s ended: %s (keeping the last table)",
        options_.address, status.error_message());
  }
  return any;
}

void ControlPlaneClient::WatchLoop() {
  absl::Duration backoff = options_.initial_backoff;
  while (!Stopping()) {
    if (WatchOnce()) backoff = options_.initial_backoff;
    if (!SleepFor(backoff)) return;
    backoff = std::min(backoff * 2, options_.max_backoff);
  }
}

bool ControlPlaneClient::ReportOnce() {
  onecard::v1::RegisterRouterRequest reg;
  reg.set_router_id(options_.router_id);
  reg.set_address(options_.advertise_address);
  reg.set_metrics_address(options_.metrics_address);
  onecard::v1::RegisterRouterResponse reg_response;
  grpc::ClientContext reg_context;
  reg_context.set_deadline(absl::ToChronoTime(absl::Now() + options_.rpc_timeout));
  Attach(&reg_context);
  if (!stub_->RegisterRouter(&reg_context, reg, &reg_response).ok()) return false;
  absl::Duration interval = options_.report_interval;
  if (reg_response.has_report_interval()) {
    absl::Duration asked = services::FromProtoDuration(reg_response.report_interval());
    if (asked > absl::ZeroDuration()) interval = std::min(interval, asked);
    interval = std::max(interval, services::kMinConfigInterval);  // never a spin
  }
  grpc::ClientContext context;
  Attach(&context);
  onecard::v1::ReportLoadResponse response;
  std::unique_ptr<grpc::ClientWriter<onecard::v1::RouterLoadReport>> writer =
      stub_->ReportRouterLoad(&context, &response);
  bool sent_any = false;
  int64_t sequence = 0;
  for (bool last = false; !last;) {
    last = Stopping();  // a stopping router sends one last report, then closes
    onecard::v1::RouterLoadReport report = load_();
    report.set_router_id(options_.router_id);
    report.set_address(options_.advertise_address);
    report.set_sequence(++sequence);
    services::ToProtoTimestamp(absl::Now(), report.mutable_timestamp());
    if (!writer->Write(report)) break;
    sent_any = true;
    {
      absl::MutexLock lock(&mu_);
      ++reports_sent_;
    }
    if (!last) SleepFor(interval);
  }
  writer->WritesDone();
  writer->Finish();
  return sent_any;
}

void ControlPlaneClient::ReportLoop() {
  absl::Duration backoff = options_.initial_backoff;
  while (!Stopping()) {
    if (ReportOnce()) backoff = options_.initial_backoff;
    if (!SleepFor(backoff)) return;
    backoff = std::min(backoff * 2, options_.max_backoff);
  }
}

}  // namespace onecard::router
