// Cluster aggregates from a registry snapshot; see aggregate.h. Tested by
// tests/services/metrics/aggregate_test.cc.
#include "services/metrics/aggregate.h"

#include <algorithm>

namespace onecard::services::metrics {
namespace {

void AddWorker(const WorkerView &view, ClusterLoad &load, double &kv_sum, int64_t &kv_count) {
  const v1::WorkerEntry &entry = view.entry;
  if (!view.live) {
    ++load.workers_unhealthy;
    return;
  }
  const bool draining = entry.has_load() && entry.load().draining();
  if (draining) {
    ++load.workers_draining;
  } else {
    ++load.workers_healthy;
    load.sequence_slots += std::max<int64_t>(entry.info().max_num_seqs(), 0);
  }
  if (!entry.has_load()) return;
  const v1::WorkerLoadReport &report = entry.load();
  int64_t attributed = 0;
  for (const v1::PriorityQueueDepth &part : report.waiting_by_priority()) {
    load.queue_depth_by_priority[PriorityIndex(part.priority())] += part.depth();
    attributed += part.depth();
  }
  load.queue_depth_by_priority[PriorityIndex(v1::PRIORITY_STANDARD)] +=
      std::max<int64_t>(report.waiting() - attributed, 0);
  load.worker_waiting += std::max<int64_t>(report.waiting(), attributed);
  load.running += report.running();
  load.tokens_per_second += report.tokens_per_second();
  if (report.kv_blocks_total() > 0) {
    const double usage = static_cast<double>(report.kv_blocks_used()) /
                         static_cast<double>(report.kv_blocks_total());
    kv_sum += usage;
    ++kv_count;
    load.kv_cache_usage_max = std::max(load.kv_cache_usage_max, usage);
  }
}

void AddRouter(const RouterView &view, ClusterLoad &load) {
  if (!view.live) return;
  ++load.routers_live;
  if (!view.load.has_value()) return;
  for (const v1::PriorityQueueDepth &part : view.load->queue_depth()) {
    load.queue_depth_by_priority[PriorityIndex(part.priority())] += part.depth();
    load.router_queue_depth += part.depth();
  }
  load.router_in_flight += view.load->in_flight();
}

}  // namespace

const char *PriorityLabel(v1::Priority priority) {
  switch (priority) {
    case v1::PRIORITY_INTERACTIVE:
      return "interactive";
    case v1::PRIORITY_BATCH:
      return "batch";
    default:
      return "standard";
  }
}

int PriorityIndex(v1::Priority priority) {
  switch (priority) {
    case v1::PRIORITY_INTERACTIVE:
      return 0;
    case v1::PRIORITY_BATCH:
      return 2;
    default:
      return 1;
  }
}

ClusterLoad Aggregate(const RegistrySnapshot &snapshot) {
  ClusterLoad load;
  double kv_sum = 0;
  int64_t kv_count = 0;
  for (const WorkerView &view : snapshot.workers) AddWorker(view, load, kv_sum, kv_count);
  for (const RouterView &view : snapshot.routers) AddRouter(view, load);
  for (int64_t depth : load.queue_depth_by_priority) load.queue_depth += depth;
  if (kv_count > 0) load.kv_cache_usage_mean = kv_sum / static_cast<double>(kv_count);
  const double slots = static_cast<double>(std::max<int64_t>(load.sequence_slots, 1));
  const double demand = static_cast<double>(load.running + load.queue_depth) / slots;
  load.saturation = std::max(load.kv_cache_usage_mean, demand);
  return load;
}

}  // namespace onecard::services::metrics
