// The router's Prometheus metrics (names listed in docs/metrics.md, section
// "Router"). Counters and histograms are observed by the calls; the gauges
// (queue depth by priority, in-flight per worker, worker states, open
// streams, draining) are read from a RouterGauges source at scrape time, so
// /metrics and the load reports read the same numbers. Requests by code and
// TTFT are also split by the door they came through (`api`: grpc, http).
// Tested by tests/router/router_metrics_test.cc (text format parsed back).
#ifndef ONECARD_ROUTER_ROUTER_METRICS_H_
#define ONECARD_ROUTER_ROUTER_METRICS_H_

#include <array>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "prometheus/collectable.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "router/request_queue.h"
#include "router/worker_pool.h"

namespace onecard::router {

// Why a request was refused or ended without a worker's answer; the
// `reason` label of onecard_router_requests_rejected_total.
enum class RejectReason {
  kUnauthenticated,
  kPermissionDenied,
  kInvalidArgument,
  kRateLimited,
  kQueueFull,
  kNoWorker,
  kDraining,
  kQueueTimeout,
};
inline constexpr int kNumRejectReasons = 8;
const char* RejectReasonLabel(RejectReason reason);

// The door a request came through; the `api` label of the per-door series.
enum class FrontDoor { kGrpc, kHttp };
inline constexpr int kNumFrontDoors = 2;
const char* FrontDoorLabel(FrontDoor door);  // "grpc", "http"

struct RouterGauges {
  std::array<int64_t, kNumPriorityClasses> queue_depth = {0, 0, 0};
  std::vector<WorkerSnapshot> workers;
  int64_t open_streams = 0;  // Generate calls not yet done
  bool draining = false;
};

class RouterMetrics {
 public:
  explicit RouterMetrics(prometheus::Registry& registry);

  void Admitted(PriorityClass priority);
  void Rejected(RejectReason reason);
  void RateLimited(const std::string& tenant, const std::string& limit);
  // Creates onecard_router_rate_limited_total at 0 for each tenant and both
  // limits, so dashboards and alerts see the series before a first refusal.
  void DeclareTenants(const std::vector<std::string>& tenants);
  void Retried();
  void QueueWait(PriorityClass priority, absl::Duration wait);
  void FirstToken(FrontDoor door, PriorityClass priority, absl::Duration ttft);
  // The call ended with `code` (an absl::StatusCode number, the same as
  // gRPC's) after `e2e`.
  void Finished(FrontDoor door, PriorityClass priority, int code, absl::Duration e2e);

  int64_t admitted_total() const;
  int64_t rejected_total() const;

  // The scrape-time gauges; `source` is called from the HTTP threads.
  static std::shared_ptr<prometheus::Collectable> GaugeCollectable(
      std::function<RouterGauges()> source);

 private:
  prometheus::Counter& RateLimitedCounter(const std::string& tenant, const std::string& limit)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  prometheus::Family<prometheus::Counter>& rate_limited_;
  std::array<prometheus::Counter*, kNumPriorityClasses> admitted_;
  std::array<prometheus::Counter*, kNumRejectReasons> rejected_;
  prometheus::Counter& retries_;
  std::array<prometheus::Histogram*, kNumPriorityClasses> queue_wait_;
  // [door][priority]
  std::array<std::array<prometheus::Histogram*, kNumPriorityClasses>, kNumFrontDoors> ttft_;
  std::array<prometheus::Histogram*, kNumPriorityClasses> e2e_;
  prometheus::Family<prometheus::Counter>& requests_;
  absl::Mutex mu_;
  std::map<std::string, prometheus::Counter*> rate_limited_by_ ABSL_GUARDED_BY(mu_);
};

}  // namespace onecard::router

#endif  // ONECARD_ROUTER_ROUTER_METRICS_H_
