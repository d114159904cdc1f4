// The onecard-metrics process in one object; see metrics_service.h.
// Tested by tests/services/metrics/metrics_service_test.cc.
#include "services/metrics/metrics_service.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "engine/common/log.h"
#include "engine/common/status_macros.h"
#include "google/protobuf/duration.pb.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/server_builder.h"
#include "services/common/config_bounds.h"
#include "services/common/server_main.h"

namespace onecard::services::metrics {
namespace {

constexpr char kServiceName[] = "onecard.v1.ControlPlane";

// A config duration with its default (when zero), in [lo, hi]; an error
// names `field` and the range.
absl::StatusOr<absl::Duration> DurationOr(const google::protobuf::Duration &d,
                                          absl::string_view field, absl::Duration def,
                                          absl::Duration lo, absl::Duration hi) {
  absl::Duration value = absl::Seconds(d.seconds()) + absl::Nanoseconds(d.nanos());
  if (value == absl::ZeroDuration()) value = def;
  RETURN_IF_ERROR(CheckDurationRange(absl::StrCat("metrics.", field), value, lo, hi));
  return value;
}

}  // namespace

absl::StatusOr<MetricsServiceOptions> ResolveOptions(const v1::MetricsServiceConfig &config) {
  MetricsServiceOptions options;
  options.listen_address =
      config.listen_address().empty() ? "0.0.0.0:50060" : config.listen_address();
  options.metrics_listen_address =
      config.metrics_listen_address().empty() ? "0.0.0.0:9402" : config.metrics_listen_address();
  RETURN_IF_ERROR(ParseHostPort(options.listen_address).status());
  RETURN_IF_ERROR(ParseHostPort(options.metrics_listen_address).status());
  const absl::Duration floor = kMinConfigInterval;
  ASSIGN_OR_RETURN(options.registry.worker_expiry,
                   DurationOr(config.worker_expiry(), "worker_expiry", absl::Seconds(2),
                              absl::Milliseconds(100), absl::Hours(1)));
  ASSIGN_OR_RETURN(options.registry.router_expiry,
                   DurationOr(config.router_expiry(), "router_expiry", absl::Seconds(2),
                              absl::Milliseconds(100), absl::Hours(1)));
  ASSIGN_OR_RETURN(options.registry.report_interval,
                   DurationOr(config.report_interval(), "report_interval", absl::Milliseconds(250),
                              floor, absl::Minutes(1)));
  ASSIGN_OR_RETURN(options.watch_min_interval,
                   DurationOr(config.watch_min_interval(), "watch_min_interval",
                              absl::Milliseconds(100), floor, absl::Minutes(1)));
  ASSIGN_OR_RETURN(options.registry.table_warmup,
                   DurationOr(config.table_warmup(), "table_warmup", absl::Seconds(6),
                              absl::ZeroDuration(), absl::Minutes(10)));
  options.service_auth = config.service_auth();
  return options;
}

absl::StatusOr<std::unique_ptr<MetricsService>> MetricsService::Start(
    const MetricsServiceOptions &options, Registry::NowFunction now) {
  std::unique_ptr<MetricsService> service(new MetricsService());
  ASSIGN_OR_RETURN(
      std::shared_ptr<const ServiceAuth> auth,
      ServiceAuth::Create(
          {options.service_auth, "metrics", {ServiceRole::kWorker, ServiceRole::kRouter}}));
  service->registry_ = std::make_unique<Registry>(options.registry, std::move(now));
  service->cluster_metrics_ = std::make_shared<ClusterMetrics>(service->registry_.get());
  service->control_ = std::make_unique<ControlService>(
      service->registry_.get(), service->cluster_metrics_.get(), options.watch_min_interval, auth);

  ASSIGN_OR_RETURN(service->metrics_,
                   MetricsServer::Start(options.metrics_listen_address, "metrics"));
  service->metrics_->Add(service->cluster_metrics_);

  EnableStandardGrpcServices();
  grpc::ServerBuilder builder;
  builder.RegisterService(service->control_.get());
  ASSIGN_OR_RETURN(StartedServer started,
                   StartGrpcServer(&builder, options.listen_address, auth->ServerCredentials()));
  service->server_ = std::move(started.server);
  service->grpc_address_ = started.address;
  grpc::HealthCheckServiceInterface *health = service->server_->GetHealthCheckService();
  if (health != nullptr) {
    health->SetServingStatus(true);
    health->SetServingStatus(kServiceName, true);
  }
  service->ticker_ = std::thread(
      [s = service.get(), interval = options.watch_min_interval] { s->TickLoop(interval); });
  Log(LogLevel::kInfo, "metrics", "control plane on %s, /metrics on %s", service->grpc_address_,
      service->metrics_->address());
  return service;
}

MetricsService::~MetricsService() { Shutdown(); }

void MetricsService::TickLoop(absl::Duration interval) {
  absl::MutexLock lock(&mu_);
  while (!mu_.AwaitWithTimeout(absl::Condition(&stopping_), interval)) {
    mu_.Unlock();
    control_->Tick();
    mu_.Lock();
  }
}

void MetricsService::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  if (ticker_.joinable()) ticker_.join();
  if (server_ != nullptr) {
    grpc::HealthCheckServiceInterface *health = server_->GetHealthCheckService();
    if (health != nullptr) health->SetServingStatus(false);
    // Watch and report streams never end on their own: a short deadline
    // cancels them, and their clients keep what they have.
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
    server_->Wait();
  }
  Log(LogLevel::kInfo, "metrics", "stopped");
}

}  // namespace onecard::services::metrics
