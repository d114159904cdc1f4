// A child process with a piped stdout. See child_process.h.
#include "tests/services/testing/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

// glibc 2.36's <sys/pidfd.h> lacks extern "C" for C++ callers.
extern "C" {
#include <sys/pidfd.h>
}

extern char** environ;

namespace onecard::testing {

absl::StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::Start(
    const std::vector<std::string>& argv, bool merge_stderr) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return absl::InternalError(std::strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  if (merge_stderr) posix_spawn_file_actions_adddup2(&actions, fds[1], STDERR_FILENO);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    return absl::InternalError(absl::StrCat("spawn ", argv[0], ": ", std::strerror(rc)));
  }
  return std::unique_ptr<ChildProcess>(new ChildProcess(pid, fds[0]));
}

ChildProcess::~ChildProcess() {
  if (!exited_) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  close(stdout_fd_);
}

absl::StatusOr<std::string> ChildProcess::WaitForLine(const std::string& prefix,
                                                      absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    for (size_t nl; (nl = buffer_.find('\n')) != std::string::npos;) {
      std::string line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      if (absl::StartsWith(line, prefix)) return line;
    }
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError(absl::StrCat("no line \"", prefix, "...\" in time"));
    }
    pollfd p{stdout_fd_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1) <= 0) continue;
    char buf[4096];
    const ssize_t n = read(stdout_fd_, buf, sizeof(buf));
    if (n <= 0) return absl::NotFoundError(absl::StrCat("stdout closed before \"", prefix, "\""));
    buffer_.append(buf, static_cast<size_t>(n));
  }
}

void ChildProcess::Signal(int signal) {
  if (!exited_) kill(pid_, signal);
}

absl::StatusOr<int> ChildProcess::Wait(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  const int pidfd = pidfd_open(pid_, 0);  // readable once the child exits
  if (pidfd < 0) return absl::InternalError(absl::StrCat("pidfd_open: ", std::strerror(errno)));
  int status = 0;
  bool stdout_open = true;
  while (waitpid(pid_, &status, WNOHANG) != pid_) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      close(pidfd);
      return absl::DeadlineExceededError("the child did not exit in time");
    }
    // Keeps reading stdout so the child never blocks on a full pipe.
    pollfd fds[2] = {{pidfd, POLLIN, 0}, {stdout_fd_, POLLIN, 0}};
    if (poll(fds, stdout_open ? 2 : 1, static_cast<int>(absl::ToInt64Milliseconds(left)) + 1) > 0 &&
        stdout_open && fds[1].revents != 0) {
      char buf[4096];
      stdout_open = read(stdout_fd_, buf, sizeof(buf)) > 0;
    }
  }
  close(pidfd);
  exited_ = true;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + WTERMSIG(status);
}

}  // namespace onecard::testing
