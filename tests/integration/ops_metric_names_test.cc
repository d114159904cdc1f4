// Every live metric name carries its component (house rule), and every
// metric that a deploy artifact names exists in the live /metrics of
// the running services: the HPA (helm template with ci/values-full.yaml),
// the prometheus-adapter rules, the recording and alerting rules, and the
// Grafana dashboards. The services are the real onecard-metrics,
// onecard-worker (CPU, SmolLM2) and onecard-router on loopback, after a few
// requests (one rate-limited, one unauthenticated) so that labelled series
// exist too. Only onecard_* names are checked (kube_* come from
// kube-state-metrics and `up` from Prometheus itself).
#include <filesystem>
#include <map>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/deploy/deploy_testing.h"
#include "tests/integration/ops_cluster.h"

namespace onecard::testing {
namespace {

// Family names per service, from the # TYPE lines and the samples.
struct LiveNames {
  std::map<std::string, std::set<std::string>> by_service;  // service -> families
  std::set<std::string> histograms;

  bool Has(const std::string& name, std::string* service) const {
    const std::string family = MetricFamilyName(name, histograms);
    for (const auto& [s, names] : by_service) {
      if (names.count(family) > 0) {
        if (service != nullptr) *service = s;
        return true;
      }
    }
    return false;
  }
};

class OpsMetricNamesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    work_dir_ = new std::string(
        (std::filesystem::temp_directory_path() / ("ops-names-" + std::to_string(getpid())))
            .string());
    std::filesystem::create_directories(*work_dir_);
    absl::StatusOr<std::unique_ptr<LocalCluster>> cluster =
        LocalCluster::Start({.work_dir = *work_dir_});
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = cluster->release();
    auto stub = cluster_->RouterStub();
    for (v1::Priority p : {v1::PRIORITY_INTERACTIVE, v1::PRIORITY_BATCH}) {
      const GenerateResult ok = Generate(*stub, kOpsApiKey, "Name a color.", 4, p);
      ASSERT_TRUE(ok.status.ok()) << ok.status.error_message();
    }
    Generate(*stub, kLimitedApiKey, "Hi.", 2, v1::PRIORITY_BATCH);
    const GenerateResult limited = Generate(*stub, kLimitedApiKey, "Hi.", 2, v1::PRIORITY_BATCH);
    ASSERT_EQ(limited.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
    const GenerateResult bad_key = Generate(*stub, "wrong-key", "Hi.", 2, v1::PRIORITY_BATCH);
    ASSERT_EQ(bad_key.status.error_code(), grpc::StatusCode::UNAUTHENTICATED);

    live_ = new LiveNames();
    const std::map<std::string, std::string> services = {{"metrics", cluster_->metrics().metrics},
                                                         {"worker", cluster_->worker().metrics},
                                                         {"router", cluster_->router().metrics}};
    for (const auto& [service, address] : services) {
      absl::StatusOr<PromText> text = Scrape(address);
      ASSERT_TRUE(text.ok()) << service << ": " << text.status();
      for (const auto& [family, type] : text->types) {
        live_->by_service[service].insert(family);
        if (type == "histogram") live_->histograms.insert(family);
      }
    }
  }

  void SetUp() override { ASSERT_NE(live_, nullptr) << "the cluster did not start"; }

  static void TearDownTestSuite() {
    delete cluster_;
    delete live_;
    if (work_dir_ != nullptr) std::filesystem::remove_all(*work_dir_);
    delete work_dir_;
  }

  static void ExpectAllLive(const std::vector<DeployQuery>& queries) {
    int checked = 0;
    for (const DeployQuery& q : queries) {
      for (const std::string& name : OnecardMetricNames(q.expr)) {
        EXPECT_TRUE(live_->Has(name, nullptr))
            << q.source << " names " << name << ", which no service exports";
        ++checked;
      }
    }
    EXPECT_GT(checked, 0);
  }

  static std::string* work_dir_;
  static LocalCluster* cluster_;
  static LiveNames* live_;
};

std::string* OpsMetricNamesTest::work_dir_ = nullptr;
LocalCluster* OpsMetricNamesTest::cluster_ = nullptr;
LiveNames* OpsMetricNamesTest::live_ = nullptr;

// The house rule (docs/metrics.md): onecard_<component>_<thing>_<unit>,
// the worker's under onecard_worker_, the router's under onecard_router_,
// the metrics service's under onecard_metrics_ or onecard_cluster_ (its
// aggregates); onecard_build_info is the one family every component shares.
TEST_F(OpsMetricNamesTest, LiveNamesCarryTheirComponent) {
  const std::map<std::string, std::vector<std::string>> prefixes = {
      {"worker", {"onecard_worker_"}},
      {"router", {"onecard_router_"}},
      {"metrics", {"onecard_metrics_", "onecard_cluster_"}}};
  for (const auto& [service, families] : live_->by_service) {
    EXPECT_TRUE(families.count("onecard_build_info") > 0) << service;
    for (const std::string& family : families) {
      if (family.rfind("onecard_", 0) != 0 || family == "onecard_build_info") continue;
      bool ok = false;
      for (const std::string& prefix : prefixes.at(service)) ok |= family.rfind(prefix, 0) == 0;
      EXPECT_TRUE(ok) << service << " exports " << family;
    }
  }
}

TEST_F(OpsMetricNamesTest, DashboardQueriesNameLiveMetrics) {
  absl::StatusOr<std::vector<DeployQuery>> queries = DashboardQueries();
  ASSERT_TRUE(queries.ok()) << queries.status();
  ExpectAllLive(*queries);
}

TEST_F(OpsMetricNamesTest, RecordingAndAlertingRulesNameLiveMetrics) {
  absl::StatusOr<std::vector<DeployQuery>> queries = RuleQueries();
  ASSERT_TRUE(queries.ok()) << queries.status();
  ExpectAllLive(*queries);
}

// Adapter rules: pod rules read worker series, service rules the metrics
// service's (the Service the HPA's Object metric describes).
TEST_F(OpsMetricNamesTest, AdapterRulesNameLiveMetricsOfTheRightService) {
  absl::StatusOr<std::vector<AdapterRule>> rules = AdapterRules();
  ASSERT_TRUE(rules.ok()) << rules.status();
  for (const AdapterRule& rule : *rules) {
    std::string service;
    ASSERT_TRUE(live_->Has(rule.series_name, &service)) << rule.series_name;
    EXPECT_EQ(service, rule.resource == "pod" ? "worker" : "metrics") << rule.series_name;
  }
}

TEST_F(OpsMetricNamesTest, HpaMetricsAreLive) {
  absl::StatusOr<std::vector<nlohmann::json>> docs =
      HelmTemplate({"helm/onecard/ci/values-full.yaml"});
  ASSERT_TRUE(docs.ok()) << docs.status();
  const std::vector<HpaMetric> metrics = HpaMetrics(*docs);
  ASSERT_FALSE(metrics.empty());
  for (const HpaMetric& metric : metrics) {
    std::string service;
    EXPECT_TRUE(live_->Has(metric.name, &service)) << metric.name;
    EXPECT_EQ(service, metric.type == "Pods" ? "worker" : "metrics") << metric.name;
  }
}

}  // namespace
}  // namespace onecard::testing
