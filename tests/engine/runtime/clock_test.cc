// Tests of RealClock and FakeClock.
#include "engine/runtime/clock.h"

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace onecard::engine {
namespace {

TEST(ClockTest, FakeClockMovesOnlyForward) {
  const absl::Time start = absl::FromUnixSeconds(100);
  FakeClock clock(start);
  EXPECT_EQ(clock.Now(), start);
  clock.Advance(absl::Seconds(2));
  EXPECT_EQ(clock.Now(), start + absl::Seconds(2));
  clock.Advance(-absl::Seconds(5));  // ignored
  clock.Set(start);                  // ignored: in the past
  EXPECT_EQ(clock.Now(), start + absl::Seconds(2));
  clock.Set(start + absl::Seconds(10));
  EXPECT_EQ(clock.Now(), start + absl::Seconds(10));
}

TEST(ClockTest, RealClockIsSharedAndNearNow) {
  Clock* clock = RealClock::Get();
  EXPECT_EQ(clock, RealClock::Get());
  EXPECT_LT(absl::AbsDuration(clock->Now() - absl::Now()), absl::Minutes(1));
}

}  // namespace
}  // namespace onecard::engine
