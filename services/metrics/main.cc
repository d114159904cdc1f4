// onecard-metrics: the control plane (worker/router registry, worker table
// watch, aggregated Prometheus gauges). Usage:
//   onecard-metrics [--config cluster.yaml] [--listen HOST:PORT]
//                   [--metrics_listen HOST:PORT]
// --config reads an onecard.v1.OnecardConfig (YAML or JSON) and uses its
// `metrics` section; the flags override single fields. Prints
// "LISTENING grpc|metrics HOST:PORT" once serving; SIGTERM/SIGINT stop it.
// Tested end to end by tests/integration/ops_*_test.cc.
#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/statusor.h"
#include "engine/common/log.h"
#include "engine/common/status_macros.h"
#include "onecard/v1/config.pb.h"
#include "services/common/config.h"
#include "services/common/server_main.h"
#include "services/metrics/metrics_service.h"

ABSL_FLAG(std::string, config, "", "cluster config file (YAML or JSON); its metrics section");
ABSL_FLAG(std::string, listen, "", "gRPC listen address (overrides metrics.listen_address)");
ABSL_FLAG(std::string, metrics_listen, "",
          "/metrics listen address (overrides metrics.metrics_listen_address)");

namespace onecard::services::metrics {
namespace {

absl::StatusOr<MetricsServiceOptions> OptionsFromFlags() {
  v1::OnecardConfig config;
  const std::string path = absl::GetFlag(FLAGS_config);
  if (!path.empty()) RETURN_IF_ERROR(LoadConfigFile(path, &config));
  v1::MetricsServiceConfig *metrics = config.mutable_metrics();
  if (!absl::GetFlag(FLAGS_listen).empty()) {
    metrics->set_listen_address(absl::GetFlag(FLAGS_listen));
  }
  if (!absl::GetFlag(FLAGS_metrics_listen).empty()) {
    metrics->set_metrics_listen_address(absl::GetFlag(FLAGS_metrics_listen));
  }
  return ResolveOptions(*metrics);
}

int Run(ShutdownSignals &signals) {
  absl::StatusOr<MetricsServiceOptions> options = OptionsFromFlags();
  if (!options.ok()) {
    Log(LogLevel::kError, "metrics", "bad configuration: %s", options.status().ToString());
    return 2;
  }
  absl::StatusOr<std::unique_ptr<MetricsService>> service = MetricsService::Start(*options);
  if (!service.ok()) {
    Log(LogLevel::kError, "metrics", "cannot start: %s", service.status().ToString());
    return 1;
  }
  AnnounceListening("grpc", (*service)->grpc_address());
  AnnounceListening("metrics", (*service)->metrics_address());
  const int signal = signals.Wait();
  Log(LogLevel::kInfo, "metrics", "signal %d: shutting down", signal);
  (*service)->Shutdown();
  return 0;
}

}  // namespace
}  // namespace onecard::services::metrics

int main(int argc, char **argv) {
  auto signals = onecard::services::ShutdownSignals::Install();
  if (!signals.ok()) {
    std::fprintf(stderr, "onecard-metrics: %s\n", signals.status().ToString().c_str());
    return 1;
  }
  absl::ParseCommandLine(argc, argv);
  return onecard::services::metrics::Run(**signals);
}
