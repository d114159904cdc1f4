// Minimal structured logging for the engine and tools (Debian's Abseil
// 20220623 has no absl/log). One line per event on stderr:
//   2026-11-29T09:00:00.123Z I engine step=12 batch=4 msg="..."
// or, with LogFormat::kJson, one JSON object a line for log collectors:
//   {"ts":"2026-11-29T09:00:00.123Z","level":"info","component":"engine","msg":"..."}
// The threshold (default info) and the format (default text) are set by each
// binary from its --log_level / --log_format flags and its config's `log`
// section (services/common/command_line.h). Invariants use assert() with the reason beside it (no
// ABSL_DCHECK in this Abseil). Tested through its users.
#ifndef ONECARD_ENGINE_COMMON_LOG_H_
#define ONECARD_ENGINE_COMMON_LOG_H_

#include <string_view>

#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"

namespace onecard {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };
enum class LogFormat { kText = 0, kJson = 1 };

// "debug", "info", "warn" or "error"; InvalidArgument naming the choices.
absl::StatusOr<LogLevel> ParseLogLevel(std::string_view name);
// "text" or "json".
absl::StatusOr<LogFormat> ParseLogFormat(std::string_view name);

// Process-wide; may be called from any thread, normally once at start.
void SetLogLevel(LogLevel level);
void SetLogFormat(LogFormat format);
LogLevel GetLogLevel();
LogFormat GetLogFormat();

bool LogEnabled(LogLevel level);
void LogLine(LogLevel level, std::string_view component, std::string_view message);

// Log(LogLevel::kInfo, "engine", "loaded %s in %.2f s", path, seconds);
template <typename... Args>
void Log(LogLevel level, std::string_view component, const absl::FormatSpec<Args...>& format,
         const Args&... args) {
  if (!LogEnabled(level)) return;
  LogLine(level, component, absl::StrFormat(format, args...));
}

}  // namespace onecard

#endif  // ONECARD_ENGINE_COMMON_LOG_H_
