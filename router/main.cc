// onecard-router: the public Generation API in front of the workers.
//   onecard-router --model models/SmolLM2-135M-Instruct.Q4_1.gguf \
//       --listen 127.0.0.1:50050 --static-workers 127.0.0.1:50051
// Configuration: --config FILE (an OnecardConfig with a `router:` section, or
// a bare RouterConfig; YAML or JSON), then flags override single fields.
// Prints "LISTENING grpc ADDR", "LISTENING http ADDR" (the OpenAI-compatible
// API, unless --http-listen none), "LISTENING metrics ADDR" and "READY" on
// stdout. SIGTERM/SIGINT: drain (refuse new requests, finish open ones
// within the grace period), exit 0. Exit 1 when it cannot start, 2 on a bad
// flag or config. Tested by tests/integration/router_*_test.cc.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "engine/common/log.h"
#include "engine/common/status_macros.h"
#include "onecard/v1/config.pb.h"
#include "router/router_server.h"
#include "services/common/command_line.h"
#include "services/common/config.h"
#include "services/common/proto_time.h"
#include "services/common/server_main.h"
#include "services/common/service_auth_flags.h"

ABSL_FLAG(std::string, config, "", "Config file (YAML or JSON)");
ABSL_FLAG(std::string, model, "", "Model whose tokenizer and chat template the router uses");
ABSL_FLAG(std::string, model_name, "", "Name requests use for the model (default: file stem)");
ABSL_FLAG(std::string, listen, "", "gRPC listen address (default 0.0.0.0:50050; port 0 = any)");
ABSL_FLAG(std::string, metrics_listen, "", "/metrics listen address (default 0.0.0.0:9401)");
ABSL_FLAG(std::string, http_listen, "",
          "OpenAI-compatible HTTP API listen address (default 0.0.0.0:8000; none: not served)");
ABSL_FLAG(int32_t, http_max_body_bytes, -1, "HTTP API: largest request body (default 32 MiB)");
ABSL_FLAG(int32_t, http_max_connections, -1,
          "HTTP API: connections served at once, a thread each (default 256)");
ABSL_FLAG(std::string, control_plane, "", "Control plane host:port (worker table, load reports)");
ABSL_FLAG(std::string, advertise, "", "Address peers dial (default: host:bound port)");
ABSL_FLAG(std::string, router_id, "", "Router id (default: the advertised address)");
ABSL_FLAG(std::string, static_workers, "", "Comma-separated worker host:port list (fallback)");
ABSL_FLAG(std::string, dns_workers, "", "host:port resolved to every worker address");
ABSL_FLAG(int32_t, max_in_flight_per_worker, -1,
          "Requests in flight per worker (0 = its max_num_seqs)");
ABSL_FLAG(int32_t, queue_max_depth, -1, "Router queue bound, all classes");
ABSL_FLAG(std::string, queue_timeout, "", "Longest wait in the router queue, e.g. 30s");
ABSL_FLAG(std::string, aging_step, "", "Queue aging: one class up per this much waiting, e.g. 5s");
ABSL_FLAG(std::string, fifo, "", "true: arrival order only (benchmark baseline)");
ABSL_FLAG(int32_t, default_max_tokens, -1, "max_tokens of requests that set none");
ABSL_FLAG(std::string, public_tls_cert, "", "TLS certificate of the public port (public_tls)");
ABSL_FLAG(std::string, public_tls_key, "", "Its private key (public_tls.key_file)");
ABSL_FLAG(std::string, allow_unauthenticated, "",
          "true: with no tenants, serve every caller without a key (local development only)");
ABSL_FLAG(std::string, grace_period, "", "Drain time on SIGTERM, e.g. 30s");
ABSL_FLAG(std::string, stale_worker_grace, "",
          "After a control-plane restart, keep workers it does not list yet this long, e.g. 10s");

namespace onecard::router {

const services::CommandLineSpec kCommandLine = {
    .program = "onecard-router",
    .usage = {"--model PATH --static-workers HOST:PORT[,...] [flags]",
              "--config cluster.yaml [flags]"},
    .description =
        "The public onecard.v1.Generation API in front of the workers: API keys, validation,\n"
        "tokenization, per-tenant rate limits, priority queues, dispatch to the least-loaded\n"
        "worker. Runs in the foreground until SIGTERM or Ctrl-C, then drains. Prints\n"
        "\"LISTENING grpc ADDR\", \"LISTENING metrics ADDR\" and \"READY\" on stdout.",
    .groups = {{"Configuration", {"config"}},
               {"Model", {"model", "model_name", "default_max_tokens"}},
               {"Network",
                {"listen", "metrics_listen", "advertise", "router_id", "public_tls_cert",
                 "public_tls_key"}},
               {"Workers",
                {"control_plane", "static_workers", "dns_workers", "max_in_flight_per_worker",
                 "stale_worker_grace"}},
               {"Queue", {"queue_max_depth", "queue_timeout", "aging_step", "fifo"}},
               {"Access", {"allow_unauthenticated"}},
               services::ServiceIdentityFlagGroup(),
               {"Shutdown", {"grace_period"}}},
    .epilog = services::ServiceHelpEpilog(),
    .flags_only = true};

namespace {

absl::Status OverrideDuration(const std::string& flag, const char* name,
                              google::protobuf::Duration* out) {
  if (flag.empty()) return absl::OkStatus();
  absl::Duration d;
  if (!absl::ParseDuration(flag, &d) || d < absl::ZeroDuration() || d == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, ": expected a duration such as 30s"));
  }
  services::ToProtoDuration(d, out);
  return absl::OkStatus();
}

// A true/false flag into `message`'s field through `set`; empty: unchanged.
template <typename Message>
absl::Status OverrideBool(const std::string& flag, const char* name, Message* message,
                          void (Message::*set)(bool)) {
  if (flag == "true" || flag == "false") {
    (message->*set)(flag == "true");
  } else if (!flag.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--", name, ": expected true or false"));
  }
  return absl::OkStatus();
}

// The string and number flags.
void OverrideValues(onecard::v1::RouterConfig* c) {
  const auto set = [](const std::string& flag, std::string* field) {
    if (!flag.empty()) *field = flag;
  };
  const auto set_int = [](int32_t flag, auto* message, auto setter) {
    if (flag >= 0) (message->*setter)(flag);
  };
  set(absl::GetFlag(FLAGS_model), c->mutable_model_path());
  set(absl::GetFlag(FLAGS_model_name), c->mutable_model_name());
  set(absl::GetFlag(FLAGS_listen), c->mutable_listen_address());
  set(absl::GetFlag(FLAGS_metrics_listen), c->mutable_metrics_listen_address());
  set(absl::GetFlag(FLAGS_http_listen), c->mutable_http()->mutable_listen_address());
  set(absl::GetFlag(FLAGS_control_plane), c->mutable_control_plane_address());
  set(absl::GetFlag(FLAGS_advertise), c->mutable_advertise_address());
  set(absl::GetFlag(FLAGS_router_id), c->mutable_router_id());
  set(absl::GetFlag(FLAGS_dns_workers), c->mutable_dispatch()->mutable_dns_workers());
  set(absl::GetFlag(FLAGS_public_tls_cert), c->mutable_public_tls()->mutable_cert_file());
  set(absl::GetFlag(FLAGS_public_tls_key), c->mutable_public_tls()->mutable_key_file());
  services::OverrideServiceAuthFromFlags(c->mutable_service_auth());
  for (absl::string_view w :
       absl::StrSplit(absl::GetFlag(FLAGS_static_workers), ',', absl::SkipWhitespace())) {
    c->mutable_dispatch()->add_static_workers(std::string(w));
  }
  set_int(absl::GetFlag(FLAGS_http_max_body_bytes), c->mutable_http(),
          &onecard::v1::HttpConfig::set_max_body_bytes);
  set_int(absl::GetFlag(FLAGS_http_max_connections), c->mutable_http(),
          &onecard::v1::HttpConfig::set_max_connections);
  set_int(absl::GetFlag(FLAGS_max_in_flight_per_worker), c->mutable_dispatch(),
          &onecard::v1::DispatchConfig::set_max_in_flight_per_worker);
  set_int(absl::GetFlag(FLAGS_queue_max_depth), c->mutable_queue(),
          &onecard::v1::QueueConfig::set_max_depth);
  set_int(absl::GetFlag(FLAGS_default_max_tokens), c,
          &onecard::v1::RouterConfig::set_default_max_tokens);
}

absl::Status Override(onecard::v1::RouterConfig* c) {
  OverrideValues(c);
  RETURN_IF_ERROR(OverrideBool(absl::GetFlag(FLAGS_fifo), "fifo", c->mutable_queue(),
                               &onecard::v1::QueueConfig::set_fifo));
  RETURN_IF_ERROR(OverrideBool(absl::GetFlag(FLAGS_allow_unauthenticated), "allow-unauthenticated",
                               c, &onecard::v1::RouterConfig::set_allow_unauthenticated));
  RETURN_IF_ERROR(OverrideDuration(absl::GetFlag(FLAGS_queue_timeout), "queue-timeout",
                                   c->mutable_queue()->mutable_queue_timeout()));
  RETURN_IF_ERROR(OverrideDuration(absl::GetFlag(FLAGS_aging_step), "aging-step",
                                   c->mutable_queue()->mutable_aging_step()));
  RETURN_IF_ERROR(OverrideDuration(absl::GetFlag(FLAGS_stale_worker_grace), "stale-worker-grace",
                                   c->mutable_dispatch()->mutable_stale_worker_grace()));
  return OverrideDuration(absl::GetFlag(FLAGS_grace_period), "grace-period",
                          c->mutable_timeouts()->mutable_grace_period());
}

int Run(services::ShutdownSignals& signals) {
  absl::StatusOr<onecard::v1::RouterConfig> config =
      services::LoadServiceConfig<onecard::v1::RouterConfig>(absl::GetFlag(FLAGS_config), "router");
  absl::Status status = config.ok() ? Override(&*config) : config.status();
  if (status.ok()) services::ApplyLogConfig(config->log());
  absl::StatusOr<RouterOptions> options =
      status.ok() ? ResolveRouterOptions(*config) : absl::StatusOr<RouterOptions>(status);
  if (!options.ok()) {
    std::fprintf(stderr, "onecard-router: %s\n", std::string(options.status().message()).c_str());
    return 2;
  }
  absl::StatusOr<std::unique_ptr<RouterServer>> server = RouterServer::Start(*config);
  if (!server.ok()) {
    std::fprintf(stderr, "onecard-router: %s\n", server.status().ToString().c_str());
    return 1;
  }
  services::AnnounceListening("grpc", (*server)->address());
  if (!(*server)->http_address().empty()) {
    services::AnnounceListening("http", (*server)->http_address());
  }
  services::AnnounceListening("metrics", (*server)->metrics_address());
  std::printf("READY\n");
  std::fflush(stdout);
  const int sig = signals.Wait();
  const absl::Status drained = (*server)->Drain(options->grace_period);
  Log(LogLevel::kInfo, "router", "signal %d: drained (%s); exiting", sig, drained.ToString());
  return 0;
}

}  // namespace
}  // namespace onecard::router

int main(int argc, char** argv) {
  // First, before any thread exists, so that every thread inherits the mask.
  absl::StatusOr<std::unique_ptr<onecard::services::ShutdownSignals>> signals =
      onecard::services::ShutdownSignals::Install();
  if (!signals.ok()) {
    std::fprintf(stderr, "onecard-router: %s\n", signals.status().ToString().c_str());
    return 1;
  }
  const onecard::services::CommandLine cli =
      onecard::services::ParseCommandLine(onecard::router::kCommandLine, argc, argv);
  if (cli.exit_code) return *cli.exit_code;
  return onecard::router::Run(**signals);
}
