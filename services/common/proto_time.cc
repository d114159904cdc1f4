// Time conversions. See proto_time.h.
#include "services/common/proto_time.h"

#include <cstdint>

namespace onecard::services {
namespace {

// Proto Duration/Timestamp range: +-315,576,000,000 seconds (10,000 years).
constexpr int64_t kMaxSeconds = 315'576'000'000;

}  // namespace

absl::Duration FromProtoDuration(const google::protobuf::Duration& d) {
  return absl::Seconds(d.seconds()) + absl::Nanoseconds(d.nanos());
}

void ToProtoDuration(absl::Duration d, google::protobuf::Duration* out) {
  if (d >= absl::Seconds(kMaxSeconds)) d = absl::Seconds(kMaxSeconds);
  if (d <= -absl::Seconds(kMaxSeconds)) d = -absl::Seconds(kMaxSeconds);
  absl::Duration rem;
  const int64_t seconds = absl::IDivDuration(d, absl::Seconds(1), &rem);
  out->set_seconds(seconds);
  // Same sign as seconds, as the proto requires; IDivDuration truncates.
  out->set_nanos(static_cast<int32_t>(absl::ToInt64Nanoseconds(rem)));
}

absl::Time FromProtoTimestamp(const google::protobuf::Timestamp& t) {
  return absl::FromUnixSeconds(t.seconds()) + absl::Nanoseconds(t.nanos());
}

void ToProtoTimestamp(absl::Time t, google::protobuf::Timestamp* out) {
  const int64_t seconds = absl::ToUnixSeconds(t);  // floors
  out->set_seconds(seconds);
  out->set_nanos(
      static_cast<int32_t>(absl::ToInt64Nanoseconds(t - absl::FromUnixSeconds(seconds))));
}

}  // namespace onecard::services
