// ChildProcess and PickFreePort; see ops_process.h.
#include "tests/integration/ops_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tests/testing/time_scale.h"

namespace onecard::testing {

absl::StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::Start(
    const std::vector<std::string>& argv, const std::string& stderr_path) {
  if (argv.empty()) return absl::InvalidArgumentError("empty argv");
  if (access(argv[0].c_str(), X_OK) != 0) {
    return absl::NotFoundError(absl::StrCat(argv[0], " is not an executable (not built?)"));
  }
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  int out[2];
  if (pipe(out) != 0) return absl::InternalError("pipe failed");
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {  // child: async-signal-safe calls only
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    dup2(out[1], STDOUT_FILENO);
    close(out[0]);
    close(out[1]);
    const int err = open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (err >= 0) dup2(err, STDERR_FILENO);
    execv(args[0], args.data());
    _exit(127);
  }
  close(out[1]);
  std::unique_ptr<ChildProcess> child(new ChildProcess());
  child->pid_ = pid;
  child->stderr_path_ = stderr_path;
  child->name_ = argv[0].substr(argv[0].rfind('/') + 1);
  child->reader_ = std::thread([c = child.get(), fd = out[0]] { c->ReadLoop(fd); });
  return child;
}

ChildProcess::~ChildProcess() {
  if (running()) kill(pid_, SIGKILL);
  if (reader_.joinable()) reader_.join();
}

void ChildProcess::ReadLoop(int fd) {
  std::string partial;
  char buffer[4096];
  ssize_t n;
  while ((n = read(fd, buffer, sizeof(buffer))) != 0) {
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    partial.append(buffer, static_cast<size_t>(n));
    size_t newline;
    while ((newline = partial.find('\n')) != std::string::npos) {
      absl::MutexLock lock(&mu_);
      lines_.push_back(partial.substr(0, newline));
      partial.erase(0, newline + 1);
    }
  }
  close(fd);
  int status = 0;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  absl::MutexLock lock(&mu_);
  exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

absl::StatusOr<std::string> ChildProcess::WaitForLine(const std::string& prefix,
                                                      absl::Duration timeout) {
  std::optional<std::string> found;
  auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (const std::string& line : lines_) {
      if (absl::StartsWith(line, prefix)) {
        found = line.substr(prefix.size());
        return true;
      }
    }
    return exit_code_.has_value();
  };
  absl::MutexLock lock(&mu_);
  const bool done = mu_.AwaitWithTimeout(absl::Condition(&ready), ScaledTime(timeout));
  if (found.has_value()) return *found;
  const std::string what = absl::StrCat(name_, " (pid ", pid_, ") waiting for \"", prefix, "\"");
  if (!done) {
    return absl::DeadlineExceededError(absl::StrCat(what, ": timed out; stderr:\n", StderrTail()));
  }
  return absl::AbortedError(
      absl::StrCat(what, ": exited with ", *exit_code_, "; stderr:\n", StderrTail()));
}

absl::StatusOr<int> ChildProcess::WaitForExit(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto exited = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return exit_code_.has_value(); };
  if (!mu_.AwaitWithTimeout(absl::Condition(&exited), ScaledTime(timeout))) {
    return absl::DeadlineExceededError(absl::StrCat(name_, " did not exit in time"));
  }
  return *exit_code_;
}

void ChildProcess::Signal(int signal) {
  if (running()) kill(pid_, signal);
}

bool ChildProcess::running() {
  absl::MutexLock lock(&mu_);
  return !exit_code_.has_value();
}

std::string ChildProcess::StderrTail(size_t max_bytes) const {
  std::ifstream in(stderr_path_);
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();
  return text.size() <= max_bytes ? text : text.substr(text.size() - max_bytes);
}

absl::StatusOr<int> PickFreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::InternalError("socket failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd);
    return absl::InternalError("bind to 127.0.0.1:0 failed");
  }
  const int port = ntohs(addr.sin_port);
  close(fd);
  return port;
}

}  // namespace onecard::testing
