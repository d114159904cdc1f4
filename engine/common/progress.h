// Progress of long work (model loading, weight conversion): on a terminal a
// bar redrawn in place on stderr,
//   loading SmolLM2 weights [##########..........]  136/272 tensors  3.1 s
// otherwise (a log file, a pod's stderr) an info log line at most every
// log_interval and one when the work ends, so logs stay short. Add() may be
// called from several threads. Tested by tests/engine/common/progress_test.cc.
#ifndef ONECARD_ENGINE_COMMON_PROGRESS_H_
#define ONECARD_ENGINE_COMMON_PROGRESS_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace onecard {

struct ProgressOptions {
  // Unset: whether stderr is a terminal.
  std::optional<bool> terminal;
  absl::Duration log_interval = absl::Seconds(5);
  // Injected for tests; defaults: absl::Now, the bar to stderr, lines to Log.
  std::function<absl::Time()> now;
  std::function<void(const std::string& bar)> draw;  // "\r..." redraws
  std::function<void(const std::string& line)> log;
};

class Progress {
 public:
  // `what` names the work ("loading model.gguf weights"), `unit` the items.
  Progress(std::string what, int64_t total, std::string unit, ProgressOptions options = {});
  ~Progress();  // Done() if not yet called

  void Add(int64_t n = 1);
  // Reports the end (a final bar and newline, or a last log line) once.
  void Done();

  // "[#####.....]  5/10 tensors  1.2 s": the text both forms show.
  std::string Status(int64_t done, absl::Duration elapsed) const;

 private:
  const std::string what_;
  const int64_t total_;
  const std::string unit_;
  ProgressOptions options_;
  const absl::Time start_;
  absl::Mutex mu_;
  int64_t done_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time last_log_ ABSL_GUARDED_BY(mu_);
  int last_width_ ABSL_GUARDED_BY(mu_) = -1;  // bar cells drawn last
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace onecard

#endif  // ONECARD_ENGINE_COMMON_PROGRESS_H_
