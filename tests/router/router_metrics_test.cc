// Tests router/router_metrics.h: every family the dashboards use is exported
// with its labels, observations land in them, and the scrape-time gauges
// read the source; the text is parsed back with the strict parser.
#include "router/router_metrics.h"

#include "gtest/gtest.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"
#include "tests/services/testing/prom_text.h"

namespace onecard::router {
namespace {

std::string Text(prometheus::Registry& registry, prometheus::Collectable& extra) {
  std::vector<prometheus::MetricFamily> families = registry.Collect();
  for (auto& f : extra.Collect()) families.push_back(f);
  return prometheus::TextSerializer().Serialize(families);
}

TEST(RouterMetricsTest, DeclaredTenantsStartAtZeroRateLimited) {
  prometheus::Registry registry;
  RouterMetrics m(registry);
  m.DeclareTenants({"acme", "vip"});
  m.RateLimited("acme", "requests");
  auto gauges = RouterMetrics::GaugeCollectable([] { return RouterGauges{}; });
  absl::StatusOr<onecard::testing::PromText> text =
      onecard::testing::ParsePromText(Text(registry, *gauges));
  ASSERT_TRUE(text.ok()) << text.status();
  const std::string name = "onecard_router_rate_limited_total";
  EXPECT_EQ(text->Value(name, {{"tenant", "acme"}, {"limit", "requests"}}), 1);
  EXPECT_EQ(text->Value(name, {{"tenant", "acme"}, {"limit", "tokens"}}), 0);
  EXPECT_EQ(text->Value(name, {{"tenant", "vip"}, {"limit", "requests"}}), 0);
  EXPECT_EQ(text->Value(name, {{"tenant", "vip"}, {"limit", "tokens"}}), 0);
}

TEST(RouterMetricsTest, ExportsWhatTheDashboardsRead) {
  prometheus::Registry registry;
  RouterMetrics m(registry);
  m.Admitted(PriorityClass::kBatch);
  m.Admitted(PriorityClass::kBatch);
  m.Rejected(RejectReason::kQueueFull);
  m.RateLimited("acme", "tokens");
  m.Retried();
  m.QueueWait(PriorityClass::kInteractive, absl::Milliseconds(30));
  m.FirstToken(FrontDoor::kGrpc, PriorityClass::kInteractive, absl::Milliseconds(200));
  m.FirstToken(FrontDoor::kHttp, PriorityClass::kInteractive, absl::Milliseconds(20));
  m.Finished(FrontDoor::kGrpc, PriorityClass::kInteractive, 0, absl::Seconds(1));
  m.Finished(FrontDoor::kGrpc, PriorityClass::kStandard, 14, absl::Seconds(2));
  m.Finished(FrontDoor::kHttp, PriorityClass::kStandard, 3, absl::Seconds(2));
  RouterGauges g;
  g.queue_depth = {1, 2, 3};
  g.workers.push_back(WorkerSnapshot{"w1", "a:1", 4, 4, true, false, false});
  g.workers.push_back(WorkerSnapshot{"w2", "b:1", 0, 0, true, true, true});
  g.open_streams = 9;
  auto gauges = RouterMetrics::GaugeCollectable([g] { return g; });
  absl::StatusOr<onecard::testing::PromText> text =
      onecard::testing::ParsePromText(Text(registry, *gauges));
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(text->Value("onecard_router_requests_admitted_total", {{"priority", "batch"}}), 2);
  EXPECT_EQ(text->Value("onecard_router_requests_rejected_total", {{"reason", "queue_full"}}), 1);
  EXPECT_EQ(text->Value("onecard_router_requests_rejected_total", {{"reason", "draining"}}), 0);
  EXPECT_EQ(
      text->Value("onecard_router_rate_limited_total", {{"tenant", "acme"}, {"limit", "tokens"}}),
      1);
  EXPECT_EQ(text->Value("onecard_router_retries_total"), 1);
  EXPECT_EQ(text->Value("onecard_router_queue_wait_seconds_count", {{"priority", "interactive"}}),
            1);
  const std::string ttft = "onecard_router_time_to_first_token_seconds_bucket";
  EXPECT_EQ(text->Value(ttft, {{"api", "grpc"}, {"priority", "interactive"}, {"le", "0.025"}}), 0);
  EXPECT_EQ(text->Value(ttft, {{"api", "grpc"}, {"priority", "interactive"}, {"le", "0.25"}}), 1);
  EXPECT_EQ(text->Value(ttft, {{"api", "http"}, {"priority", "interactive"}, {"le", "0.025"}}), 1);
  EXPECT_EQ(
      text->Value("onecard_router_request_duration_seconds_count", {{"priority", "standard"}}), 2);
  const std::string requests = "onecard_router_requests_total";
  EXPECT_EQ(text->Value(requests, {{"api", "grpc"}, {"code", "OK"}}), 1);
  EXPECT_EQ(text->Value(requests, {{"api", "grpc"}, {"code", "UNAVAILABLE"}}), 1);
  EXPECT_EQ(text->Value(requests, {{"api", "http"}, {"code", "INVALID_ARGUMENT"}}), 1);
  EXPECT_EQ(text->Value(requests, {{"api", "http"}, {"code", "NOT_FOUND"}}), 0) << "declared";
  EXPECT_EQ(text->Value("onecard_router_queue_depth", {{"priority", "batch"}}), 3);
  EXPECT_EQ(text->Value("onecard_router_worker_in_flight", {{"worker", "w1"}}), 4);
  EXPECT_EQ(text->Value("onecard_router_workers", {{"state", "healthy"}}), 1);
  EXPECT_EQ(text->Value("onecard_router_workers", {{"state", "ejected"}}), 1);
  EXPECT_EQ(text->Value("onecard_router_open_streams"), 9);
  EXPECT_EQ(text->Value("onecard_router_draining"), 0);
  EXPECT_EQ(m.admitted_total(), 2);
  EXPECT_EQ(m.rejected_total(), 1);
}

}  // namespace
}  // namespace onecard::router
