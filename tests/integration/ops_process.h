// ChildProcess: a real service process for the ops integration tests. Its
// stdout is read line by line (the services announce "LISTENING grpc ADDR",
// "LISTENING metrics ADDR" and "READY" there); its stderr goes to a log file
// whose tail failure messages show. The child dies with the test process
// (PR_SET_PDEATHSIG), so a crashed test leaves no server behind.
// Every wait is bounded by a deadline and wakes on the event itself (a line,
// the exit), never on a timer.
// Tested through tests/integration/ops_*_test.cc.
#ifndef ONECARD_TESTS_INTEGRATION_OPS_PROCESS_H_
#define ONECARD_TESTS_INTEGRATION_OPS_PROCESS_H_

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

namespace onecard::testing {

class ChildProcess {
 public:
  // Starts argv[0] (a path) with the arguments; stderr is appended to
  // `stderr_path`.
  static absl::StatusOr<std::unique_ptr<ChildProcess>> Start(const std::vector<std::string>& argv,
                                                             const std::string& stderr_path);
  // Kills (SIGKILL) a child still running and reaps it.
  ~ChildProcess();

  // Both waits' `timeout` is a normal build's budget, ScaledTime'd inside
  // (tests/testing/time_scale.h).
  // The first stdout line starting with `prefix`, with the prefix removed.
  // DeadlineExceeded, or Aborted when the process exits first (the message
  // carries its stderr tail).
  absl::StatusOr<std::string> WaitForLine(const std::string& prefix, absl::Duration timeout);
  // Waits for the exit; the exit code, or 128 + signal when killed.
  absl::StatusOr<int> WaitForExit(absl::Duration timeout);
  void Signal(int signal);
  bool running();
  pid_t pid() const { return pid_; }
  std::string StderrTail(size_t max_bytes = 4000) const;

 private:
  ChildProcess() = default;
  void ReadLoop(int fd);

  pid_t pid_ = -1;
  std::string stderr_path_;
  std::string name_;
  std::thread reader_;

  mutable absl::Mutex mu_;
  std::vector<std::string> lines_ ABSL_GUARDED_BY(mu_);
  std::optional<int> exit_code_ ABSL_GUARDED_BY(mu_);
};

// A TCP port on 127.0.0.1 that was free a moment ago, for a third-party
// server (Prometheus) that cannot report the port it bound for port 0.
absl::StatusOr<int> PickFreePort();

}  // namespace onecard::testing

#endif  // ONECARD_TESTS_INTEGRATION_OPS_PROCESS_H_
