// RealClock and FakeClock (see clock.h). Tested by tests/router/clock_test.cc.
#include "router/clock.h"

#include <cassert>

#include "absl/time/clock.h"

namespace onecard::router {

Clock* RealClock::Get() {
  static RealClock* const clock = new RealClock();
  return clock;
}

absl::Time RealClock::Now() const { return absl::Now(); }

absl::Time FakeClock::Now() const {
  absl::MutexLock lock(&mu_);
  return now_;
}

void FakeClock::Advance(absl::Duration d) {
  assert(d >= absl::ZeroDuration() && "a clock never goes back");
  absl::MutexLock lock(&mu_);
  now_ += d;
}

void FakeClock::Set(absl::Time t) {
  absl::MutexLock lock(&mu_);
  assert(t >= now_ && "a clock never goes back");
  now_ = t;
}

}  // namespace onecard::router
