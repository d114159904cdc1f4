// FaultCluster (see fault_cluster.h).
#include "tools/fault/fault_cluster.h"

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "tests/services/testing/http_get.h"

namespace onecard::fault {
namespace {

constexpr absl::Duration kStartTimeout = absl::Seconds(180);
// sha256 of kFaultApiKey ("ops-key"), from coreutils' sha256sum.
constexpr char kApiKeySha256[] = "2c69bc9111c27110a9b9a7974ba3f8ac0c053c16b23a0738115ee829fbc4d57b";

std::string ClusterConfig(const FaultClusterOptions& o, const std::string& dir) {
  const std::string model = std::filesystem::absolute(o.model_path).string();
  return absl::StrCat(R"(# Written by tools/fault/fault_cluster.cc
metrics:
  listen_address: 127.0.0.1:0
  metrics_listen_address: 127.0.0.1:0
  worker_expiry: )",
                      absl::FormatDuration(o.Scaled(o.worker_expiry)), R"(
  router_expiry: )",
                      absl::FormatDuration(o.Scaled(absl::Seconds(2))), R"(
  report_interval: 100ms
  watch_min_interval: 50ms
  table_warmup: 1s
  service_auth: &auth
    worker_token_file: ")",
                      dir, R"(/worker.token"
    router_token_file: ")",
                      dir, R"(/router.token"
worker:
  model_path: ")",
                      model, R"("
  backend: cpu
  num_threads: 1
  listen_address: 127.0.0.1:0
  metrics_listen_address: 127.0.0.1:0
  scheduler: {max_num_seqs: )",
                      o.max_num_seqs, R"(}
  load_report_interval: 100ms
  reconnect: {initial_backoff: 50ms, max_backoff: 300ms}
  grace_period: )",
                      absl::FormatDuration(o.Scaled(o.worker_grace)), R"(
  service_auth: *auth
router:
  model_path: ")",
                      model, R"("
  listen_address: 127.0.0.1:0
  metrics_listen_address: 127.0.0.1:0
  load_report_interval: 100ms
  reconnect: {initial_backoff: 50ms, max_backoff: 300ms}
  queue: {max_depth: )",
                      o.queue_max_depth, R"(, queue_timeout: )",
                      absl::FormatDuration(o.Scaled(o.queue_timeout)), R"(}
  dispatch: {eject_after_failures: 3, probe_interval: 2s}
  timeouts: {grace_period: )",
                      absl::FormatDuration(o.Scaled(absl::Seconds(20))), R"(}
  service_auth: *auth
  tenants:
    - name: fault
      api_key_sha256: [")",
                      kApiKeySha256, R"("]
      max_priority: interactive
)");
}

absl::Status WriteToken(const std::string& path) {
  std::random_device rd;
  std::string token;
  for (int i = 0; i < 32; ++i) token += "0123456789abcdef"[rd() % 16];
  std::ofstream(path) << token << "\n";
  if (chmod(path.c_str(), 0600) != 0) return absl::InternalError("chmod " + path);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<testing::PromText> ScrapeMetrics(const std::string& address) {
  absl::StatusOr<testing::HttpResponse> r = testing::HttpGet(address, "/metrics");
  if (!r.ok()) return r.status();
  return testing::ParsePromText(r->body);
}

bool AwaitMetrics(const std::string& address,
                  const std::function<bool(const testing::PromText&)>& ready,
                  absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    absl::StatusOr<testing::PromText> text = ScrapeMetrics(address);
    if (text.ok() && ready(*text)) return true;
    absl::SleepFor(absl::Milliseconds(50));  // polling another process's state
  }
  return false;
}

absl::StatusOr<std::unique_ptr<FaultCluster>> FaultCluster::Start(
    const FaultClusterOptions& options) {
  std::unique_ptr<FaultCluster> c(new FaultCluster());
  c->options_ = options;
  const std::string dir = std::filesystem::absolute(options.work_dir).string();
  std::filesystem::create_directories(dir);
  for (const char* role : {"worker", "router"}) {
    if (absl::Status s = WriteToken(absl::StrCat(dir, "/", role, ".token")); !s.ok()) return s;
  }
  c->config_path_ = dir + "/cluster.yaml";
  std::ofstream(c->config_path_) << ClusterConfig(options, dir);
  const std::string config = "--config=" + c->config_path_;

  absl::StatusOr<std::unique_ptr<ChildProcess>> m =
      ChildProcess::Start(options.metrics_bin, {config}, dir + "/metrics.log",
                          options.Scaled(kStartTimeout), /*ready_line=*/"");
  if (!m.ok()) return m.status();
  c->metrics_ = std::move(*m);
  const std::string control = "--control_plane=" + c->metrics_->grpc_address();
  for (int i = 0; i < options.num_workers; ++i) {
    absl::StatusOr<std::unique_ptr<ChildProcess>> w = ChildProcess::Start(
        options.worker_bin, {config, control, absl::StrCat("--worker_id=worker-", i)},
        absl::StrCat(dir, "/worker-", i, ".log"), options.Scaled(kStartTimeout));
    if (!w.ok()) return w.status();
    c->workers_.push_back(std::move(*w));
    c->worker_alive_.push_back(true);
  }
  if (absl::Status s = c->StartRouter("127.0.0.1:0"); !s.ok()) return s;
  return c;
}

absl::Status FaultCluster::StartRouter(const std::string& listen) {
  const std::string log = absl::StrCat(options_.work_dir, "/router-", starts_++, ".log");
  absl::StatusOr<std::unique_ptr<ChildProcess>> r = ChildProcess::Start(
      options_.router_bin,
      {"--config=" + config_path_, "--control_plane=" + metrics_->grpc_address(),
       "--router_id=router-0", "--listen=" + listen},
      log, options_.Scaled(kStartTimeout));
  if (!r.ok()) return r.status();
  router_ = std::move(*r);
  const int workers = num_workers();
  if (!AwaitMetrics(
          router_->metrics_address(),
          [workers](const testing::PromText& t) {
            return t.Value("onecard_router_workers", {{"state", "healthy"}}) == workers;
          },
          options_.Scaled(kStartTimeout))) {
    return absl::DeadlineExceededError("the router's table never held every worker; log " + log);
  }
  return absl::OkStatus();
}

void FaultCluster::KillWorker(int i) {
  workers_[i]->Kill();
  worker_alive_[i] = false;
}

int FaultCluster::TerminateWorker(int i, absl::Duration grace) {
  worker_alive_[i] = false;
  return workers_[i]->Terminate(grace);
}

absl::Status FaultCluster::RestartMetrics() {
  const std::string address = metrics_->grpc_address();
  metrics_->Kill();
  absl::StatusOr<std::unique_ptr<ChildProcess>> m =
      ChildProcess::Start(options_.metrics_bin, {"--config=" + config_path_, "--listen=" + address},
                          absl::StrCat(options_.work_dir, "/metrics-", starts_++, ".log"),
                          options_.Scaled(kStartTimeout), "");
  if (!m.ok()) return m.status();
  metrics_ = std::move(*m);
  return absl::OkStatus();
}

absl::Status FaultCluster::RestartRouter() {
  const std::string address = router_->grpc_address();
  router_->Kill();
  return StartRouter(address);
}

std::vector<std::string> FaultCluster::Busy() {
  std::vector<std::string> busy;
  auto check = [&busy](const std::string& who, const std::string& address,
                       const std::vector<std::string>& gauges) {
    absl::StatusOr<testing::PromText> t = ScrapeMetrics(address);
    if (!t.ok()) {
      busy.push_back(absl::StrCat(who, " ", t.status().ToString()));
      return;
    }
    for (const std::string& g : gauges) {
      const double v = t->Sum(g);
      if (v != 0) busy.push_back(absl::StrCat(who, " ", g, "=", v));
    }
  };
  for (int i = 0; i < num_workers(); ++i) {
    if (!worker_alive_[i]) continue;
    check(absl::StrCat("worker-", i), workers_[i]->metrics_address(),
          {"onecard_worker_requests_running", "onecard_worker_requests_waiting",
           "onecard_worker_kv_cache_blocks_used", "onecard_worker_streams_active"});
  }
  check("router", router_->metrics_address(),
        {"onecard_router_open_streams", "onecard_router_queue_depth",
         "onecard_router_worker_in_flight"});
  check("metrics", metrics_->metrics_address(),
        {"onecard_cluster_requests_running", "onecard_cluster_queue_depth"});
  return busy;
}

absl::Status FaultCluster::AwaitIdle(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  std::vector<std::string> busy;
  while (true) {
    busy = Busy();
    if (busy.empty()) return absl::OkStatus();
    if (absl::Now() >= deadline) break;
    absl::SleepFor(absl::Milliseconds(100));  // polling other processes' state
  }
  std::string text;
  for (const std::string& b : busy) absl::StrAppend(&text, text.empty() ? "" : "; ", b);
  return absl::FailedPreconditionError("gauges not back to zero: " + text);
}

}  // namespace onecard::fault
