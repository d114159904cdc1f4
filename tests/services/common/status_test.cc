// Tests of the absl::Status <-> grpc::Status mapping: every canonical code
// maps to the gRPC code of the same name (gRPC's own table is the reference)
// and back, with the message kept; the retry hint survives; code names
// match absl's.
#include "services/common/status.h"

#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace onecard::services {
namespace {

const std::vector<std::pair<absl::StatusCode, grpc::StatusCode>>& CodePairs() {
  static const auto* pairs = new std::vector<std::pair<absl::StatusCode, grpc::StatusCode>>{
      {absl::StatusCode::kCancelled, grpc::StatusCode::CANCELLED},
      {absl::StatusCode::kUnknown, grpc::StatusCode::UNKNOWN},
      {absl::StatusCode::kInvalidArgument, grpc::StatusCode::INVALID_ARGUMENT},
      {absl::StatusCode::kDeadlineExceeded, grpc::StatusCode::DEADLINE_EXCEEDED},
      {absl::StatusCode::kNotFound, grpc::StatusCode::NOT_FOUND},
      {absl::StatusCode::kAlreadyExists, grpc::StatusCode::ALREADY_EXISTS},
      {absl::StatusCode::kPermissionDenied, grpc::StatusCode::PERMISSION_DENIED},
      {absl::StatusCode::kResourceExhausted, grpc::StatusCode::RESOURCE_EXHAUSTED},
      {absl::StatusCode::kFailedPrecondition, grpc::StatusCode::FAILED_PRECONDITION},
      {absl::StatusCode::kAborted, grpc::StatusCode::ABORTED},
      {absl::StatusCode::kOutOfRange, grpc::StatusCode::OUT_OF_RANGE},
      {absl::StatusCode::kUnimplemented, grpc::StatusCode::UNIMPLEMENTED},
      {absl::StatusCode::kInternal, grpc::StatusCode::INTERNAL},
      {absl::StatusCode::kUnavailable, grpc::StatusCode::UNAVAILABLE},
      {absl::StatusCode::kDataLoss, grpc::StatusCode::DATA_LOSS},
      {absl::StatusCode::kUnauthenticated, grpc::StatusCode::UNAUTHENTICATED},
  };
  return *pairs;
}

TEST(StatusTest, EveryCodeMapsToItsNamesake) {
  for (const auto& [absl_code, grpc_code] : CodePairs()) {
    const grpc::Status g = ToGrpcStatus(absl::Status(absl_code, "why"));
    EXPECT_EQ(g.error_code(), grpc_code) << absl::StatusCodeToString(absl_code);
    EXPECT_EQ(g.error_message(), "why");
    const absl::Status back = FromGrpcStatus(grpc::Status(grpc_code, "because"));
    EXPECT_EQ(back.code(), absl_code);
    EXPECT_EQ(back.message(), "because");
  }
}

TEST(StatusTest, OkStaysOk) {
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
  EXPECT_TRUE(FromGrpcStatus(grpc::Status::OK).ok());
}

TEST(StatusTest, RetryAfterRoundTrips) {
  const absl::Status s =
      WithRetryAfter(absl::ResourceExhaustedError("queue full"), absl::Milliseconds(250));
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message(), "queue full");
  EXPECT_EQ(RetryAfter(s), absl::Milliseconds(250));
  EXPECT_EQ(RetryAfter(absl::ResourceExhaustedError("no hint")), std::nullopt);
  EXPECT_TRUE(WithRetryAfter(absl::OkStatus(), absl::Seconds(1)).ok());
}

TEST(StatusTest, GrpcCodeNameIsTheCanonicalName) {
  EXPECT_STREQ(GrpcCodeName(0), "OK");
  for (const auto& [absl_code, grpc_code] : CodePairs()) {
    EXPECT_EQ(GrpcCodeName(static_cast<int>(grpc_code)), absl::StatusCodeToString(absl_code));
  }
  EXPECT_STREQ(GrpcCodeName(-1), "UNKNOWN");
  EXPECT_STREQ(GrpcCodeName(17), "UNKNOWN");
}

TEST(StatusTest, DeadlineFromChrono) {
  EXPECT_EQ(DeadlineFromChrono(std::chrono::system_clock::time_point::max()),
            absl::InfiniteFuture());
  const auto t = std::chrono::system_clock::time_point(std::chrono::seconds(1700000000));
  EXPECT_EQ(DeadlineFromChrono(t), absl::FromUnixSeconds(1700000000));
}

}  // namespace
}  // namespace onecard::services
