// The load that `onecard-bench serve` offers: request classes (the four of
// ../shared/benchmarks.md, or a custom mix), how requests arrive (closed-loop
// users or Poisson arrivals), how long, and where to.
//
// Mix syntax (--mix): comma-separated classes
// NAME=WEIGHT:PROMPT/NEW[xTURNS][*BURST][@PRIORITY], e.g.
// "short=0.9:32/8@interactive,long=0.1:512/8*4@batch". WEIGHT is the class's
// share of the requests; *BURST makes its requests arrive BURST at a time. A
// preset name stands for its classes: "serve-mix" (short-qa 50/50,
// long-generation 200/1000, long-context 4000/200, multi-turn 5x(100/100),
// equal weights) or one of those class names alone.
// Tested by tests/tools/bench/serve/load_spec_test.cc.
#ifndef ONECARD_TOOLS_BENCH_SERVE_LOAD_SPEC_H_
#define ONECARD_TOOLS_BENCH_SERVE_LOAD_SPEC_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "onecard/v1/generation.pb.h"

namespace onecard::bench::serve {

struct RequestClass {
  std::string name;
  double weight = 1;
  int32_t prompt_tokens = 50;
  int32_t max_tokens = 50;
  int32_t turns = 1;  // > 1: a conversation; each turn's prompt holds the ones before
  int32_t burst = 1;  // conversations that arrive together
  onecard::v1::Priority priority = onecard::v1::PRIORITY_UNSPECIFIED;
};

enum class ArrivalMode { kClosedLoop, kPoisson };

struct LoadSpec {
  std::string target;   // host:port of a Generation service (router or worker)
  std::string api_key;  // sent as "authorization: Bearer <key>" when set
  std::string model;    // GenerateRequest.model; empty: the server's
  std::vector<RequestClass> mix;
  ArrivalMode mode = ArrivalMode::kClosedLoop;
  int32_t users = 1;             // closed loop: concurrent users
  double rate_per_second = 1;    // Poisson: mean arrivals per second
  int32_t max_in_flight = 4096;  // Poisson: arrivals beyond this wait
  int64_t num_requests = 100;    // conversations for multi-turn classes; 0 = until duration
  absl::Duration duration = absl::ZeroDuration();      // 0 = until num_requests
  int64_t warmup_requests = 0;                         // run first, not counted
  absl::Duration request_timeout = absl::Minutes(10);  // the gRPC deadline
  uint64_t seed = 1;
  int32_t vocab_size = 49152;  // synthetic prompt ids stay below it
  bool ignore_eos = true;      // every request generates max_tokens
  bool progress = true;        // a live line on stderr
};

// The classes of benchmarks.md.
std::vector<RequestClass> ServeMixClasses();
// Parses --mix (see above). InvalidArgument naming the class and the part.
absl::StatusOr<std::vector<RequestClass>> ParseMix(const std::string& mix);
// "interactive", "standard", "batch" (or the full enum names).
absl::StatusOr<onecard::v1::Priority> ParsePriority(const std::string& name);
// InvalidArgument naming the field when the spec cannot run.
absl::Status ValidateLoadSpec(const LoadSpec& spec);

}  // namespace onecard::bench::serve

#endif  // ONECARD_TOOLS_BENCH_SERVE_LOAD_SPEC_H_
