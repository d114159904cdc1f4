// Tests of services/common/config_bounds.h: values inside their range pass,
// values outside are InvalidArgument naming the field and the range.
#include "services/common/config_bounds.h"

#include <limits>

#include "engine/common/host_info.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace onecard::services {
namespace {

using ::testing::HasSubstr;

TEST(ConfigBoundsTest, IntegersNameFieldValueAndRange) {
  EXPECT_TRUE(CheckRange("a.b", 5, 0, 5).ok());
  const absl::Status s = CheckRange("a.b", 6, 0, 5, "why");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "a.b: 6 is outside [0, 5] (why)");
  EXPECT_EQ(CheckRange("a.b", -1, 0, 5).message(), "a.b: -1 is outside [0, 5]");
}

TEST(ConfigBoundsTest, Durations) {
  EXPECT_TRUE(
      CheckDurationRange("t", absl::Milliseconds(10), kMinConfigInterval, absl::Hours(1)).ok());
  EXPECT_EQ(
      CheckDurationRange("t", absl::Nanoseconds(1), kMinConfigInterval, absl::Hours(1)).message(),
      "t: 1ns is outside [10ms, 1h]");
}

TEST(ConfigBoundsTest, DoublesMustBeFinite) {
  EXPECT_TRUE(CheckDoubleRange("r", 0.5, 0.0, 1.0).ok());
  EXPECT_FALSE(CheckDoubleRange("r", std::numeric_limits<double>::quiet_NaN(), 0.0, 1.0).ok());
  EXPECT_FALSE(CheckDoubleRange("r", std::numeric_limits<double>::infinity(), 0.0, 1e300).ok());
}

TEST(ConfigBoundsTest, ThreadsAndHostMemory) {
  EXPECT_TRUE(CheckThreads("num_threads", MaxConfiguredThreads()).ok());
  const absl::Status threads = CheckThreads("num_threads", 100000);
  EXPECT_THAT(threads.message(), HasSubstr("num_threads: 100000 is outside [0, "));
  EXPECT_THAT(threads.message(), HasSubstr("cores"));
  EXPECT_TRUE(CheckHostBytes("kv_cache.cache_bytes", 256 << 20).ok());
  EXPECT_THAT(CheckHostBytes("kv_cache.cache_bytes", 1000000000000000).message(),
              HasSubstr("kv_cache.cache_bytes: 1000000000000000 is outside [0, "));
}

}  // namespace
}  // namespace onecard::services
