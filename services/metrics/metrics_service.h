// MetricsService: the onecard-metrics process in one object. It owns the
// Registry, the ControlPlane gRPC server (with grpc.health.v1), the /metrics
// endpoint (ClusterMetrics), and a ticker thread that applies expiry and
// flushes watch streams every watch_min_interval.
//
// Nothing here is on the token path: workers and routers only send to it and
// watch it; when it stops, routers keep their last worker table and workers
// keep serving (tests/integration/ops_control_plane_outage_test.cc).
//
// Config (onecard.v1.MetricsServiceConfig; zero fields take the defaults):
//   listen_address "0.0.0.0:50060", metrics_listen_address "0.0.0.0:9402",
//   worker_expiry 2s, router_expiry 2s, report_interval 250ms,
//   watch_min_interval 100ms, table_warmup 6s (no worker table is sent for
//   that long after a start). A duration outside its range (config.proto:
//   intervals at least 10ms) is InvalidArgument naming the field.
// Tested by tests/services/metrics/metrics_service_test.cc.
#ifndef ONECARD_SERVICES_METRICS_METRICS_SERVICE_H_
#define ONECARD_SERVICES_METRICS_METRICS_SERVICE_H_

#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/server.h"
#include "onecard/v1/config.pb.h"
#include "services/common/metrics_server.h"
#include "services/metrics/cluster_metrics.h"
#include "services/metrics/control_service.h"
#include "services/metrics/registry.h"

namespace onecard::services::metrics {

struct MetricsServiceOptions {
  std::string listen_address;
  std::string metrics_listen_address;
  RegistryOptions registry;
  absl::Duration watch_min_interval;
  v1::ServiceAuthConfig service_auth;  // who may call (ServiceAuth); empty: anyone
};

// Applies the defaults and checks the config; errors name the field.
absl::StatusOr<MetricsServiceOptions> ResolveOptions(const v1::MetricsServiceConfig &config);

class MetricsService {
 public:
  // Binds both listeners and starts serving. `now` is the registry's clock.
  static absl::StatusOr<std::unique_ptr<MetricsService>> Start(
      const MetricsServiceOptions &options, Registry::NowFunction now = absl::Now);
  ~MetricsService();

  // Reports NOT_SERVING, ends the watch and report streams (clients see
  // UNAVAILABLE or CANCELLED and keep what they have), stops. Idempotent.
  void Shutdown();

  const std::string &grpc_address() const { return grpc_address_; }
  const std::string &metrics_address() const { return metrics_->address(); }
  Registry &registry() { return *registry_; }

 private:
  MetricsService() = default;
  void TickLoop(absl::Duration interval);

  std::unique_ptr<Registry> registry_;
  std::shared_ptr<ClusterMetrics> cluster_metrics_;
  std::unique_ptr<ControlService> control_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<MetricsServer> metrics_;
  std::string grpc_address_;
  std::thread ticker_;

  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace onecard::services::metrics

#endif  // ONECARD_SERVICES_METRICS_METRICS_SERVICE_H_
