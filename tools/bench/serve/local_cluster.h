// Local processes for serve benchmarks and integration tests: start an
// onecard-worker, onecard-router (or onecard-metrics) on loopback, read the
// addresses it announces on stdout ("LISTENING grpc ADDR", "LISTENING http
// ADDR", "LISTENING metrics ADDR") and wait for "READY"; signal it (SIGTERM, SIGSTOP, SIGKILL),
// reap it, read its resident memory. Its stderr goes to a log file.
// Tested through tests/integration/router_*_test.cc.
#ifndef ONECARD_TOOLS_BENCH_SERVE_LOCAL_CLUSTER_H_
#define ONECARD_TOOLS_BENCH_SERVE_LOCAL_CLUSTER_H_

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace onecard::bench::serve {

class ChildProcess {
 public:
  // Starts `binary args...` and waits up to `ready_timeout` for "READY" (or,
  // when `ready_line` is empty, for the gRPC and metrics addresses: the
  // metrics service prints no READY). UNAVAILABLE with the
  // log's tail when it exits or times out first.
  static absl::StatusOr<std::unique_ptr<ChildProcess>> Start(
      const std::string& binary, const std::vector<std::string>& args, const std::string& log_path,
      absl::Duration ready_timeout = absl::Seconds(120), const std::string& ready_line = "READY");
  ~ChildProcess();  // SIGKILL if still running, then reaped

  const std::string& grpc_address() const { return grpc_address_; }
  const std::string& metrics_address() const { return metrics_address_; }
  const std::string& http_address() const { return http_address_; }  // the router's HTTP API
  pid_t pid() const { return pid_; }
  const std::string& log_path() const { return log_path_; }

  void Signal(int signal);
  // SIGTERM, then waits up to `grace` for the exit (SIGKILL after it).
  // Returns the exit code (128 + signal when killed by one).
  int Terminate(absl::Duration grace);
  void Kill();               // SIGKILL and reap
  int64_t RssBytes() const;  // VmRSS of /proc/<pid>/status; 0 when gone

 private:
  ChildProcess() = default;
  void ReadStdout(int fd);
  int Reap(absl::Duration timeout);

  pid_t pid_ = -1;
  std::string log_path_;
  std::string grpc_address_;
  std::string metrics_address_;
  std::string http_address_;
  std::thread reader_;
  absl::Mutex mu_;
  bool ready_ ABSL_GUARDED_BY(mu_) = false;
  bool eof_ ABSL_GUARDED_BY(mu_) = false;
  std::string ready_line_;
  std::optional<int> exit_code_;
};

// The path of a onecard binary: $ONECARD_BIN_DIR/<relative> when set, else
// <build dir>/<relative> with the build dir found from this executable
// (whose path holds the build tree, e.g. build/tools/bench/onecard-bench).
// `relative` is e.g. "router/onecard-router".
std::string FindBinary(const std::string& relative);

}  // namespace onecard::bench::serve

#endif  // ONECARD_TOOLS_BENCH_SERVE_LOCAL_CLUSTER_H_
