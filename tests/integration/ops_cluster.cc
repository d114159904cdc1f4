// LocalCluster and the client helpers; see ops_cluster.h.
#include "tests/integration/ops_cluster.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tests/services/testing/http_get.h"
#include "tests/testing/time_scale.h"

namespace onecard::testing {
namespace {

constexpr absl::Duration kStartTimeout = absl::Seconds(120);

// sha256 of kOpsApiKey and kLimitedApiKey, from coreutils' sha256sum.
constexpr char kOpsKeySha256[] = "2c69bc9111c27110a9b9a7974ba3f8ac0c053c16b23a0738115ee829fbc4d57b";
constexpr char kLimitedKeySha256[] =
    "f33b2500796d61f96eeef0f5331ddc40c17e434aff139f4d9e00bfe75170d87a";

std::string ClusterConfig(const ClusterOptions& options) {
  const std::string model = std::filesystem::absolute(kModelPath).string();
  const std::string log = options.json_logs ? "\n  log: {format: json}" : "";
  return absl::StrCat(R"(# Written by tests/integration/ops_cluster.cc
metrics:)",
                      log, R"(
  listen_address: 127.0.0.1:0
  metrics_listen_address: 127.0.0.1:0
  worker_expiry: 3s
  router_expiry: 3s
  report_interval: 100ms
  watch_min_interval: 50ms
  table_warmup: 1s
worker:)",
                      log, R"(
  model_path: )",
                      model, R"(
  backend: cpu
  num_threads: 1
  listen_address: 127.0.0.1:0
  metrics_listen_address: 127.0.0.1:0
  scheduler:
    max_num_seqs: )",
                      options.max_num_seqs, R"(
  load_report_interval: 100ms
  reconnect: {initial_backoff: 50ms, max_backoff: )",
                      options.worker_max_backoff, R"(}
  grace_period: 20s
  default_max_tokens: 16
router:
  model_path: )",
                      model, R"(
  listen_address: 127.0.0.1:0
  metrics_listen_address: 127.0.0.1:0
  http: {listen_address: 127.0.0.1:0}
  load_report_interval: 100ms
  reconnect: {initial_backoff: 50ms, max_backoff: 300ms}
  queue: {queue_timeout: )",
                      absl::FormatDuration(ScaledTime(absl::Seconds(30))),
                      R"(}  # the default, scaled
  default_max_tokens: 16
  tenants:
    - name: ops
      api_key_sha256: [")",
                      kOpsKeySha256, R"("]
      max_priority: interactive
    - name: limited
      api_key_sha256: [")",
                      kLimitedKeySha256, R"("]
      requests_per_second: )",
                      // One request in 10 s (scaled): the second of two back to back is refused
                      // however long the first takes to answer.
                      0.1 / kTestTimeScale, R"(
      request_burst: 1
      max_priority: batch
)");
}

}  // namespace

absl::StatusOr<Endpoint> LocalCluster::StartProcess(const std::vector<std::string>& argv,
                                                    const std::string& log_name, bool wait_ready,
                                                    std::unique_ptr<ChildProcess>* out) {
  const std::string log = absl::StrCat(options_.work_dir, "/", log_name, ".log");
  absl::StatusOr<std::unique_ptr<ChildProcess>> child = ChildProcess::Start(argv, log);
  if (!child.ok()) return child.status();
  Endpoint endpoint;
  absl::StatusOr<std::string> grpc = (*child)->WaitForLine("LISTENING grpc ", kStartTimeout);
  if (!grpc.ok()) return grpc.status();
  absl::StatusOr<std::string> metrics = (*child)->WaitForLine("LISTENING metrics ", kStartTimeout);
  if (!metrics.ok()) return metrics.status();
  if (wait_ready) {
    absl::StatusOr<std::string> ready = (*child)->WaitForLine("READY", kStartTimeout);
    if (!ready.ok()) return ready.status();
  }
  *out = std::move(*child);
  return Endpoint{*grpc, *metrics};
}

absl::StatusOr<std::unique_ptr<LocalCluster>> LocalCluster::Start(const ClusterOptions& options) {
  std::unique_ptr<LocalCluster> cluster(new LocalCluster());
  cluster->options_ = options;
  cluster->config_path_ = options.work_dir + "/cluster.yaml";
  std::ofstream(cluster->config_path_) << ClusterConfig(options);
  const std::string config = "--config=" + cluster->config_path_;

  absl::StatusOr<Endpoint> metrics = cluster->StartProcess({ONECARD_METRICS_BIN, config}, "metrics",
                                                           false, &cluster->metrics_process_);
  if (!metrics.ok()) return metrics.status();
  cluster->metrics_ = *metrics;
  const std::string control = "--control_plane=" + cluster->metrics_.grpc;

  absl::StatusOr<Endpoint> worker =
      cluster->StartProcess({ONECARD_WORKER_BIN, config, control, "--worker_id=worker-0"}, "worker",
                            true, &cluster->worker_process_);
  if (!worker.ok()) return worker.status();
  cluster->worker_ = *worker;
  if (absl::Status s = WaitForMetric(
          cluster->metrics_.metrics, "onecard_cluster_workers", {{"state", "healthy"}},
          [](double v) { return v == 1; }, kStartTimeout);
      !s.ok()) {
    return s;
  }
  if (!options.start_router) return cluster;

  std::vector<std::string> router_argv = {ONECARD_ROUTER_BIN, config, control,
                                          "--router_id=router-0"};
  if (options.json_logs) router_argv.push_back("--log-format=json");
  absl::StatusOr<Endpoint> router =
      cluster->StartProcess(router_argv, "router", true, &cluster->router_process_);
  if (!router.ok()) return router.status();
  cluster->router_ = *router;
  if (absl::Status s = WaitForMetric(
          cluster->router_.metrics, "onecard_router_workers", {{"state", "healthy"}},
          [](double v) { return v == 1; }, kStartTimeout);
      !s.ok()) {
    return s;
  }
  return cluster;
}

absl::Status LocalCluster::RestartMetrics() {
  const std::string port = metrics_.grpc.substr(metrics_.grpc.rfind(':') + 1);
  absl::StatusOr<Endpoint> metrics =
      StartProcess({ONECARD_METRICS_BIN, "--config=" + config_path_, "--listen=127.0.0.1:" + port},
                   "metrics-restarted", false, &metrics_process_);
  if (!metrics.ok()) return metrics.status();
  metrics_ = *metrics;
  return absl::OkStatus();
}

std::unique_ptr<v1::Generation::Stub> LocalCluster::RouterStub() const {
  return v1::Generation::NewStub(
      grpc::CreateChannel(router_.grpc, grpc::InsecureChannelCredentials()));
}

GenerateResult Generate(v1::Generation::Stub& stub, const std::string& api_key,
                        const std::string& question, int max_tokens, v1::Priority priority,
                        const std::function<void(int chunk_index)>& on_chunk) {
  v1::GenerateRequest request;
  v1::ChatMessage* message = request.mutable_messages()->add_messages();
  message->set_role("user");
  message->set_content(question);
  request.mutable_sampling()->set_temperature(0);
  request.mutable_stopping()->set_max_tokens(max_tokens);
  request.mutable_stopping()->set_ignore_eos(true);
  request.set_priority(priority);
  grpc::ClientContext context;
  context.AddMetadata("authorization", "Bearer " + api_key);
  // A safety net against a hang, far above any expected run time.
  context.set_deadline(std::chrono::system_clock::now() + ScaledTime(std::chrono::seconds(300)));
  GenerateResult result;
  std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> reader =
      stub.Generate(&context, request);
  v1::GenerateResponse chunk;
  while (reader->Read(&chunk)) {
    result.token_ids.insert(result.token_ids.end(), chunk.token_ids().begin(),
                            chunk.token_ids().end());
    result.text += chunk.text();
    if (chunk.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) {
      result.finish_reason = chunk.finish_reason();
    }
    if (on_chunk) on_chunk(result.chunks);
    ++result.chunks;
  }
  result.status = reader->Finish();
  return result;
}

absl::StatusOr<PromText> Scrape(const std::string& address) {
  absl::StatusOr<HttpResponse> response = HttpGet(address, "/metrics");
  if (!response.ok()) return response.status();
  if (response->status_code != 200) {
    return absl::UnavailableError(
        absl::StrCat("GET ", address, "/metrics: HTTP ", response->status_code));
  }
  return ParsePromText(response->body);
}

absl::Status WaitForMetric(const std::string& address, const std::string& name,
                           const std::map<std::string, std::string>& labels,
                           const std::function<bool(double)>& ok, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + ScaledTime(timeout);
  std::string last = "no scrape";
  while (absl::Now() < deadline) {
    absl::StatusOr<PromText> text = Scrape(address);
    if (text.ok()) {
      const std::optional<double> value = text->Value(name, labels);
      if (value.has_value() && ok(*value)) return absl::OkStatus();
      last = value.has_value() ? absl::StrCat(*value) : "absent";
    } else {
      last = text.status().ToString();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // poll interval
  }
  return absl::DeadlineExceededError(
      absl::StrCat("waiting for ", name, " at ", address, ": last ", last));
}

}  // namespace onecard::testing
