// Tests of the /metrics endpoint: served on a port picked by the OS, it
// returns the registry's families (and an added Collectable) as Prometheus
// text, fetched over real HTTP and parsed strictly.
#include "services/common/metrics_server.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "tests/services/testing/http_get.h"
#include "tests/services/testing/prom_text.h"

namespace onecard::services {
namespace {

class FixedGauge : public prometheus::Collectable {
 public:
  std::vector<prometheus::MetricFamily> Collect() const override {
    prometheus::MetricFamily family{
        "test_fixed_ratio", "A fixed value.", prometheus::MetricType::Gauge, {}};
    prometheus::ClientMetric metric;
    metric.gauge.value = 0.75;
    family.metric.push_back(metric);
    return {family};
  }
};

TEST(MetricsServerTest, ServesRegistryAndCollectablesOnPortZero) {
  absl::StatusOr<std::unique_ptr<MetricsServer>> server = MetricsServer::Start("127.0.0.1:0");
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_GT((*server)->port(), 0);
  auto& counter = prometheus::BuildCounter()
                      .Name("test_requests_total")
                      .Help("Requests.")
                      .Register((*server)->registry())
                      .Add({{"outcome", "stop"}});
  counter.Increment(3);
  auto fixed = std::make_shared<FixedGauge>();
  (*server)->Add(fixed);

  absl::StatusOr<testing::HttpResponse> response =
      testing::HttpGet((*server)->address(), "/metrics");
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status_code, 200);
  EXPECT_THAT(response->content_type, ::testing::HasSubstr("text/plain"));
  absl::StatusOr<testing::PromText> text = testing::ParsePromText(response->body);
  ASSERT_TRUE(text.ok()) << text.status() << "\n" << response->body;
  EXPECT_EQ(text->Value("test_requests_total", {{"outcome", "stop"}}), 3);
  EXPECT_EQ(text->Value("test_fixed_ratio"), 0.75);
}

TEST(MetricsServerTest, ComponentServersExportBuildInfo) {
  absl::StatusOr<std::unique_ptr<MetricsServer>> plain = MetricsServer::Start("127.0.0.1:0");
  ASSERT_TRUE(plain.ok()) << plain.status();
  absl::StatusOr<std::unique_ptr<MetricsServer>> server =
      MetricsServer::Start("127.0.0.1:0", "router");
  ASSERT_TRUE(server.ok()) << server.status();
  absl::StatusOr<testing::HttpResponse> response =
      testing::HttpGet((*server)->address(), "/metrics");
  ASSERT_TRUE(response.ok()) << response.status();
  absl::StatusOr<testing::PromText> text = testing::ParsePromText(response->body);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(text->types.at("onecard_build_info"), "gauge");
  // The version is the project's (CMakeLists.txt); the commit is a hash or
  // "unknown", never empty.
  EXPECT_THAT(response->body,
              ::testing::ContainsRegex("onecard_build_info\\{[^}]*component=\"router\""));
  EXPECT_THAT(response->body, ::testing::ContainsRegex("version=\"0\\.1\\.0\""));
  EXPECT_THAT(response->body, ::testing::ContainsRegex("commit=\"([0-9a-f]{12}|unknown)\""));
  absl::StatusOr<testing::HttpResponse> plain_response =
      testing::HttpGet((*plain)->address(), "/metrics");
  ASSERT_TRUE(plain_response.ok());
  EXPECT_THAT(plain_response->body, ::testing::Not(::testing::HasSubstr("onecard_build_info")));
}

TEST(MetricsServerTest, BindFailureIsUnavailable) {
  const absl::Status s = MetricsServer::Start("192.0.2.1:0").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace onecard::services
