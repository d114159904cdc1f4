// Helpers for the deploy tests (tests/deploy) and the ops integration tests
// (tests/integration/ops_*): run a command, render the Helm chart, read the
// deploy files (Grafana dashboards, Prometheus rules, prometheus-adapter
// rules, the HPA), and pull the metric names out of PromQL.
//
// YAML is read with yaml-cpp (wrapped: nothing throws out of here) and turned
// into nlohmann::json, whose scalars are all strings.
// Tested through tests/deploy/*_test.cc.
#ifndef ONECARD_TESTS_DEPLOY_DEPLOY_TESTING_H_
#define ONECARD_TESTS_DEPLOY_DEPLOY_TESTING_H_

#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace onecard::testing {

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout
  std::string errors;  // stderr
};
// Runs `command` with /bin/sh in the current directory (tests run from the
// source root).
absl::StatusOr<CommandResult> RunCommand(const std::string& command);

// The helm binary that scripts/setup.sh installs; FailedPrecondition naming
// the fix when it is missing.
absl::StatusOr<std::string> HelmPath();
// `helm template` of helm/onecard with the given values files and --set
// arguments; the rendered documents, or the error helm printed.
absl::StatusOr<std::vector<nlohmann::json>> HelmTemplate(
    const std::vector<std::string>& values_files, const std::vector<std::string>& sets = {});

// Every YAML document in `text` (null documents skipped).
absl::StatusOr<std::vector<nlohmann::json>> ParseYamlDocuments(const std::string& text,
                                                               const std::string& source);
absl::StatusOr<std::string> ReadTextFile(const std::string& path);

// A PromQL expression and where it came from, for messages.
struct DeployQuery {
  std::string source;  // e.g. "onecard-overview.json: Errors by code [A]"
  std::string expr;
};

// Every target of every panel of deploy/grafana/dashboards/*.json.
absl::StatusOr<std::vector<DeployQuery>> DashboardQueries();
// Every expr (recording and alerting) of deploy/prometheus/rules/*.rules.yml.
absl::StatusOr<std::vector<DeployQuery>> RuleQueries();

struct AdapterRule {
  std::string series_query;
  std::string metrics_query;  // with <<.Series>>, <<.LabelMatchers>>, <<.GroupBy>>
  std::string series_name;    // the metric name of series_query
  std::string resource;       // "pod" or "service" (the non-namespace override)
  std::string exposed_name;   // the name on the custom metrics API
};
// The custom rules of deploy/prometheus-adapter/values.yaml.
absl::StatusOr<std::vector<AdapterRule>> AdapterRules();
// metrics_query with the adapter's template fields filled in.
std::string RenderAdapterQuery(const AdapterRule& rule, const std::string& label_matchers,
                               const std::string& group_by);

struct HpaMetric {
  std::string type;  // "Object" or "Pods"
  std::string name;
  std::string described_kind;  // Object: the described object's kind
  std::string described_name;
};
// The metrics of every HorizontalPodAutoscaler in rendered manifests.
std::vector<HpaMetric> HpaMetrics(const std::vector<nlohmann::json>& manifests);

// The onecard_* metric names an expression reads (recording-rule outputs,
// with a colon, are not metric names of the services).
std::set<std::string> OnecardMetricNames(const std::string& expr);
// x_bucket, x_sum, x_count -> x (the histogram's family); others unchanged.
std::string MetricFamilyName(const std::string& sample_name,
                             const std::set<std::string>& histogram_families);

// The rendered object of this kind whose metadata.name ends with `suffix`;
// null json when none.
nlohmann::json FindObject(const std::vector<nlohmann::json>& manifests, const std::string& kind,
                          const std::string& suffix);

}  // namespace onecard::testing

#endif  // ONECARD_TESTS_DEPLOY_DEPLOY_TESTING_H_
