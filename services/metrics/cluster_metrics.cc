// The metrics service's Prometheus collectable; see cluster_metrics.h.
// (prometheus-cpp throws only on invalid metric names; ours are constants.)
// Tested by tests/services/metrics/cluster_metrics_test.cc.
#include "services/metrics/cluster_metrics.h"

#include <string>

#include "services/metrics/aggregate.h"

namespace onecard::services::metrics {
namespace {

prometheus::Gauge *AddGauge(prometheus::Registry &registry, const std::string &name,
                            const std::string &help, const prometheus::Labels &labels = {}) {
  return &prometheus::BuildGauge().Name(name).Help(help).Register(registry).Add(labels);
}

std::array<prometheus::Counter *, 2> AddCountersByKind(prometheus::Registry &registry,
                                                       const std::string &name,
                                                       const std::string &help) {
  auto &family = prometheus::BuildCounter().Name(name).Help(help).Register(registry);
  return {&family.Add({{"kind", "worker"}}), &family.Add({{"kind", "router"}})};
}

int KindIndex(ClientKind kind) { return kind == ClientKind::kWorker ? 0 : 1; }

}  // namespace

ClusterMetrics::ClusterMetrics(const Registry *registry)
    : registry_(registry), metrics_(std::make_unique<prometheus::Registry>()) {
  prometheus::Registry &r = *metrics_;
  queue_depth_ = AddGauge(r, "onecard_cluster_queue_depth",
                          "Requests queued in routers plus requests waiting in workers.");
  auto &by_priority = prometheus::BuildGauge()
                          .Name("onecard_cluster_queue_depth_by_priority")
                          .Help("onecard_cluster_queue_depth split by priority class.")
                          .Register(r);
  for (size_t i = 0; i < kPriorityClasses.size(); ++i) {
    queue_depth_by_priority_[i] =
        &by_priority.Add({{"priority", PriorityLabel(kPriorityClasses[i])}});
  }
  running_ =
      AddGauge(r, "onecard_cluster_requests_running", "Requests in the live workers' batches.");
  kv_usage_mean_ = AddGauge(r, "onecard_cluster_kv_cache_usage_mean_ratio",
                            "Mean over live workers of KV blocks used / total.");
  kv_usage_max_ = AddGauge(r, "onecard_cluster_kv_cache_usage_max_ratio",
                           "Max over live workers of KV blocks used / total.");
  saturation_ = AddGauge(r, "onecard_cluster_saturation_ratio",
                         "max(KV usage mean, (running + queued) / sequence slots).");
  tokens_per_second_ = AddGauge(r, "onecard_cluster_generation_tokens_per_second",
                                "Generated tokens per second, summed over live workers.");
  sequence_slots_ = AddGauge(r, "onecard_cluster_sequence_slots",
                             "Sequences per step the healthy workers can run together.");
  auto &workers = prometheus::BuildGauge()
                      .Name("onecard_cluster_workers")
                      .Help("Registered workers by state.")
                      .Register(r);
  workers_healthy_ = &workers.Add({{"state", "healthy"}});
  workers_draining_ = &workers.Add({{"state", "draining"}});
  workers_unhealthy_ = &workers.Add({{"state", "unhealthy"}});
  routers_ = AddGauge(r, "onecard_cluster_routers", "Routers reporting within the expiry.");
  registrations_ = AddCountersByKind(r, "onecard_metrics_registrations_total",
                                     "Register* calls accepted, by client kind.");
  load_reports_ = AddCountersByKind(r, "onecard_metrics_load_reports_total",
                                    "Load reports applied, by client kind.");
  watch_streams_ = AddGauge(r, "onecard_metrics_watch_streams", "Open WatchWorkers streams.");
}

void ClusterMetrics::Update() const {
  const ClusterLoad load = Aggregate(registry_->Snapshot());
  queue_depth_->Set(static_cast<double>(load.queue_depth));
  for (size_t i = 0; i < queue_depth_by_priority_.size(); ++i) {
    queue_depth_by_priority_[i]->Set(static_cast<double>(load.queue_depth_by_priority[i]));
  }
  running_->Set(static_cast<double>(load.running));
  kv_usage_mean_->Set(load.kv_cache_usage_mean);
  kv_usage_max_->Set(load.kv_cache_usage_max);
  saturation_->Set(load.saturation);
  tokens_per_second_->Set(load.tokens_per_second);
  sequence_slots_->Set(static_cast<double>(load.sequence_slots));
  workers_healthy_->Set(static_cast<double>(load.workers_healthy));
  workers_draining_->Set(static_cast<double>(load.workers_draining));
  workers_unhealthy_->Set(static_cast<double>(load.workers_unhealthy));
  routers_->Set(static_cast<double>(load.routers_live));
}

std::vector<prometheus::MetricFamily> ClusterMetrics::Collect() const {
  Update();
  return metrics_->Collect();
}

void ClusterMetrics::CountRegistration(ClientKind kind) {
  registrations_[KindIndex(kind)]->Increment();
}

void ClusterMetrics::CountLoadReport(ClientKind kind) {
  load_reports_[KindIndex(kind)]->Increment();
}

void ClusterMetrics::WatchStreamOpened() { watch_streams_->Increment(); }

void ClusterMetrics::WatchStreamClosed() { watch_streams_->Decrement(); }

}  // namespace onecard::services::metrics
