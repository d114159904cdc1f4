// absl::Status <-> grpc::Status, the retry-after hint and gRPC code names.
// See status.h.
#include "services/common/status.h"

#include <cstdint>
#include <string>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace onecard::services {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  // Both enums follow the canonical codes 1..16; the static_cast is exact.
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

absl::Status WithRetryAfter(absl::Status status, absl::Duration retry_after) {
  if (status.ok()) return status;
  const int64_t ms = absl::ToInt64Milliseconds(retry_after);
  status.SetPayload(kRetryAfterMsKey, absl::Cord(absl::StrCat(ms)));
  return status;
}

std::optional<absl::Duration> RetryAfter(const absl::Status& status) {
  const absl::optional<absl::Cord> payload = status.GetPayload(kRetryAfterMsKey);
  int64_t ms = 0;
  if (!payload.has_value() || !absl::SimpleAtoi(std::string(*payload), &ms) || ms < 0) {
    return std::nullopt;
  }
  return absl::Milliseconds(ms);
}

void AddStatusTrailers(const absl::Status& status, grpc::ServerContextBase* context) {
  const std::optional<absl::Duration> retry_after = RetryAfter(status);
  if (!retry_after.has_value()) return;
  context->AddTrailingMetadata(kRetryAfterMsKey,
                               absl::StrCat(absl::ToInt64Milliseconds(*retry_after)));
}

std::optional<absl::Duration> RetryAfterFromTrailers(const grpc::ClientContext& context) {
  const auto& trailers = context.GetServerTrailingMetadata();
  const auto it = trailers.find(kRetryAfterMsKey);
  int64_t ms = 0;
  if (it == trailers.end() ||
      !absl::SimpleAtoi(std::string(it->second.data(), it->second.size()), &ms) || ms < 0) {
    return std::nullopt;
  }
  return absl::Milliseconds(ms);
}

const char* GrpcCodeName(int code) {
  static constexpr const char* kNames[] = {"OK",
                                           "CANCELLED",
                                           "UNKNOWN",
                                           "INVALID_ARGUMENT",
                                           "DEADLINE_EXCEEDED",
                                           "NOT_FOUND",
                                           "ALREADY_EXISTS",
                                           "PERMISSION_DENIED",
                                           "RESOURCE_EXHAUSTED",
                                           "FAILED_PRECONDITION",
                                           "ABORTED",
                                           "OUT_OF_RANGE",
                                           "UNIMPLEMENTED",
                                           "INTERNAL",
                                           "UNAVAILABLE",
                                           "DATA_LOSS",
                                           "UNAUTHENTICATED"};
  return code >= 0 && code <= 16 ? kNames[code] : "UNKNOWN";
}

absl::Time DeadlineFromChrono(std::chrono::system_clock::time_point deadline) {
  if (deadline == std::chrono::system_clock::time_point::max()) return absl::InfiniteFuture();
  return absl::FromChrono(deadline);
}

}  // namespace onecard::services
