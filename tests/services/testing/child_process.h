// ChildProcess: runs a binary (a service under test) with its stdout piped
// to the test, so the test can wait for lines such as "LISTENING grpc ..."
// (with a timeout, never a sleep), signal it and collect its exit code. The
// destructor kills a child that is still running.
// Tested through tests/services/worker/worker_main_test.cc.
#ifndef ONECARD_TESTS_SERVICES_TESTING_CHILD_PROCESS_H_
#define ONECARD_TESTS_SERVICES_TESTING_CHILD_PROCESS_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace onecard::testing {

class ChildProcess {
 public:
  // Starts `argv[0]` with `argv`. stderr is the test's, or joins stdout
  // (and so WaitForLine) with merge_stderr.
  static absl::StatusOr<std::unique_ptr<ChildProcess>> Start(const std::vector<std::string>& argv,
                                                             bool merge_stderr = false);
  ~ChildProcess();

  // The next stdout line starting with `prefix` (earlier lines are dropped);
  // DeadlineExceeded after `timeout`, NotFound when stdout closes first.
  absl::StatusOr<std::string> WaitForLine(const std::string& prefix,
                                          absl::Duration timeout = absl::Seconds(120));
  void Signal(int signal);
  // Waits for the exit; its code (128 + n when killed by signal n), or
  // DeadlineExceeded after `timeout`.
  absl::StatusOr<int> Wait(absl::Duration timeout = absl::Seconds(120));
  pid_t pid() const { return pid_; }

 private:
  ChildProcess(pid_t pid, int stdout_fd) : pid_(pid), stdout_fd_(stdout_fd) {}

  pid_t pid_;
  int stdout_fd_;
  std::string buffer_;
  bool exited_ = false;
};

}  // namespace onecard::testing

#endif  // ONECARD_TESTS_SERVICES_TESTING_CHILD_PROCESS_H_
