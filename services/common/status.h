// The one place where absl::Status becomes grpc::Status (and back). Codes map
// one to one (both follow the canonical code list); the message is kept.
// A status may carry a retry hint as a payload (WithRetryAfter); servers copy
// it into the `retry-after-ms` trailer with AddStatusTrailers, clients read it
// back with RetryAfterFromTrailers. GrpcCodeName names a code for metrics.
// Tested by tests/services/common/status_test.cc.
#ifndef ONECARD_SERVICES_COMMON_STATUS_H_
#define ONECARD_SERVICES_COMMON_STATUS_H_

#include <chrono>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "grpcpp/client_context.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/status.h"

namespace onecard::services {

// Trailer (and absl payload URL) of the retry hint, in integer milliseconds.
inline constexpr char kRetryAfterMsKey[] = "retry-after-ms";

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

// Returns `status` with a retry hint attached (no-op on OK).
absl::Status WithRetryAfter(absl::Status status, absl::Duration retry_after);
// The hint attached by WithRetryAfter, if any.
std::optional<absl::Duration> RetryAfter(const absl::Status& status);

// Copies the status's retry hint into the call's trailing metadata.
void AddStatusTrailers(const absl::Status& status, grpc::ServerContextBase* context);
// The retry hint a server sent in its trailers, if any.
std::optional<absl::Duration> RetryAfterFromTrailers(const grpc::ClientContext& context);

// The name of a grpc::StatusCode number ("OK", "RESOURCE_EXHAUSTED", ...):
// the `code` label of request counters and the error keys of load reports.
// Numbers outside 0..16 are "UNKNOWN".
const char* GrpcCodeName(int code);

// A gRPC deadline as an absl::Time (InfiniteFuture when none was set).
absl::Time DeadlineFromChrono(std::chrono::system_clock::time_point deadline);

}  // namespace onecard::services

#endif  // ONECARD_SERVICES_COMMON_STATUS_H_
