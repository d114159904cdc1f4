// The worker's Prometheus metrics (names listed in docs/metrics.md):
// request outcomes and latency histograms observed by the streams, step
// durations observed by the engine's on_step hook, and the engine's gauges
// and counters (waiting, running, KV blocks, tokens, preemptions, KV swap) read from
// Engine::Stats at scrape time, so /metrics and the load reports read the
// same numbers.
// Tested by tests/services/worker/worker_metrics_test.cc.
#ifndef ONECARD_SERVICES_WORKER_WORKER_METRICS_H_
#define ONECARD_SERVICES_WORKER_WORKER_METRICS_H_

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "engine/runtime/engine.h"
#include "prometheus/collectable.h"
#include "prometheus/counter.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace onecard::services {

// What the scrape-time gauges read.
struct WorkerSnapshot {
  engine::EngineStats stats;  // zeros before the engine is loaded
  int64_t active_streams = 0;
  bool ready = false;  // engine loaded, not draining
  bool draining = false;
};

struct RequestRecord {
  std::string outcome;  // see OutcomeLabel / RejectionLabel
  std::optional<absl::Duration> time_to_first_token;
  std::optional<absl::Duration> time_per_output_token;  // needs >= 2 tokens
  absl::Duration e2e_latency;
  // The engine's usage of a request that reached it (zeros otherwise):
  // prompt tokens, and those of them served from the prefix cache.
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;
};

class WorkerMetrics {
 public:
  WorkerMetrics(prometheus::Registry& registry, const std::string& model,
                const std::string& backend);

  void ObserveRequest(const RequestRecord& record);
  void ObserveStep(const engine::StepInfo& step);

  // A Collectable for the engine-derived families; `source` is called on
  // every scrape (from the HTTP server's threads).
  static std::shared_ptr<prometheus::Collectable> EngineCollectable(
      std::function<WorkerSnapshot()> source);

 private:
  prometheus::Family<prometheus::Counter>& requests_;
  std::map<std::string, prometheus::Counter*> requests_by_outcome_;
  prometheus::Histogram& ttft_;
  prometheus::Histogram& tpot_;
  prometheus::Histogram& e2e_;
  prometheus::Counter& prefix_cache_hit_tokens_;
  prometheus::Counter& prefix_cache_miss_tokens_;
  prometheus::Histogram& step_;
  prometheus::Histogram& step_host_;  // duration - forward
  prometheus::Histogram& model_gap_;  // StepInfo::gap, where there is one
};

}  // namespace onecard::services

#endif  // ONECARD_SERVICES_WORKER_WORKER_METRICS_H_
