// The serve experiments that need a local cluster, as functions shared by
// onecard-bench (serve_scenarios.cc) and the integration tests:
//
// RunPriorityComparison (scenario serve-priority): one onecard-worker, and
// two routers in front of it — one FIFO (queue.fifo), one with priority
// scheduling — each dispatching at most `max_in_flight_per_worker` requests
// to the worker so the queue stays in the router. The same seeded load (a
// short/long mix) goes through the FIFO router, then through the priority
// one. Result: the short class's P95 TTFT under each, and FIFO ÷ priority.
//
// RunRouterOverhead (scenario router-overhead): one worker and one router;
// `pairs` pairs of requests, one straight to the worker's Generation service
// and one through the router, alternating which goes first, one at a time
// and each with a fresh prompt. Result: both latency distributions and the
// added P50/P99 (router minus direct) of TTFT and end-to-end latency.
// Tested by tests/integration/router_priority_test.cc and
// router_overhead_test.cc.
#ifndef ONECARD_TOOLS_BENCH_SERVE_EXPERIMENTS_H_
#define ONECARD_TOOLS_BENCH_SERVE_EXPERIMENTS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tools/bench/serve/load_spec.h"
#include "tools/bench/serve/load_stats.h"

namespace onecard::bench::serve {

struct ClusterOptions {
  std::string worker_bin;  // default FindBinary("services/worker/onecard-worker")
  std::string router_bin;  // default FindBinary("router/onecard-router")
  std::string model_path = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
  std::string log_dir = "/tmp";          // process logs: <log_dir>/<name>.log
  std::vector<std::string> worker_args;  // extra flags
  std::vector<std::string> router_args;
};

struct PriorityComparisonOptions {
  ClusterOptions cluster;
  LoadSpec load;  // target is filled in; mix must have a class named `short_class`
  std::string short_class = "short";
  int32_t max_in_flight_per_worker = 1;
};

struct PriorityComparison {
  LoadResult fifo;
  LoadResult priority;
  double short_p95_ttft_fifo_s = 0;
  double short_p95_ttft_priority_s = 0;
  double ratio = 0;  // FIFO / priority
};

absl::StatusOr<PriorityComparison> RunPriorityComparison(const PriorityComparisonOptions& options);

struct RouterOverheadOptions {
  ClusterOptions cluster;
  int32_t pairs = 100;
  int32_t prompt_tokens = 16;
  int32_t max_tokens = 4;
  uint64_t seed = 7;
};

struct RouterOverhead {
  Percentiles direct_ttft, router_ttft, direct_e2e, router_e2e;  // seconds
  double added_ttft_p50_s = 0, added_ttft_p99_s = 0;
  double added_e2e_p50_s = 0, added_e2e_p99_s = 0;
  int64_t failed = 0;
};

absl::StatusOr<RouterOverhead> RunRouterOverhead(const RouterOverheadOptions& options);

// Fills empty binary paths with FindBinary's.
ClusterOptions WithDefaultBinaries(ClusterOptions options);

}  // namespace onecard::bench::serve

#endif  // ONECARD_TOOLS_BENCH_SERVE_EXPERIMENTS_H_
