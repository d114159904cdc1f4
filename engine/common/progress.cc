// Progress bars and periodic progress lines. See progress.h.
#include "engine/common/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "engine/common/log.h"

namespace onecard {
namespace {

constexpr int kBarCells = 20;

ProgressOptions WithDefaults(ProgressOptions o) {
  if (!o.terminal.has_value()) o.terminal = isatty(STDERR_FILENO) == 1;
  if (!o.now) o.now = [] { return absl::Now(); };
  if (!o.draw) {
    o.draw = [](const std::string& bar) {
      std::fputs(bar.c_str(), stderr);
      std::fflush(stderr);
    };
  }
  if (!o.log) o.log = [](const std::string& line) { Log(LogLevel::kInfo, "progress", "%s", line); };
  return o;
}

}  // namespace

Progress::Progress(std::string what, int64_t total, std::string unit, ProgressOptions options)
    : what_(std::move(what)),
      total_(std::max<int64_t>(total, 0)),
      unit_(std::move(unit)),
      options_(WithDefaults(std::move(options))),
      start_(options_.now()),
      last_log_(start_) {}

Progress::~Progress() { Done(); }

std::string Progress::Status(int64_t done, absl::Duration elapsed) const {
  const int cells = total_ > 0 ? static_cast<int>(kBarCells * std::min(done, total_) / total_) : 0;
  return absl::StrFormat("[%s%s] %d/%d %s  %.1f s", std::string(cells, '#'),
                         std::string(kBarCells - cells, '.'), done, total_, unit_,
                         absl::ToDoubleSeconds(elapsed));
}

void Progress::Add(int64_t n) {
  absl::MutexLock lock(&mu_);
  if (finished_) return;
  done_ += n;
  const absl::Time now = options_.now();
  if (*options_.terminal) {
    const int cells =
        total_ > 0 ? static_cast<int>(kBarCells * std::min(done_, total_) / total_) : 0;
    if (cells == last_width_ && done_ != total_) return;  // redraw when the bar moves
    last_width_ = cells;
    options_.draw("\r" + what_ + " " + Status(done_, now - start_));
  } else if (now - last_log_ >= options_.log_interval) {
    last_log_ = now;
    options_.log(what_ + " " + Status(done_, now - start_));
  }
}

void Progress::Done() {
  absl::MutexLock lock(&mu_);
  if (finished_) return;
  finished_ = true;
  const std::string status = what_ + " " + Status(done_, options_.now() - start_);
  if (*options_.terminal) {
    options_.draw("\r" + status + "\n");
  } else if (options_.now() - start_ >= options_.log_interval) {
    options_.log(status + " done");  // short work: the caller's own line is enough
  }
}

}  // namespace onecard
