// ClusterMetrics: the metrics service's Prometheus collectable. On every
// scrape it aggregates the registry (aggregate.h) into gauges, so what
// Prometheus reads is never older than the scrape; it also counts the
// service's own traffic. Every name is listed in docs/metrics.md and used by
// deploy/ (recording rules, adapter rules, dashboards) and the Helm HPA.
//
//   onecard_cluster_queue_depth                   gauge    router queues + worker waiting
//   onecard_cluster_queue_depth_by_priority       gauge    {priority=interactive|standard|batch}
//   onecard_cluster_requests_running              gauge    in the live workers' batches
//   onecard_cluster_kv_cache_usage_mean_ratio     gauge    mean over live workers
//   onecard_cluster_kv_cache_usage_max_ratio      gauge    max over live workers
//   onecard_cluster_saturation_ratio              gauge    see aggregate.h
//   onecard_cluster_generation_tokens_per_second  gauge    sum over live workers
//   onecard_cluster_sequence_slots                gauge    healthy workers' max_num_seqs
//   onecard_cluster_workers                       gauge    {state=healthy|draining|unhealthy}
//   onecard_cluster_routers                       gauge    live routers
//   onecard_metrics_registrations_total           counter  {kind=worker|router}
//   onecard_metrics_load_reports_total            counter  {kind=worker|router}
//   onecard_metrics_watch_streams                 gauge    open WatchWorkers streams
//
// Tested by tests/services/metrics/cluster_metrics_test.cc.
#ifndef ONECARD_SERVICES_METRICS_CLUSTER_METRICS_H_
#define ONECARD_SERVICES_METRICS_CLUSTER_METRICS_H_

#include <array>
#include <memory>
#include <vector>

#include "prometheus/collectable.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/metric_family.h"
#include "prometheus/registry.h"
#include "services/metrics/registry.h"

namespace onecard::services::metrics {

enum class ClientKind { kWorker, kRouter };

class ClusterMetrics : public prometheus::Collectable {
 public:
  // `registry` must outlive this object.
  explicit ClusterMetrics(const Registry *registry);

  std::vector<prometheus::MetricFamily> Collect() const override;

  void CountRegistration(ClientKind kind);
  void CountLoadReport(ClientKind kind);
  void WatchStreamOpened();
  void WatchStreamClosed();

 private:
  void Update() const;

  const Registry *const registry_;
  const std::unique_ptr<prometheus::Registry> metrics_;
  prometheus::Gauge *queue_depth_;
  std::array<prometheus::Gauge *, 3> queue_depth_by_priority_;
  prometheus::Gauge *running_;
  prometheus::Gauge *kv_usage_mean_;
  prometheus::Gauge *kv_usage_max_;
  prometheus::Gauge *saturation_;
  prometheus::Gauge *tokens_per_second_;
  prometheus::Gauge *sequence_slots_;
  prometheus::Gauge *workers_healthy_;
  prometheus::Gauge *workers_draining_;
  prometheus::Gauge *workers_unhealthy_;
  prometheus::Gauge *routers_;
  std::array<prometheus::Counter *, 2> registrations_;  // by ClientKind
  std::array<prometheus::Counter *, 2> load_reports_;   // by ClientKind
  prometheus::Gauge *watch_streams_;
};

}  // namespace onecard::services::metrics

#endif  // ONECARD_SERVICES_METRICS_CLUSTER_METRICS_H_
