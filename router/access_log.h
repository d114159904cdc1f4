// The router's access log: one line per finished Generate call on stderr,
// component "access", with what an operator greps for:
//   ... I access request_id=rtr-7 tenant=ops priority=interactive
//       prompt_tokens=12 completion_tokens=16 ttft_ms=41.2 total_ms=230.5 status=OK
// (one line; ttft_ms=- when no token was sent, tenant=- before
// authentication). Values holding spaces, quotes or '=' are quoted. With the
// JSON log format (log.format: json, --log-format=json) the line is a JSON
// object (engine/common/log.cc).
// Tested by tests/router/access_log_test.cc and, in the real process, by
// tests/integration/ops_grpc_services_test.cc.
#ifndef ONECARD_ROUTER_ACCESS_LOG_H_
#define ONECARD_ROUTER_ACCESS_LOG_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace onecard::router {

struct AccessRecord {
  std::string request_id;
  std::string tenant;    // empty: not authenticated
  std::string priority;  // "interactive", "standard", "batch"
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  std::optional<absl::Duration> time_to_first_token;
  absl::Duration total_time;
  absl::StatusCode code = absl::StatusCode::kOk;
};

// The fields, "key=value" separated by spaces, in the order above.
std::string FormatAccessRecord(const AccessRecord& record);

// Writes FormatAccessRecord(record) as an info line of component "access".
void LogAccess(const AccessRecord& record);

}  // namespace onecard::router

#endif  // ONECARD_ROUTER_ACCESS_LOG_H_
