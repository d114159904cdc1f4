// ChildProcess and FindBinary (see local_cluster.h).
#include "tools/bench/serve/local_cluster.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "tools/bench/process_memory.h"

namespace onecard::bench::serve {
namespace {

std::string Tail(const std::string& path, size_t bytes = 2000) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  std::string text = s.str();
  return text.size() > bytes ? text.substr(text.size() - bytes) : text;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::Start(
    const std::string& binary, const std::vector<std::string>& args, const std::string& log_path,
    absl::Duration ready_timeout, const std::string& ready_line) {
  int out[2];
  if (pipe(out) != 0) return absl::InternalError("pipe failed");
  std::unique_ptr<ChildProcess> child(new ChildProcess());
  child->log_path_ = log_path;
  child->ready_line_ = ready_line;
  std::vector<std::string> argv_strings = {binary};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_strings) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {  // the child: only async-signal-safe calls until exec
    int log = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(out[1], 1);
    if (log >= 0) dup2(log, 2);
    close(out[0]);
    close(out[1]);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execv(binary.c_str(), argv.data());
    _exit(127);
  }
  close(out[1]);
  child->pid_ = pid;
  child->reader_ = std::thread([c = child.get(), fd = out[0]] { c->ReadStdout(fd); });
  bool in_time, ready;
  {
    absl::MutexLock lock(&child->mu_);
    // Evaluated by the mutex with it held (clang rejects a capture named in
    // a lock annotation, so the lambda asserts it instead).
    auto settled = [c = child.get()] {
      c->mu_.AssertHeld();
      return c->ready_ || c->eof_;
    };
    in_time = child->mu_.AwaitWithTimeout(absl::Condition(&settled), ready_timeout);
    ready = child->ready_;
  }
  if (ready) return child;
  child->Kill();
  return absl::UnavailableError(absl::StrCat(binary, in_time ? " exited" : " was not ready in ",
                                             in_time ? "" : absl::FormatDuration(ready_timeout),
                                             " before READY; log ", log_path, ":\n",
                                             Tail(log_path)));
}

void ChildProcess::ReadStdout(int fd) {
  FILE* in = fdopen(fd, "r");
  char line[4096];
  while (in != nullptr && fgets(line, sizeof(line), in) != nullptr) {
    absl::string_view l = absl::StripTrailingAsciiWhitespace(line);
    absl::MutexLock lock(&mu_);
    if (absl::ConsumePrefix(&l, "LISTENING grpc ")) grpc_address_ = std::string(l);
    if (absl::ConsumePrefix(&l, "LISTENING metrics ")) metrics_address_ = std::string(l);
    if (absl::ConsumePrefix(&l, "LISTENING http ")) http_address_ = std::string(l);
    if (ready_line_.empty() ? !grpc_address_.empty() && !metrics_address_.empty()
                            : l == ready_line_) {
      ready_ = true;
    }
  }
  if (in != nullptr) fclose(in);
  absl::MutexLock lock(&mu_);
  eof_ = true;
}

ChildProcess::~ChildProcess() {
  Kill();
  if (reader_.joinable()) reader_.join();
}

void ChildProcess::Signal(int signal) {
  if (pid_ > 0 && !exit_code_.has_value()) kill(pid_, signal);
}

int ChildProcess::Reap(absl::Duration timeout) {
  if (exit_code_.has_value()) return *exit_code_;
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    int status = 0;
    pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      return *exit_code_;
    }
    if (r < 0 || absl::Now() >= deadline) return -1;
    absl::SleepFor(absl::Milliseconds(10));  // polling a child's exit
  }
}

int ChildProcess::Terminate(absl::Duration grace) {
  Signal(SIGTERM);
  int code = Reap(grace);
  if (code >= 0) return code;
  Kill();
  return exit_code_.value_or(-1);
}

void ChildProcess::Kill() {
  if (pid_ <= 0 || exit_code_.has_value()) return;
  kill(pid_, SIGKILL);
  Reap(absl::Seconds(30));
}

int64_t ChildProcess::RssBytes() const { return ResidentBytes(pid_); }

std::string FindBinary(const std::string& relative) {
  if (const char* dir = std::getenv("ONECARD_BIN_DIR"); dir != nullptr && *dir != '\0') {
    return (std::filesystem::path(dir) / relative).string();
  }
  std::error_code ec;
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  for (std::filesystem::path dir = self.parent_path(); !dir.empty() && dir != dir.root_path();
       dir = dir.parent_path()) {
    if (std::filesystem::exists(dir / "CMakeCache.txt")) return (dir / relative).string();
  }
  return relative;
}

}  // namespace onecard::bench::serve
