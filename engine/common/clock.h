// Clock: the injected time source of the engine (deadlines, queue time, TTFT,
// tokens per second) and of the router (token buckets, queue aging, queue
// timeouts, worker ejection). RealClock reads absl::Now(); FakeClock only
// moves when a test advances it, so time-dependent logic is tested
// deterministically. Debian's Abseil 20220623 has no public absl::Clock,
// hence this one. Tested by tests/engine/common/clock_test.cc.
#ifndef ONECARD_ENGINE_COMMON_CLOCK_H_
#define ONECARD_ENGINE_COMMON_CLOCK_H_

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace onecard {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;
};

// The process clock; a shared instance that is never destroyed.
class RealClock : public Clock {
 public:
  static Clock* Get();
  absl::Time Now() const override;
};

// A clock that stands still until Advance or Set moves it; it never goes
// back (a negative Advance or a Set into the past is ignored). Thread-safe.
class FakeClock : public Clock {
 public:
  explicit FakeClock(absl::Time start = absl::FromUnixSeconds(1'700'000'000)) : now_(start) {}
  absl::Time Now() const override;
  void Advance(absl::Duration d);  // d >= 0
  void Set(absl::Time t);          // t >= Now()

 private:
  mutable absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
};

}  // namespace onecard

#endif  // ONECARD_ENGINE_COMMON_CLOCK_H_
