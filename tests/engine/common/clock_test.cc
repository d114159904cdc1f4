// Tests engine/common/clock.h: FakeClock moves only forward and only when
// told; RealClock is shared and follows absl::Now() (checked for order only,
// no wall-clock thresholds).
#include "engine/common/clock.h"

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace onecard {
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

TEST(FakeClockTest, MovesOnlyForward) {
  const absl::Time start = absl::FromUnixSeconds(100);
  FakeClock clock(start);
  clock.Advance(absl::Seconds(2));
  EXPECT_EQ(clock.Now(), start + absl::Seconds(2));
  clock.Advance(-absl::Seconds(5));  // ignored
  clock.Set(start);                  // ignored: in the past
  EXPECT_EQ(clock.Now(), start + absl::Seconds(2));
  clock.Set(start + absl::Seconds(10));
  EXPECT_EQ(clock.Now(), start + absl::Seconds(10));
}

TEST(RealClockTest, IsSharedAndMonotoneAgainstAbslNow) {
  absl::Time before = absl::Now();
  absl::Time read = RealClock::Get()->Now();
  absl::Time after = absl::Now();
  EXPECT_LE(before, read);
  EXPECT_LE(read, after);
  EXPECT_EQ(RealClock::Get(), RealClock::Get());
}

}  // namespace
}  // namespace onecard
