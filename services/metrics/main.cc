// onecard-metrics: the control plane (worker/router registry, worker table
// watch, aggregated Prometheus gauges). Usage:
//   onecard-metrics [--config cluster.yaml] [--listen HOST:PORT]
//                   [--metrics_listen HOST:PORT] [service identity flags:
//                   services/common/service_auth_flags.h]
// --config reads an onecard.v1.OnecardConfig (YAML or JSON) and uses its
// `metrics` section, or a bare MetricsServiceConfig; the flags override
// single fields. Prints
// "LISTENING grpc|metrics HOST:PORT" once serving; SIGTERM/SIGINT stop it.
// Tested end to end by tests/integration/ops_*_test.cc.
#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "engine/common/log.h"
#include "engine/common/status_macros.h"
#include "onecard/v1/config.pb.h"
#include "services/common/config.h"
#include "services/common/flag_names.h"
#include "services/common/server_main.h"
#include "services/common/service_auth_flags.h"
#include "services/metrics/metrics_service.h"

ABSL_FLAG(std::string, config, "", "cluster config file (YAML or JSON); its metrics section");
ABSL_FLAG(std::string, listen, "", "gRPC listen address (overrides metrics.listen_address)");
ABSL_FLAG(std::string, metrics_listen, "",
          "/metrics listen address (overrides metrics.metrics_listen_address)");

namespace onecard::services::metrics {
namespace {

// An OnecardConfig with a `metrics:` section, or a bare MetricsServiceConfig.
absl::StatusOr<v1::MetricsServiceConfig> LoadFileConfig(const std::string &path) {
  v1::MetricsServiceConfig config;
  if (path.empty()) return config;
  v1::OnecardConfig whole;
  const absl::Status as_whole = LoadConfigFile(path, &whole);
  if (as_whole.ok() && whole.has_metrics()) return whole.metrics();
  const absl::Status as_metrics = LoadConfigFile(path, &config);
  if (as_metrics.ok()) return config;
  return absl::StrContains(as_metrics.message(), ": metrics: ") ? as_whole : as_metrics;
}

absl::StatusOr<MetricsServiceOptions> OptionsFromFlags() {
  ASSIGN_OR_RETURN(v1::MetricsServiceConfig config, LoadFileConfig(absl::GetFlag(FLAGS_config)));
  if (!absl::GetFlag(FLAGS_listen).empty()) {
    config.set_listen_address(absl::GetFlag(FLAGS_listen));
  }
  if (!absl::GetFlag(FLAGS_metrics_listen).empty()) {
    config.set_metrics_listen_address(absl::GetFlag(FLAGS_metrics_listen));
  }
  OverrideServiceAuthFromFlags(config.mutable_service_auth());
  return ResolveOptions(config);
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
  onecard::services::ParseFlags(argc, argv);  // --a-flag or --a_flag
  return onecard::services::metrics::Run(**signals);
}
