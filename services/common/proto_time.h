// absl time <-> google.protobuf.Duration / Timestamp, in one place.
// Tested by tests/services/common/proto_time_test.cc.
#ifndef ONECARD_SERVICES_COMMON_PROTO_TIME_H_
#define ONECARD_SERVICES_COMMON_PROTO_TIME_H_

#include "absl/time/time.h"
#include "google/protobuf/duration.pb.h"
#include "google/protobuf/timestamp.pb.h"

namespace onecard::services {

absl::Duration FromProtoDuration(const google::protobuf::Duration& d);
// Finite durations only (infinite ones saturate to the proto's range).
void ToProtoDuration(absl::Duration d, google::protobuf::Duration* out);
absl::Time FromProtoTimestamp(const google::protobuf::Timestamp& t);
void ToProtoTimestamp(absl::Time t, google::protobuf::Timestamp* out);

}  // namespace onecard::services

#endif  // ONECARD_SERVICES_COMMON_PROTO_TIME_H_
