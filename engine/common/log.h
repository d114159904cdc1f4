// Minimal structured logging for the engine and tools (Debian's Abseil
// 20220623 has no absl/log). One line per event on stderr:
//   2026-11-29T09:00:00.123Z I engine step=12 batch=4 msg="..."
// The level threshold comes from ONECARD_LOG_LEVEL (debug, info, warn, error).
// Invariants use assert() with the reason beside it (no ABSL_DCHECK in this
// Abseil). Tested through its users.
#ifndef ONECARD_ENGINE_COMMON_LOG_H_
#define ONECARD_ENGINE_COMMON_LOG_H_

#include <string_view>

#include "absl/strings/str_format.h"

namespace onecard {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

bool LogEnabled(LogLevel level);
void LogLine(LogLevel level, std::string_view component, std::string_view message);

// Log(LogLevel::kInfo, "engine", "loaded %s in %.2f s", path, seconds);
template <typename... Args>
void Log(LogLevel level, std::string_view component,
         const absl::FormatSpec<Args...>& format, const Args&... args) {
  if (!LogEnabled(level)) return;
  LogLine(level, component, absl::StrFormat(format, args...));
}

}  // namespace onecard

#endif  // ONECARD_ENGINE_COMMON_LOG_H_
