// Bounds of configured values that could exhaust the host's memory or
// threads, or keep a core busy: a value outside its range is refused at
// start with an InvalidArgument naming the field and the allowed range
// ("num_threads: 100000 is outside [0, 8] (4 threads a core, 2 cores)").
// The ranges are documented beside the fields in config.proto.
// Tested by tests/services/common/config_bounds_test.cc.
#ifndef ONECARD_SERVICES_COMMON_CONFIG_BOUNDS_H_
#define ONECARD_SERVICES_COMMON_CONFIG_BOUNDS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace onecard::services {

// The shortest period of any loop a config sets (report, watch and tick
// intervals, backoffs): shorter ones would keep a core busy.
inline constexpr absl::Duration kMinConfigInterval = absl::Milliseconds(10);
// The longest interval or timeout a config may set.
inline constexpr absl::Duration kMaxConfigDuration = absl::Hours(24);
// Bytes of one request or message: gRPC's limit is an int.
inline constexpr int64_t kMaxMessageBytes = 256ll << 20;
// Tokens of a context, a step or a request.
inline constexpr int64_t kMaxTokens = 1 << 20;

// `value` in [lo, hi]; `why` (optional) explains the range in the error.
absl::Status CheckRange(absl::string_view field, int64_t value, int64_t lo, int64_t hi,
                        absl::string_view why = "");
absl::Status CheckDurationRange(absl::string_view field, absl::Duration value, absl::Duration lo,
                                absl::Duration hi);
// A finite double in [lo, hi].
absl::Status CheckDoubleRange(absl::string_view field, double value, double lo, double hi);

// A thread count: 0 (all cores) up to MaxConfiguredThreads().
absl::Status CheckThreads(absl::string_view field, int64_t value);
// A host memory size in bytes: 0 (the default) up to the host's memory.
absl::Status CheckHostBytes(absl::string_view field, int64_t value);

}  // namespace onecard::services

#endif  // ONECARD_SERVICES_COMMON_CONFIG_BOUNDS_H_
