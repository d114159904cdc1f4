// FaultCluster: the fault suite's real processes on loopback: the metrics
// service, `num_workers` onecard-worker processes (CPU backend, SmolLM2) and
// one onecard-router, every port chosen by the kernel, the services proving
// their roles with fresh tokens (service_auth, token mode) and the router
// learning its workers from the metrics service. Faults are injected with
// signals; RestartMetrics and RestartRouter bring a service back on the gRPC
// port it had. AwaitIdle checks that every gauge of every live process went
// back to zero (KV blocks, running and waiting requests, open streams,
// queues, in-flight counts).
// Used by tools/fault/fault_scenarios.cc; tested through
// tests/integration/fault_suite_test.cc.
#ifndef ONECARD_TOOLS_FAULT_FAULT_CLUSTER_H_
#define ONECARD_TOOLS_FAULT_FAULT_CLUSTER_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tests/services/testing/prom_text.h"
#include "tools/bench/serve/local_cluster.h"

namespace onecard::fault {

using bench::serve::ChildProcess;

// The tenant key of the cluster's router ("authorization: Bearer <key>").
inline constexpr char kFaultApiKey[] = "ops-key";

struct FaultClusterOptions {
  std::string work_dir;  // config, tokens and logs; created if missing
  std::string model_path = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
  std::string metrics_bin, worker_bin, router_bin;
  int num_workers = 2;
  int max_num_seqs = 8;                             // per worker step
  absl::Duration worker_grace = absl::Seconds(20);  // SIGTERM drain
  // The metrics service marks a silent worker unhealthy after this.
  absl::Duration worker_expiry = absl::Seconds(2);
  int queue_max_depth = 2048;  // the router's queue
  // Longest wait in the router's queue: above the time 1,000 clients take
  // to get their first token on two CPU workers.
  absl::Duration queue_timeout = absl::Seconds(600);
  // How many times slower the binaries run than a normal build (a sanitizer
  // build's, for its tests): the durations above, the services' expiries
  // and every wait and deadline of the cluster and the scenarios are
  // multiplied by it.
  int time_scale = 1;
  absl::Duration Scaled(absl::Duration d) const { return d * time_scale; }
};

class FaultCluster {
 public:
  // Starts the metrics service, the workers and the router; returns once the
  // router's table holds every worker as healthy.
  static absl::StatusOr<std::unique_ptr<FaultCluster>> Start(const FaultClusterOptions& options);

  ChildProcess& metrics() { return *metrics_; }
  ChildProcess& router() { return *router_; }
  ChildProcess& worker(int i) { return *workers_[i]; }
  int num_workers() const { return static_cast<int>(workers_.size()); }
  const FaultClusterOptions& options() const { return options_; }

  // Fault injection. A killed or terminated worker is left out of AwaitIdle.
  void KillWorker(int i);
  int TerminateWorker(int i, absl::Duration grace);  // the exit code
  absl::Status RestartMetrics();
  absl::Status RestartRouter();  // SIGKILL, then a new router on the same port

  // Polls every live process's /metrics until all its gauges are zero, or
  // `timeout` (then FailedPrecondition naming the gauges that are not).
  absl::Status AwaitIdle(absl::Duration timeout);

 private:
  FaultCluster() = default;
  absl::Status StartRouter(const std::string& listen);
  std::vector<std::string> Busy();  // the non-zero gauges, "process metric=value"

  FaultClusterOptions options_;
  std::string config_path_;
  int starts_ = 0;  // log names of restarted processes
  std::unique_ptr<ChildProcess> metrics_, router_;
  std::vector<std::unique_ptr<ChildProcess>> workers_;
  std::vector<bool> worker_alive_;
};

absl::StatusOr<testing::PromText> ScrapeMetrics(const std::string& address);
// Scrapes every 50 ms until `ready(text)` or `timeout`; false on timeout.
bool AwaitMetrics(const std::string& address,
                  const std::function<bool(const testing::PromText&)>& ready,
                  absl::Duration timeout);

}  // namespace onecard::fault

#endif  // ONECARD_TOOLS_FAULT_FAULT_CLUSTER_H_
