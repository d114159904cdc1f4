// WorkerServer: a whole worker in one object (what main() runs, and what
// in-process tests start): the gRPC server (Worker, Generation and
// grpc.health.v1 services), /metrics, the engine and the load reporter.
//
// Life cycle:
//   Create     binds gRPC and /metrics (port 0 picks free ports); health is
//              NOT_SERVING and requests get UNAVAILABLE while loading.
//   LoadEngine loads the model; then SERVING, and load reports start.
//   Drain      (SIGTERM) health NOT_SERVING, new requests UNAVAILABLE,
//              in-flight streams finish within the grace period (the rest
//              are cancelled), then Shutdown.
//   Shutdown   stops reporting, closes gRPC (open calls are cancelled),
//              destroys the engine, closes /metrics. Idempotent.
// Tested by tests/services/worker/worker_server_test.cc (real engine on the
// CPU backend) and worker_main_test.cc (the onecard-worker process).
#ifndef ONECARD_SERVICES_WORKER_WORKER_SERVER_H_
#define ONECARD_SERVICES_WORKER_WORKER_SERVER_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "engine/runtime/engine.h"
#include "grpcpp/server.h"
#include "onecard/v1/config.pb.h"
#include "prometheus/collectable.h"
#include "prometheus/registry.h"
#include "services/common/metrics_server.h"
#include "services/common/service_auth.h"
#include "services/worker/load_reporter.h"
#include "services/worker/worker_core.h"
#include "services/worker/worker_metrics.h"
#include "services/worker/worker_service.h"

namespace onecard::services {

using EngineFactory =
    std::function<absl::StatusOr<std::unique_ptr<engine::Engine>>(const engine::EngineOptions&)>;

struct WorkerServerOptions {
  v1::WorkerConfig config;       // defaults are applied by Create
  EngineFactory engine_factory;  // empty: engine::Engine::Create
};

class WorkerServer {
 public:
  static absl::StatusOr<std::unique_ptr<WorkerServer>> Create(WorkerServerOptions options);
  ~WorkerServer();

  absl::Status LoadEngine();
  // Returns the engine's drain status (DeadlineExceeded-like when requests
  // had to be cancelled at the end of the grace period).
  absl::Status Drain(absl::Duration grace_period);
  void Shutdown();

  const std::string& address() const { return address_; }  // bound host:port
  const std::string& advertised_address() const { return advertised_; }
  // The bound /metrics address; empty when metrics_listen_address is "none".
  const std::string& metrics_address() const { return metrics_address_; }
  const std::string& worker_id() const { return worker_id_; }
  const v1::WorkerConfig& config() const { return config_; }
  WorkerCore& core() { return *core_; }
  engine::Engine* engine() { return engine_.get(); }
  LoadReporter* reporter() { return reporter_.get(); }

 private:
  explicit WorkerServer(WorkerServerOptions options);
  absl::Status StartServers();
  void SetServing(bool serving);
  void StartReporter();

  v1::WorkerConfig config_;
  EngineFactory engine_factory_;
  std::string address_;
  std::string advertised_;
  std::string metrics_address_;
  std::string worker_id_;

  std::shared_ptr<const ServiceAuth> auth_;
  std::unique_ptr<MetricsServer> metrics_server_;  // null when not served
  prometheus::Registry unserved_registry_;         // the metrics then
  std::unique_ptr<WorkerMetrics> metrics_;
  std::unique_ptr<WorkerCore> core_;
  std::shared_ptr<prometheus::Collectable> engine_gauges_;
  std::unique_ptr<WorkerService> worker_service_;
  std::unique_ptr<GenerationService> generation_service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<engine::Engine> engine_;
  std::unique_ptr<LoadReporter> reporter_;
  // reporter_ once started, for streams ending on other threads.
  std::atomic<LoadReporter*> reporter_ready_{nullptr};
  bool shut_down_ = false;
};

}  // namespace onecard::services

#endif  // ONECARD_SERVICES_WORKER_WORKER_SERVER_H_
