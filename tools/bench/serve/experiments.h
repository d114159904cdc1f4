// The serve experiments that need a local cluster, as functions shared by
// onecard-bench (serve_scenarios.cc) and the integration tests:
//
// RunPriorityComparison (scenario serve-priority): one onecard-worker behind
// a FIFO router (queue.fifo) with the worker's scheduler in arrival order
// too (--fifo), then a fresh worker behind a router with priority
// scheduling (and the worker's class-aware scheduler), each router dispatching at most
// `max_in_flight_per_worker` requests to its worker so the queue stays in the
// router. The same seeded load (a short/long mix: same classes, arrival
// times and prompts) goes through each. Result: the short class's P95 TTFT
// under each, and FIFO ÷ priority.
//
// RunRouterOverhead (scenario router-overhead): one worker and one router;
// `pairs` rounds of requests, one straight to the worker's Generation
// service, one through the router's gRPC API and one through its
// OpenAI-compatible HTTP API (POST /v1/completions with the same token ids,
// streamed as server-sent events over a kept-alive connection; TTFT is the
// first event with text), rotating which goes first, one at a time and each
// with a fresh prompt. Result: the three latency distributions and the added
// P50/P99 (router minus direct) of TTFT and end-to-end latency for each API.
// RunServeLoad (scenario serve-load, its first part): one worker behind one
// router with priority scheduling; the load through the router while the
// worker's /metrics is read at an interval: the gauges an autoscaler uses
// (requests waiting and running, KV usage) as a time series.
//
// RunStability (scenario stability): one worker behind one router; a
// warm-up, the card's used memory (nvidia-smi), the load, the card's used
// memory again.
//
// Tested by tests/integration/router_priority_test.cc,
// router_overhead_test.cc and serve_experiments_test.cc.
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
  // The priority router's queue.aging_step: how long a batch request may be
  // overtaken (2 steps + the cost term) before it ranks as interactive.
  absl::Duration aging_step = absl::Seconds(30);
  // > 0: before the FIFO run, measure the worker's mean time per request of
  // each class (calibration_requests of each, one at a time, prompts of their
  // own) and set load.rate_per_second (Poisson) to target_load times the
  // capacity that gives for the mix. The same rate then serves both runs, so
  // the offered load follows the machine's speed.
  double target_load = 0;
  int32_t calibration_requests = 4;
  // > 1: calibrate instead with this many closed-loop users over the whole
  // mix (calibration_requests each), capacity = completed requests / wall
  // time: a batching worker's capacity at that concurrency (set it to
  // max_in_flight_per_worker).
  int32_t calibration_users = 1;
};

struct PriorityComparison {
  LoadResult fifo;
  LoadResult priority;
  double short_p95_ttft_fifo_s = 0;
  double short_p95_ttft_priority_s = 0;
  double ratio = 0;                // FIFO / priority
  double rate_per_second = 0;      // the Poisson rate both runs used
  double capacity_per_second = 0;  // calibrated (0 without calibration)
};

absl::StatusOr<PriorityComparison> RunPriorityComparison(const PriorityComparisonOptions& options);

struct RouterOverheadOptions {
  ClusterOptions cluster;
  int32_t pairs = 100;
  int32_t prompt_tokens = 16;
  int32_t max_tokens = 4;
  uint64_t seed = 7;
  int32_t admission_requests = 2000;  // 0: skip the admissions/s part
  // Each admission request's deadline: it is admitted, then expires in the
  // router's queue (the worker is paused). A slower build needs a longer one
  // to reach admission at all.
  absl::Duration admission_deadline = absl::Milliseconds(20);
};

struct RouterOverhead {
  Percentiles direct_ttft, router_ttft, direct_e2e, router_e2e;  // seconds; router: gRPC
  double added_ttft_p50_s = 0, added_ttft_p99_s = 0;
  double added_e2e_p50_s = 0, added_e2e_p99_s = 0;
  // Per pair, router TTFT minus direct TTFT: less noisy than the difference
  // of two percentiles when the machine is shared.
  Percentiles paired_ttft_difference;
  // The same through the HTTP API.
  Percentiles http_ttft, http_e2e;
  double added_http_ttft_p50_s = 0, added_http_ttft_p99_s = 0;
  double added_http_e2e_p50_s = 0, added_http_e2e_p99_s = 0;
  Percentiles paired_http_ttft_difference;
  int64_t failed = 0;  // rounds with a failed request (left out of every figure)
  double admissions_per_second = 0;
};

absl::StatusOr<RouterOverhead> RunRouterOverhead(const RouterOverheadOptions& options);

struct MetricsSample {
  double t_s = 0;  // since the load started
  double waiting = 0, running = 0, kv_usage_ratio = 0;
};

struct ServeLoadOptions {
  ClusterOptions cluster;
  LoadSpec load;  // target is filled in
  absl::Duration metrics_interval = absl::Milliseconds(250);
};

struct ServeLoad {
  LoadResult result;
  std::vector<MetricsSample> samples;  // the worker's gauges during the load
};

absl::StatusOr<ServeLoad> RunServeLoad(const ServeLoadOptions& options);

struct StabilityOptions {
  ClusterOptions cluster;
  LoadSpec load;  // target is filled in; its warm-up runs before the first reading
};

struct Stability {
  LoadResult result;
  // The card's used memory (nvidia-smi memory.used, GPU 0), bytes; -1
  // where nvidia-smi gives none (a machine without a GPU).
  int64_t device_memory_before = -1;
  int64_t device_memory_after = -1;
  int64_t worker_rss_before = 0, worker_rss_after = 0;  // bytes
};

absl::StatusOr<Stability> RunStability(const StabilityOptions& options);

// Fills empty binary paths with FindBinary's.
ClusterOptions WithDefaultBinaries(ClusterOptions options);

}  // namespace onecard::bench::serve

#endif  // ONECARD_TOOLS_BENCH_SERVE_EXPERIMENTS_H_
