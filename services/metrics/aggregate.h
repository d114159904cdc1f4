// Aggregate: folds a registry snapshot into the cluster-wide numbers that the
// HPA and the dashboards use (exported by cluster_metrics.h).
//
// Definitions (only live entries count; see registry.h for "live"):
// - queue depth = requests queued in routers (by class) + requests waiting in
//   workers. A worker's waiting requests count under the class its report
//   gives them (WorkerLoadReport.waiting_by_priority); the rest count under
//   standard, the class of unspecified requests.
// - running = requests in the workers' batches.
// - KV-cache usage: per worker kv_blocks_used / kv_blocks_total; the mean and
//   the max over live workers that have reported.
// - saturation = max(KV usage mean, (running + queue depth) / sequence slots),
//   where the slots are the healthy workers' max_num_seqs (at least 1, so an
//   empty cluster with a queue reads as saturated, never as +Inf). 1.0 means
//   every slot is busy; above it, requests queue.
// - tokens/s = the sum of the workers' generated tokens per second.
// Tested by tests/services/metrics/aggregate_test.cc.
#ifndef ONECARD_SERVICES_METRICS_AGGREGATE_H_
#define ONECARD_SERVICES_METRICS_AGGREGATE_H_

#include <array>
#include <cstdint>

#include "services/metrics/registry.h"

namespace onecard::services::metrics {

// The classes of onecard.v1.Priority that queues are split by, in order.
inline constexpr std::array<v1::Priority, 3> kPriorityClasses = {
    v1::PRIORITY_INTERACTIVE, v1::PRIORITY_STANDARD, v1::PRIORITY_BATCH};
// The label value of a class: "interactive", "standard" or "batch".
const char *PriorityLabel(v1::Priority priority);
// Index into kPriorityClasses; PRIORITY_UNSPECIFIED (and unknown values)
// count as standard.
int PriorityIndex(v1::Priority priority);

struct ClusterLoad {
  std::array<int64_t, 3> queue_depth_by_priority = {0, 0, 0};  // kPriorityClasses
  int64_t queue_depth = 0;                                     // the sum of queue_depth_by_priority
  int64_t router_queue_depth = 0;                              // the part queued in routers
  int64_t worker_waiting = 0;                                  // the part waiting in workers
  int64_t running = 0;
  int64_t router_in_flight = 0;
  double kv_cache_usage_mean = 0;  // [0, 1]
  double kv_cache_usage_max = 0;   // [0, 1]
  int64_t sequence_slots = 0;      // healthy workers' max_num_seqs
  double saturation = 0;
  double tokens_per_second = 0;
  int64_t workers_healthy = 0;
  int64_t workers_draining = 0;   // live, draining
  int64_t workers_unhealthy = 0;  // silent past the expiry
  int64_t routers_live = 0;
};

ClusterLoad Aggregate(const RegistrySnapshot &snapshot);

}  // namespace onecard::services::metrics

#endif  // ONECARD_SERVICES_METRICS_AGGREGATE_H_
