// Tests services/metrics/cluster_metrics.h: a scrape reflects the registry at
// scrape time (fake clock), with the names and labels deploy/ relies on.
#include "services/metrics/cluster_metrics.h"

#include <optional>
#include <string>

#include "gtest/gtest.h"
#include "prometheus/text_serializer.h"

namespace onecard::services::metrics {
namespace {

std::optional<double> Value(const std::vector<prometheus::MetricFamily> &families,
                            const std::string &name, const std::string &label = "",
                            const std::string &label_value = "") {
  for (const prometheus::MetricFamily &family : families) {
    if (family.name != name) continue;
    for (const prometheus::ClientMetric &metric : family.metric) {
      bool match = label.empty();
      for (const auto &l : metric.label) match |= l.name == label && l.value == label_value;
      if (!match) continue;
      return family.type == prometheus::MetricType::Counter ? metric.counter.value
                                                            : metric.gauge.value;
    }
  }
  return std::nullopt;
}

class ClusterMetricsTest : public ::testing::Test {
 protected:
  ClusterMetricsTest() : registry_(RegistryOptions{}, [this] { return now_; }) {}

  void AddWorker(const std::string &id, int64_t waiting, int64_t running, int64_t kv_used) {
    v1::RegisterWorkerRequest request;
    request.set_worker_id(id);
    request.set_address(id + ":1");
    request.mutable_info()->set_max_num_seqs(4);
    ASSERT_TRUE(registry_.RegisterWorker(request).ok());
    v1::WorkerLoadReport report;
    report.set_worker_id(id);
    report.set_address(id + ":1");
    report.set_sequence(1);
    report.set_waiting(waiting);
    report.set_running(running);
    report.set_kv_blocks_used(kv_used);
    report.set_kv_blocks_total(100);
    report.set_tokens_per_second(12.5);
    ASSERT_TRUE(registry_.ReportWorkerLoad(report).ok());
  }

  absl::Time now_ = absl::FromUnixSeconds(1700000000);
  Registry registry_;
};

TEST_F(ClusterMetricsTest, ScrapeAggregatesTheRegistryNow) {
  ClusterMetrics metrics(&registry_);
  AddWorker("a", 2, 3, 20);
  AddWorker("b", 0, 1, 60);
  std::vector<prometheus::MetricFamily> families = metrics.Collect();
  EXPECT_EQ(Value(families, "onecard_cluster_queue_depth"), 2.0);
  EXPECT_EQ(Value(families, "onecard_cluster_queue_depth_by_priority", "priority", "standard"),
            2.0);
  EXPECT_EQ(Value(families, "onecard_cluster_queue_depth_by_priority", "priority", "batch"), 0.0);
  EXPECT_EQ(Value(families, "onecard_cluster_requests_running"), 4.0);
  EXPECT_DOUBLE_EQ(*Value(families, "onecard_cluster_kv_cache_usage_mean_ratio"), 0.4);
  EXPECT_DOUBLE_EQ(*Value(families, "onecard_cluster_kv_cache_usage_max_ratio"), 0.6);
  EXPECT_DOUBLE_EQ(*Value(families, "onecard_cluster_saturation_ratio"), 6.0 / 8.0);
  EXPECT_EQ(Value(families, "onecard_cluster_generation_tokens_per_second"), 25.0);
  EXPECT_EQ(Value(families, "onecard_cluster_sequence_slots"), 8.0);
  EXPECT_EQ(Value(families, "onecard_cluster_workers", "state", "healthy"), 2.0);

  now_ += absl::Seconds(3);  // both silent past the expiry: out of the sums
  families = metrics.Collect();
  EXPECT_EQ(Value(families, "onecard_cluster_workers", "state", "healthy"), 0.0);
  EXPECT_EQ(Value(families, "onecard_cluster_workers", "state", "unhealthy"), 2.0);
  EXPECT_EQ(Value(families, "onecard_cluster_requests_running"), 0.0);
}

TEST_F(ClusterMetricsTest, CountersAndWatchGauge) {
  ClusterMetrics metrics(&registry_);
  metrics.CountRegistration(ClientKind::kWorker);
  metrics.CountLoadReport(ClientKind::kRouter);
  metrics.CountLoadReport(ClientKind::kRouter);
  metrics.WatchStreamOpened();
  metrics.WatchStreamOpened();
  metrics.WatchStreamClosed();
  const std::vector<prometheus::MetricFamily> families = metrics.Collect();
  EXPECT_EQ(Value(families, "onecard_metrics_registrations_total", "kind", "worker"), 1.0);
  EXPECT_EQ(Value(families, "onecard_metrics_registrations_total", "kind", "router"), 0.0);
  EXPECT_EQ(Value(families, "onecard_metrics_load_reports_total", "kind", "router"), 2.0);
  EXPECT_EQ(Value(families, "onecard_metrics_watch_streams"), 1.0);
}

TEST_F(ClusterMetricsTest, TextExpositionHasEveryPriorityLabel) {
  ClusterMetrics metrics(&registry_);
  const std::string text = prometheus::TextSerializer().Serialize(metrics.Collect());
  for (const char *p : {"interactive", "standard", "batch"}) {
    EXPECT_NE(
        text.find(std::string("onecard_cluster_queue_depth_by_priority{priority=\"") + p + "\"}"),
        std::string::npos)
        << p;
  }
  EXPECT_NE(text.find("# TYPE onecard_cluster_saturation_ratio gauge"), std::string::npos);
}

}  // namespace
}  // namespace onecard::services::metrics
