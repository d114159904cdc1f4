// Test time budgets under sanitizers. A sanitizer build (scripts/sanitize.sh)
// runs several times slower, so its tests are compiled with
// ONECARD_TEST_TIME_SCALE (cmake -DONECARD_TEST_TIME_SCALE=N, which also
// multiplies each ctest TIMEOUT); a normal build leaves it undefined, and
// every budget here is then exactly the one written in the test. Deadlines,
// timeouts and the time windows in which a test counts work go through
// ScaledTime; thresholds (how much work, which ratio) stay as written.
// Header-only; used by the services', router's and integration tests.
#ifndef ONECARD_TESTS_TESTING_TIME_SCALE_H_
#define ONECARD_TESTS_TESTING_TIME_SCALE_H_

#include <chrono>

#include "absl/time/time.h"

#ifndef ONECARD_TEST_TIME_SCALE
#define ONECARD_TEST_TIME_SCALE 1
#endif

namespace onecard::testing {

inline constexpr int kTestTimeScale = ONECARD_TEST_TIME_SCALE;
static_assert(kTestTimeScale >= 1, "ONECARD_TEST_TIME_SCALE is a slowdown: 1 or more");

// A test's time budget, times the build's slowdown.
inline absl::Duration ScaledTime(absl::Duration budget) { return budget * kTestTimeScale; }

// The same for std::chrono budgets (gRPC deadlines, condition waits).
template <typename Rep, typename Period>
std::chrono::duration<Rep, Period> ScaledTime(std::chrono::duration<Rep, Period> budget) {
  return budget * kTestTimeScale;
}

}  // namespace onecard::testing

#endif  // ONECARD_TESTS_TESTING_TIME_SCALE_H_
