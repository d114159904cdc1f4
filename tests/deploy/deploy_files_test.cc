// Tests the deploy files without running services: the Grafana dashboards
// have the panels the issue lists, with percentiles from histograms through
// rate(); every dashboard and prometheus-adapter query is valid PromQL
// (promtool checks them as recording rules); the adapter rules are complete.
// That the named metrics exist and the queries return data is checked
// against the live services by tests/integration/ops_*_test.cc.
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "onecard/v1/config.pb.h"
#include "services/common/config.h"
#include "tests/deploy/deploy_testing.h"

namespace onecard::testing {
namespace {

using ::testing::HasSubstr;

std::map<std::string, std::vector<std::string>> ExprsByPanel() {
  std::map<std::string, std::vector<std::string>> by_panel;
  absl::StatusOr<std::vector<DeployQuery>> queries = DashboardQueries();
  EXPECT_TRUE(queries.ok()) << queries.status();
  if (!queries.ok()) return by_panel;
  for (const DeployQuery& q : *queries) {
    const std::string panel = q.source.substr(0, q.source.rfind(" ["));
    by_panel[panel].push_back(q.expr);
  }
  return by_panel;
}

TEST(DeployFilesTest, DashboardHasThePanelsOperatorsNeed) {
  const auto panels = ExprsByPanel();
  const std::vector<std::pair<std::string, std::string>> required = {
      {"Request rate", "onecard_router_requests_total"},
      {"Errors by code", "by (code)"},
      {"Queue depth by priority", "by (priority)"},
      {"KV-cache usage per worker", "onecard_worker_kv_cache_usage_ratio"},
      {"Generated tokens/s", "onecard_worker_generation_tokens_total"},
      {"Rate-limited requests by tenant", "by (tenant)"},
      {"Workers vs HPA desired replicas", "kube_horizontalpodautoscaler_status_desired_replicas"},
  };
  for (const auto& [title, needle] : required) {
    const auto it = panels.find("onecard-overview.json: " + title);
    ASSERT_NE(it, panels.end()) << "missing panel " << title;
    bool found = false;
    for (const std::string& expr : it->second) found |= absl::StrContains(expr, needle);
    EXPECT_TRUE(found) << title << " does not use " << needle;
  }
}

TEST(DeployFilesTest, LatencyPercentilesComeFromHistogramRates) {
  const auto panels = ExprsByPanel();
  for (const char* title : {"Time to first token", "Time per output token", "End-to-end latency"}) {
    const auto it = panels.find(std::string("onecard-overview.json: ") + title);
    ASSERT_NE(it, panels.end()) << title;
    ASSERT_GE(it->second.size(), 3u) << title << ": p50, p95, p99";
    for (const std::string& expr : it->second) {
      EXPECT_THAT(expr, HasSubstr("histogram_quantile("));
      EXPECT_THAT(expr, HasSubstr("rate("));
      EXPECT_THAT(expr, HasSubstr("_bucket{"));
      EXPECT_THAT(expr, HasSubstr("by (le)"));
    }
  }
}

// promtool parses every query (as a recording rule) without a server.
TEST(DeployFilesTest, EveryDashboardAndAdapterQueryIsValidPromQL) {
  absl::StatusOr<std::vector<DeployQuery>> queries = DashboardQueries();
  ASSERT_TRUE(queries.ok()) << queries.status();
  absl::StatusOr<std::vector<AdapterRule>> rules = AdapterRules();
  ASSERT_TRUE(rules.ok()) << rules.status();
  std::vector<DeployQuery> all = *queries;
  for (const AdapterRule& rule : *rules) {
    all.push_back({"adapter " + rule.series_name,
                   RenderAdapterQuery(rule, "namespace=\"ns\",pod=\"p\"", "pod")});
  }
  std::string yaml = "groups:\n  - name: check\n    rules:\n";
  for (size_t i = 0; i < all.size(); ++i) {
    const std::string expr = absl::StrReplaceAll(
        all[i].expr, {{"$__rate_interval", "5m"}, {"$namespace", ".*"}, {"'", "''"}});
    absl::StrAppend(&yaml, "      - record: check:q", i, "\n        expr: '", expr, "'\n");
  }
  const std::string path =
      (std::filesystem::temp_directory_path() / "onecard-deploy-queries.rules.yml").string();
  std::ofstream(path) << yaml;
  absl::StatusOr<CommandResult> check = RunCommand("promtool check rules " + path);
  ASSERT_TRUE(check.ok());
  EXPECT_EQ(check->exit_code, 0) << check->output << check->errors;
  EXPECT_THAT(check->output, HasSubstr(absl::StrCat(all.size(), " rules found")));
  std::filesystem::remove(path);
}

TEST(DeployFilesTest, AdapterRulesAreComplete) {
  absl::StatusOr<std::vector<AdapterRule>> rules = AdapterRules();
  ASSERT_TRUE(rules.ok()) << rules.status();
  ASSERT_GE(rules->size(), 2u);
  bool per_worker_queue = false;
  bool per_worker_kv = false;
  for (const AdapterRule& rule : *rules) {
    EXPECT_TRUE(absl::StartsWith(rule.series_name, "onecard_")) << rule.series_query;
    EXPECT_TRUE(rule.resource == "pod" || rule.resource == "service") << rule.series_name;
    for (const char* field : {"<<.Series>>", "<<.LabelMatchers>>", "<<.GroupBy>>"}) {
      EXPECT_THAT(rule.metrics_query, HasSubstr(field)) << rule.series_name;
    }
    per_worker_queue |= rule.series_name == "onecard_worker_requests_waiting";
    per_worker_kv |= rule.series_name == "onecard_worker_kv_cache_usage_ratio";
  }
  EXPECT_TRUE(per_worker_queue);
  EXPECT_TRUE(per_worker_kv);
}

// scripts/run.sh fills in the placeholders of deploy/local/cluster.yaml; the
// result is a valid typed config with every section.
TEST(DeployFilesTest, LocalClusterConfigIsTypedConfig) {
  absl::StatusOr<std::string> text = ReadTextFile("deploy/local/cluster.yaml");
  ASSERT_TRUE(text.ok()) << text.status();
  const std::string filled = absl::StrReplaceAll(*text, {{"@MODEL_PATH@", "/m.gguf"},
                                                         {"@BACKEND@", "cpu"},
                                                         {"@API_KEY_SHA256@", "ab12"},
                                                         {"@RUN_DIR@", "/run"}});
  v1::OnecardConfig config;
  const absl::Status status = services::ParseConfigText(filled, "cluster.yaml", &config);
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(config.worker().model_path(), "/m.gguf");
  EXPECT_EQ(config.router().model_path(), "/m.gguf");
  EXPECT_EQ(config.router().tenants(0).api_key_sha256(0), "ab12");
  EXPECT_EQ(config.metrics().listen_address(), "127.0.0.1:0");
  // Every service proves its role with the run's tokens (issue 22).
  for (const v1::ServiceAuthConfig* auth :
       {&config.metrics().service_auth(), &config.worker().service_auth(),
        &config.router().service_auth()}) {
    EXPECT_EQ(auth->worker_token_file(), "/run/worker.token");
    EXPECT_EQ(auth->router_token_file(), "/run/router.token");
  }
}

TEST(DeployFilesTest, MetricNameExtraction) {
  EXPECT_EQ(OnecardMetricNames(
                "sum by (code) (rate(onecard_router_requests_total{code!=\"onecard_x\"}[5m]))"
                " / onecard:recorded + onecard_cluster_workers"),
            (std::set<std::string>{"onecard_router_requests_total", "onecard_cluster_workers"}));
  EXPECT_EQ(MetricFamilyName("onecard_ttft_seconds_bucket", {"onecard_ttft_seconds"}),
            "onecard_ttft_seconds");
  EXPECT_EQ(MetricFamilyName("onecard_x_count", {}), "onecard_x_count");
}

}  // namespace
}  // namespace onecard::testing
