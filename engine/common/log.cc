#include "engine/common/log.h"

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace onecard {
namespace {

LogLevel ThresholdFromEnv() {
  const char* env = std::getenv("ONECARD_LOG_LEVEL");
  if (env == nullptr) return LogLevel::kInfo;
  const std::string v(env);
  if (v == "debug") return LogLevel::kDebug;
  if (v == "warn") return LogLevel::kWarn;
  if (v == "error") return LogLevel::kError;
  return LogLevel::kInfo;
}

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

// ONECARD_LOG_FORMAT=json: one JSON object a line, for log collectors.
bool JsonFromEnv() {
  const char* env = std::getenv("ONECARD_LOG_FORMAT");
  return env != nullptr && std::string(env) == "json";
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

bool LogEnabled(LogLevel level) {
  static const LogLevel threshold = ThresholdFromEnv();
  return level >= threshold;
}

void LogLine(LogLevel level, std::string_view component, std::string_view message) {
  static std::mutex mu;
  const std::string ts = absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(), absl::UTCTimeZone());
  static const bool json = JsonFromEnv();
  if (json) {
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
