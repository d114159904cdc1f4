// LoadRunner: drives a LoadSpec against a Generation service over gRPC with
// the callback API (no thread per stream, so thousands of concurrent streams
// fit in one process) and records every request: time to first token (the
// first chunk holding a token), tokens, end-to-end latency and the status.
//
// Closed loop: `users` conversations run at once and each one that ends
// starts the next. Poisson: a scheduler thread starts conversations at
// exponentially distributed gaps (mean 1 / rate), holding back past
// max_in_flight. A conversation is one request, or `turns` requests in order
// whose prompts grow by the previous turn's prompt and answer. Class choice,
// arrival gaps and prompt ids come from the seed, so a spec offers the same
// load every run. A live progress line goes to stderr once a second.
// Tested by tests/tools/bench/serve/load_runner_test.cc (a fake Generation
// server in process).
#ifndef ONECARD_TOOLS_BENCH_SERVE_LOAD_RUNNER_H_
#define ONECARD_TOOLS_BENCH_SERVE_LOAD_RUNNER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "tools/bench/serve/load_spec.h"
#include "tools/bench/serve/load_stats.h"

namespace onecard::bench::serve {

// The prompt ids of conversation `index`, turn 0: `n` ids in
// [100, vocab_size) from the seed (clear of special tokens).
std::vector<int32_t> SyntheticPrompt(uint64_t seed, int64_t index, int32_t n, int32_t vocab_size);

// The seed of a class's prompts: the run's seed mixed with the class's name
// and prompt length, so that runs of different classes against one worker
// share no prompt prefix (SyntheticPrompt's ids for one index are a prefix of
// its longer prompts), which the worker's prefix cache would otherwise find.
uint64_t ClassPromptSeed(uint64_t seed, const RequestClass& cls);

struct LoadRun {
  LoadResult result;
  std::vector<RequestRecord> records;  // the counted ones, in completion order
};

// Runs the warm-up (not counted), then the measured load. Errors only for a
// spec that cannot run; failed requests are counted, not returned.
absl::StatusOr<LoadRun> RunLoad(const LoadSpec& spec);

}  // namespace onecard::bench::serve

#endif  // ONECARD_TOOLS_BENCH_SERVE_LOAD_RUNNER_H_
