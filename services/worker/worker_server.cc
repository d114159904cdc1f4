// The worker assembled: servers, engine, reporter. See worker_server.h for
// the life cycle.
#include "services/worker/worker_server.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "engine/common/log.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/server_builder.h"
#include "services/common/proto_time.h"
#include "services/common/server_main.h"
#include "services/worker/worker_config.h"

namespace onecard::services {
namespace {

// metrics_listen_address value that serves no /metrics (tests).
constexpr char kNoMetrics[] = "none";

constexpr const char* kServiceNames[] = {"onecard.v1.Worker", "onecard.v1.Generation"};

// Finished streams still write their last chunk after the engine is done.
constexpr absl::Duration kLastWriteTime = absl::Seconds(5);
// What open calls get at Shutdown before gRPC cancels them.
constexpr absl::Duration kShutdownTime = absl::Seconds(1);

// Callers must be routers; the worker reports (when it does) as a worker.
absl::StatusOr<std::shared_ptr<const ServiceAuth>> WorkerAuth(const v1::WorkerConfig& config) {
  std::vector<ServiceRole> tokens = {ServiceRole::kRouter};
  if (!config.control_plane_address().empty()) tokens.push_back(ServiceRole::kWorker);
  return ServiceAuth::Create({config.service_auth(), "worker", tokens});
}

}  // namespace

WorkerServer::WorkerServer(WorkerServerOptions options)
    : config_(std::move(options.config)), engine_factory_(std::move(options.engine_factory)) {
  if (!engine_factory_) engine_factory_ = &engine::Engine::Create;
}

WorkerServer::~WorkerServer() { Shutdown(); }

absl::StatusOr<std::unique_ptr<WorkerServer>> WorkerServer::Create(WorkerServerOptions options) {
  ApplyWorkerDefaults(&options.config);
  if (absl::Status s = ValidateWorkerConfig(options.config); !s.ok()) return s;
  std::unique_ptr<WorkerServer> server(new WorkerServer(std::move(options)));
  if (absl::Status s = server->StartServers(); !s.ok()) return s;
  return server;
}

absl::Status WorkerServer::StartServers() {
  absl::StatusOr<std::shared_ptr<const ServiceAuth>> auth = WorkerAuth(config_);
  if (!auth.ok()) return auth.status();
  auth_ = *std::move(auth);
  if (config_.metrics_listen_address() != kNoMetrics) {
    absl::StatusOr<std::unique_ptr<MetricsServer>> metrics =
        MetricsServer::Start(config_.metrics_listen_address(), "worker");
    if (!metrics.ok()) return metrics.status();
    metrics_server_ = *std::move(metrics);
    metrics_address_ = metrics_server_->address();
  }
  metrics_ = std::make_unique<WorkerMetrics>(
      metrics_server_ != nullptr ? metrics_server_->registry() : unserved_registry_,
      ServedModelName(config_), config_.backend());
  core_ = std::make_unique<WorkerCore>(config_, metrics_.get());
  engine_gauges_ =
      WorkerMetrics::EngineCollectable([core = core_.get()] { return core->Snapshot(); });
  if (metrics_server_ != nullptr) metrics_server_->Add(engine_gauges_);

  worker_service_ = std::make_unique<WorkerService>(core_.get(), auth_);
  generation_service_ = std::make_unique<GenerationService>(core_.get(), auth_);
  EnableStandardGrpcServices();
  grpc::ServerBuilder builder;
  builder.RegisterService(worker_service_.get());
  builder.RegisterService(generation_service_.get());
  // Requests over max_request_bytes get INVALID_ARGUMENT naming the largest
  // field (services/common/request_convert.h); gRPC itself refuses past
  // twice that.
  builder.SetMaxReceiveMessageSize(
      static_cast<int>(std::min<int64_t>(2ll * config_.max_request_bytes(), INT32_MAX)));
  absl::StatusOr<StartedServer> started =
      StartGrpcServer(&builder, config_.listen_address(), auth_->ServerCredentials());
  if (!started.ok()) return started.status();
  server_ = std::move(started->server);
  address_ = started->address;
  SetServing(false);
  advertised_ = AdvertisedAddress(config_.advertise_address(), address_);
  worker_id_ = config_.worker_id().empty() ? advertised_ : config_.worker_id();
  return absl::OkStatus();
}

void WorkerServer::SetServing(bool serving) {
  grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService();
  if (health == nullptr) return;
  for (const char* name : kServiceNames) health->SetServingStatus(name, serving);
  health->SetServingStatus(serving);  // every service, and "" (the server)
}

absl::Status WorkerServer::LoadEngine() {
  engine::EngineOptions options = EngineOptionsFromConfig(config_);
  options.on_step = [metrics = metrics_.get()](const engine::StepInfo& step) {
    metrics->ObserveStep(step);
  };
  const absl::Time start = absl::Now();
  absl::StatusOr<std::unique_ptr<engine::Engine>> engine = engine_factory_(options);
  if (!engine.ok()) return engine.status();
  engine_ = *std::move(engine);
  core_->SetEngine(engine_.get(), worker_id_, [this] {
    if (LoadReporter* reporter = reporter_ready_.load(std::memory_order_acquire)) {
      reporter->Notify();
    }
  });
  Log(LogLevel::kInfo, "worker", "loaded %s (%s backend, context %d) in %.2f s",
      config_.model_path(), config_.backend(), engine_->max_context(),
      absl::ToDoubleSeconds(absl::Now() - start));
  StartReporter();
  SetServing(true);
  return absl::OkStatus();
}

void WorkerServer::StartReporter() {
  if (config_.control_plane_address().empty()) return;
  LoadReporterOptions options;
  options.control_plane_address = config_.control_plane_address();
  options.worker_id = worker_id_;
  options.address = advertised_;
  if (!metrics_address_.empty()) {
    options.metrics_address = AdvertisedAddress("", metrics_address_);
  }
  absl::StatusOr<v1::WorkerInfo> info = core_->Info();
  if (info.ok()) options.info = *std::move(info);
  options.interval = FromProtoDuration(config_.load_report_interval());
  options.initial_backoff = FromProtoDuration(config_.reconnect().initial_backoff());
  options.max_backoff = FromProtoDuration(config_.reconnect().max_backoff());
  options.auth = auth_;
  reporter_ = std::make_unique<LoadReporter>(std::move(options),
                                             [core = core_.get()] { return core->Snapshot(); });
  reporter_->Start();
  reporter_ready_.store(reporter_.get(), std::memory_order_release);
}

absl::Status WorkerServer::Drain(absl::Duration grace_period) {
  const absl::Time deadline = absl::Now() + grace_period;
  core_->SetDraining();
  SetServing(false);
  if (reporter_ != nullptr) reporter_->Notify();
  Log(LogLevel::kInfo, "worker", "draining: %d streams open, grace period %s",
      core_->active_streams(), absl::FormatDuration(grace_period));
  absl::Status status = absl::OkStatus();
  if (engine_ != nullptr) status = engine_->Drain(grace_period);
  const absl::Duration left = std::max(deadline - absl::Now(), absl::ZeroDuration());
  if (!core_->WaitForStreams(left + kLastWriteTime)) {
    Log(LogLevel::kWarn, "worker", "%d streams still open after the grace period",
        core_->active_streams());
  }
  Shutdown();
  return status;
}

void WorkerServer::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  if (reporter_ != nullptr) reporter_->Stop();
  if (server_ != nullptr) {
    SetServing(false);
    server_->Shutdown(absl::ToChronoTime(absl::Now() + kShutdownTime));
  }
  engine_.reset();          // cancels what is left; every request gets its final output
  metrics_server_.reset();  // no scrape reads the core past this point
}

}  // namespace onecard::services
