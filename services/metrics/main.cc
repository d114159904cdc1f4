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
#include "services/common/command_line.h"
#include "services/common/config.h"
#include "services/common/server_main.h"
#include "services/common/service_auth_flags.h"
#include "services/metrics/metrics_service.h"

ABSL_FLAG(std::string, config, "", "cluster config file (YAML or JSON); its metrics section");
ABSL_FLAG(std::string, listen, "", "gRPC listen address (overrides metrics.listen_address)");
ABSL_FLAG(std::string, metrics_listen, "",
          "/metrics listen address (overrides metrics.metrics_listen_address)");

namespace onecard::services::metrics {

const CommandLineSpec kCommandLine = {
    .program = "onecard-metrics",
    .usage = {"[--config cluster.yaml] [--listen HOST:PORT] [flags]"},
    .description =
        "The control plane: the registry of workers and routers, the worker table routers\n"
        "watch, and aggregated gauges on /metrics for Prometheus and the HPA. Runs in the\n"
        "foreground until SIGTERM or Ctrl-C. Prints \"LISTENING grpc ADDR\" and\n"
        "\"LISTENING metrics ADDR\" once serving.",
    .groups = {{"Configuration", {"config"}},
               {"Network", {"listen", "metrics_listen"}},
               ServiceIdentityFlagGroup()},
    .epilog = ServiceHelpEpilog(),
    .flags_only = true};

namespace {

absl::StatusOr<MetricsServiceOptions> OptionsFromFlags() {
  ASSIGN_OR_RETURN(v1::MetricsServiceConfig config, LoadServiceConfig<v1::MetricsServiceConfig>(
                                                        absl::GetFlag(FLAGS_config), "metrics"));
  ApplyLogConfig(config.log());
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
  const onecard::services::CommandLine cli =
      onecard::services::ParseCommandLine(onecard::services::metrics::kCommandLine, argc, argv);
  if (cli.exit_code) return *cli.exit_code;
  return onecard::services::metrics::Run(**signals);
}
