// LocalCluster: the real onecard-metrics, onecard-worker (CPU backend,
// SmolLM2) and onecard-router processes on 127.0.0.1, every port chosen by
// the kernel (port 0, read back from the "LISTENING" lines). The config file
// it writes has two tenants: "ops" (key kOpsApiKey, no limits) and "limited"
// (key kLimitedApiKey, one request per 10 s, burst 1).
// Also: a streaming Generate client and a bounded poll of a /metrics value.
// Used by tests/integration/ops_*_test.cc.
#ifndef ONECARD_TESTS_INTEGRATION_OPS_CLUSTER_H_
#define ONECARD_TESTS_INTEGRATION_OPS_CLUSTER_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "onecard/v1/generation.grpc.pb.h"
#include "tests/integration/ops_process.h"
#include "tests/services/testing/prom_text.h"

namespace onecard::testing {

inline constexpr char kOpsApiKey[] = "ops-key";
inline constexpr char kLimitedApiKey[] = "limited-key";
inline constexpr char kModelPath[] = "models/SmolLM2-135M-Instruct.Q4_1.gguf";

struct Endpoint {
  std::string grpc;     // host:port
  std::string metrics;  // host:port of /metrics
};

struct ClusterOptions {
  std::string work_dir;  // config and logs; must exist
  bool start_router = true;
  int max_num_seqs = 4;  // per worker step: a small batch makes the router queue
  // The worker's reconnect backoff cap towards the metrics service (the
  // product default is 5s; short keeps outage tests quick).
  std::string worker_max_backoff = "300ms";
  // JSON log lines: the metrics service and the worker from their config's
  // `log.format`, the router from its --log-format flag.
  bool json_logs = false;
};

class LocalCluster {
 public:
  // Starts the metrics service, then a worker and (optionally) a router that
  // report to it, and waits until each is ready (worker and router: model
  // loaded; router: the worker is in its table, learned from the watch).
  static absl::StatusOr<std::unique_ptr<LocalCluster>> Start(const ClusterOptions& options);

  const Endpoint& metrics() const { return metrics_; }
  const Endpoint& worker() const { return worker_; }
  const Endpoint& router() const { return router_; }
  ChildProcess& metrics_process() { return *metrics_process_; }
  ChildProcess& worker_process() { return *worker_process_; }
  ChildProcess& router_process() { return *router_process_; }

  // Starts the metrics service again on the gRPC port it had.
  absl::Status RestartMetrics();
  std::unique_ptr<v1::Generation::Stub> RouterStub() const;

 private:
  LocalCluster() = default;
  absl::StatusOr<Endpoint> StartProcess(const std::vector<std::string>& argv,
                                        const std::string& log_name, bool wait_ready,
                                        std::unique_ptr<ChildProcess>* out);

  ClusterOptions options_;
  std::string config_path_;
  Endpoint metrics_, worker_, router_;
  std::unique_ptr<ChildProcess> metrics_process_, worker_process_, router_process_;
};

struct GenerateResult {
  grpc::Status status;
  std::vector<int32_t> token_ids;
  std::string text;
  v1::FinishReason finish_reason = v1::FINISH_REASON_UNSPECIFIED;
  int chunks = 0;
};

// One chat request through `stub` with `api_key`, read to the end (a 300 s
// deadline, ScaledTime'd).
// `on_chunk` (optional) runs after each chunk, e.g. to act mid-stream.
GenerateResult Generate(v1::Generation::Stub& stub, const std::string& api_key,
                        const std::string& question, int max_tokens, v1::Priority priority,
                        const std::function<void(int chunk_index)>& on_chunk = nullptr);

// Scrapes http://<address>/metrics and parses it (strictly).
absl::StatusOr<PromText> Scrape(const std::string& address);

// Polls /metrics at `address` until the sample `name{labels}` satisfies
// `ok`, or `timeout` (ScaledTime'd inside) passes (then DeadlineExceeded with
// the last value). For
// state that a process reaches on its own (a worker registering, a table
// arriving), which nothing else signals to the test.
absl::Status WaitForMetric(const std::string& address, const std::string& name,
                           const std::map<std::string, std::string>& labels,
                           const std::function<bool(double)>& ok, absl::Duration timeout);

}  // namespace onecard::testing

#endif  // ONECARD_TESTS_INTEGRATION_OPS_CLUSTER_H_
