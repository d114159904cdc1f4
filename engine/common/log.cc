#include "engine/common/log.h"

#include <atomic>
#include <cstdio>
#include <mutex>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace onecard {
namespace {

std::atomic<LogLevel> g_level{LogLevel::kInfo};
std::atomic<LogFormat> g_format{LogFormat::kText};

char LevelChar(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return 'D';
    case LogLevel::kInfo:
      return 'I';
    case LogLevel::kWarn:
      return 'W';
    case LogLevel::kError:
      return 'E';
  }
  return '?';
}

const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarn:
      return "warn";
    case LogLevel::kError:
      return "error";
  }
  return "?";
}

// `text` as the inside of a JSON string.
std::string JsonEscaped(std::string_view text) {
  std::string out;
  for (const char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<LogLevel> ParseLogLevel(std::string_view name) {
  for (LogLevel level : {LogLevel::kDebug, LogLevel::kInfo, LogLevel::kWarn, LogLevel::kError}) {
    if (name == LevelName(level)) return level;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown log level \"",
                                                 absl::string_view(name.data(), name.size()),
                                                 "\" (debug, info, warn or error)"));
}

absl::StatusOr<LogFormat> ParseLogFormat(std::string_view name) {
  if (name == "text") return LogFormat::kText;
  if (name == "json") return LogFormat::kJson;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown log format \"", absl::string_view(name.data(), name.size()), "\" (text or json)"));
}

void SetLogLevel(LogLevel level) { g_level.store(level, std::memory_order_relaxed); }
void SetLogFormat(LogFormat format) { g_format.store(format, std::memory_order_relaxed); }
LogLevel GetLogLevel() { return g_level.load(std::memory_order_relaxed); }
LogFormat GetLogFormat() { return g_format.load(std::memory_order_relaxed); }

bool LogEnabled(LogLevel level) { return level >= GetLogLevel(); }

void LogLine(LogLevel level, std::string_view component, std::string_view message) {
  static std::mutex mu;
  const std::string ts = absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(), absl::UTCTimeZone());
  if (GetLogFormat() == LogFormat::kJson) {
    const std::string line = "{\"ts\":\"" + ts + "\",\"level\":\"" + LevelName(level) +
                             "\",\"component\":\"" + JsonEscaped(component) + "\",\"msg\":\"" +
                             JsonEscaped(message) + "\"}\n";
    std::lock_guard<std::mutex> lock(mu);
    std::fputs(line.c_str(), stderr);
    return;
  }
  std::lock_guard<std::mutex> lock(mu);
  std::fprintf(stderr, "%s %c %.*s %.*s\n", ts.c_str(), LevelChar(level),
               static_cast<int>(component.size()), component.data(),
               static_cast<int>(message.size()), message.data());
}

}  // namespace onecard
