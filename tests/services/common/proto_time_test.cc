// Tests of the absl <-> protobuf time conversions, against values worked
// out by hand (negative durations keep seconds and nanos of one sign).
#include "services/common/proto_time.h"

#include "gtest/gtest.h"

namespace onecard::services {
namespace {

TEST(ProtoTimeTest, Durations) {
  google::protobuf::Duration d;
  ToProtoDuration(absl::Milliseconds(1500), &d);
  EXPECT_EQ(d.seconds(), 1);
  EXPECT_EQ(d.nanos(), 500'000'000);
  EXPECT_EQ(FromProtoDuration(d), absl::Milliseconds(1500));
  ToProtoDuration(-absl::Milliseconds(1500), &d);
  EXPECT_EQ(d.seconds(), -1);
  EXPECT_EQ(d.nanos(), -500'000'000);
  EXPECT_EQ(FromProtoDuration(d), -absl::Milliseconds(1500));
  ToProtoDuration(absl::InfiniteDuration(), &d);
  EXPECT_EQ(d.seconds(), 315'576'000'000);
}

TEST(ProtoTimeTest, Timestamps) {
  google::protobuf::Timestamp t;
  const absl::Time when = absl::FromUnixSeconds(1'700'000'000) + absl::Milliseconds(250);
  ToProtoTimestamp(when, &t);
  EXPECT_EQ(t.seconds(), 1'700'000'000);
  EXPECT_EQ(t.nanos(), 250'000'000);
  EXPECT_EQ(FromProtoTimestamp(t), when);
  ToProtoTimestamp(absl::FromUnixSeconds(-1) + absl::Milliseconds(250), &t);
  EXPECT_EQ(t.seconds(), -1);
  EXPECT_EQ(t.nanos(), 250'000'000) << "nanos are never negative in a Timestamp";
}

}  // namespace
}  // namespace onecard::services
