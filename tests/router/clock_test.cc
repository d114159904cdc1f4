// Tests router/clock.h: FakeClock moves only when told; RealClock follows
// absl::Now() (checked for order only, no wall-clock thresholds).
#include "router/clock.h"

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace onecard::router {
namespace {

TEST(FakeClockTest, StandsStillUntilAdvanced) {
  FakeClock clock(absl::FromUnixSeconds(100));
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(100));
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(100));
  clock.Advance(absl::Milliseconds(250));
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(100) + absl::Milliseconds(250));
  clock.Set(absl::FromUnixSeconds(200));
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(200));
}

TEST(RealClockTest, IsMonotoneAgainstAbslNow) {
  absl::Time before = absl::Now();
  absl::Time read = RealClock::Get()->Now();
  absl::Time after = absl::Now();
  EXPECT_LE(before, read);
  EXPECT_LE(read, after);
  EXPECT_EQ(RealClock::Get(), RealClock::Get());
}

}  // namespace
}  // namespace onecard::router
