// The router's access log line. See access_log.h.
#include "router/access_log.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "engine/common/log.h"

namespace onecard::router {
namespace {

std::string Value(const std::string& v) {
  if (v.empty()) return "-";
  if (v.find_first_of(" \"=\t\n") == std::string::npos) return v;
  return absl::StrCat("\"", absl::StrReplaceAll(v, {{"\\", "\\\\"}, {"\"", "\\\""}, {"\n", "\\n"}}),
                      "\"");
}

std::string Milliseconds(absl::Duration d) {
  return absl::StrFormat("%.1f", absl::ToDoubleMilliseconds(d));
}

}  // namespace

std::string FormatAccessRecord(const AccessRecord& r) {
  return absl::StrCat(
      "request_id=", Value(r.request_id), " tenant=", Value(r.tenant),
      " priority=", Value(r.priority), " prompt_tokens=", r.prompt_tokens,
      " completion_tokens=", r.completion_tokens,
      " ttft_ms=", r.time_to_first_token ? Milliseconds(*r.time_to_first_token) : "-",
      " total_ms=", Milliseconds(r.total_time), " status=", absl::StatusCodeToString(r.code));
}

void LogAccess(const AccessRecord& record) {
  Log(LogLevel::kInfo, "access", "%s", FormatAccessRecord(record));
}

}  // namespace onecard::router
