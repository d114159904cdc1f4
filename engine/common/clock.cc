// RealClock and FakeClock (see clock.h). Tested by tests/engine/common/clock_test.cc.
#include "engine/common/clock.h"

#include "absl/time/clock.h"

namespace onecard {

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
  absl::MutexLock lock(&mu_);
  if (d > absl::ZeroDuration()) now_ += d;
}

void FakeClock::Set(absl::Time t) {
  absl::MutexLock lock(&mu_);
  if (t > now_) now_ = t;
}

}  // namespace onecard
