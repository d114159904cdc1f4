// Deploy-test helpers; see deploy_testing.h.
#include "tests/deploy/deploy_testing.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "yaml-cpp/yaml.h"

namespace onecard::testing {
namespace {

nlohmann::json YamlToJson(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map: {
      nlohmann::json out = nlohmann::json::object();
      for (const auto& kv : node) out[kv.first.Scalar()] = YamlToJson(kv.second);
      return out;
    }
    case YAML::NodeType::Sequence: {
      nlohmann::json out = nlohmann::json::array();
      for (const auto& item : node) out.push_back(YamlToJson(item));
      return out;
    }
    case YAML::NodeType::Scalar:
      return node.Scalar();
    default:
      return nullptr;
  }
}

std::string Str(const nlohmann::json& j, const std::string& key) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_string()) return "";
  return j[key].get<std::string>();
}

// The metric name at the start of a series selector like `x{a="b"}`.
std::string SelectorName(const std::string& selector) {
  size_t end = 0;
  while (end < selector.size() &&
         (std::isalnum(static_cast<unsigned char>(selector[end])) || selector[end] == '_')) {
    ++end;
  }
  return selector.substr(0, end);
}

}  // namespace

absl::StatusOr<CommandResult> RunCommand(const std::string& command) {
  char err_path[] = "/tmp/onecard-cmd-stderr-XXXXXX";
  const int err_fd = mkstemp(err_path);
  if (err_fd < 0) return absl::InternalError("mkstemp failed");
  close(err_fd);
  const std::string full = absl::StrCat(command, " 2>", err_path);
  FILE* pipe = popen(full.c_str(), "r");
  if (pipe == nullptr) return absl::InternalError(absl::StrCat("cannot run: ", command));
  CommandResult result;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) result.output.append(buffer, n);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  absl::StatusOr<std::string> errors = ReadTextFile(err_path);
  if (errors.ok()) result.errors = *errors;
  std::remove(err_path);
  return result;
}

absl::StatusOr<std::string> HelmPath() {
  const std::string path = ".deps/bin/helm";
  if (access(path.c_str(), X_OK) != 0) {
    return absl::FailedPreconditionError(
        "helm not found at .deps/bin/helm: run scripts/setup.sh (it runs scripts/install-helm.sh)");
  }
  return path;
}

absl::StatusOr<std::vector<nlohmann::json>> HelmTemplate(
    const std::vector<std::string>& values_files, const std::vector<std::string>& sets) {
  absl::StatusOr<std::string> helm = HelmPath();
  if (!helm.ok()) return helm.status();
  std::string command = absl::StrCat(*helm, " template onecard-test helm/onecard");
  for (const std::string& f : values_files) absl::StrAppend(&command, " -f ", f);
  for (const std::string& s : sets) absl::StrAppend(&command, " --set '", s, "'");
  absl::StatusOr<CommandResult> run = RunCommand(command);
  if (!run.ok()) return run.status();
  if (run->exit_code != 0) {
    return absl::InvalidArgumentError(absl::StrCat(command, " failed: ", run->errors));
  }
  return ParseYamlDocuments(run->output, "helm template output");
}

absl::StatusOr<std::vector<nlohmann::json>> ParseYamlDocuments(const std::string& text,
                                                               const std::string& source) {
  std::vector<nlohmann::json> docs;
  try {
    for (const YAML::Node& node : YAML::LoadAll(text)) {
      if (!node.IsNull()) docs.push_back(YamlToJson(node));
    }
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": not valid YAML: ", e.what()));
  }
  return docs;
}

absl::StatusOr<std::string> ReadTextFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

absl::StatusOr<std::vector<DeployQuery>> DashboardQueries() {
  std::vector<DeployQuery> queries;
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator("deploy/grafana/dashboards")) {
    if (entry.path().extension() == ".json") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  for (const auto& path : files) {
    absl::StatusOr<std::string> text = ReadTextFile(path.string());
    if (!text.ok()) return text.status();
    const nlohmann::json dash = nlohmann::json::parse(*text, nullptr, false);
    if (dash.is_discarded()) return absl::InvalidArgumentError(path.string() + ": not JSON");
    for (const nlohmann::json& panel : dash.value("panels", nlohmann::json::array())) {
      for (const nlohmann::json& target : panel.value("targets", nlohmann::json::array())) {
        queries.push_back({absl::StrCat(path.filename().string(), ": ", Str(panel, "title"), " [",
                                        Str(target, "refId"), "]"),
                           Str(target, "expr")});
      }
    }
  }
  return queries;
}

absl::StatusOr<std::vector<DeployQuery>> RuleQueries() {
  const std::string path = "deploy/prometheus/rules/onecard.rules.yml";
  absl::StatusOr<std::string> text = ReadTextFile(path);
  if (!text.ok()) return text.status();
  absl::StatusOr<std::vector<nlohmann::json>> docs = ParseYamlDocuments(*text, path);
  if (!docs.ok()) return docs.status();
  std::vector<DeployQuery> queries;
  for (const nlohmann::json& doc : *docs) {
    for (const nlohmann::json& group : doc.value("groups", nlohmann::json::array())) {
      for (const nlohmann::json& rule : group.value("rules", nlohmann::json::array())) {
        const std::string name =
            Str(rule, "record").empty() ? Str(rule, "alert") : Str(rule, "record");
        queries.push_back({absl::StrCat("onecard.rules.yml: ", name), Str(rule, "expr")});
      }
    }
  }
  return queries;
}

absl::StatusOr<std::vector<AdapterRule>> AdapterRules() {
  const std::string path = "deploy/prometheus-adapter/values.yaml";
  absl::StatusOr<std::string> text = ReadTextFile(path);
  if (!text.ok()) return text.status();
  absl::StatusOr<std::vector<nlohmann::json>> docs = ParseYamlDocuments(*text, path);
  if (!docs.ok()) return docs.status();
  if (docs->empty()) return absl::InvalidArgumentError(path + ": empty");
  std::vector<AdapterRule> rules;
  const nlohmann::json custom =
      (*docs)[0].value("rules", nlohmann::json::object()).value("custom", nlohmann::json::array());
  for (const nlohmann::json& r : custom) {
    AdapterRule rule;
    rule.series_query = Str(r, "seriesQuery");
    rule.metrics_query = Str(r, "metricsQuery");
    rule.series_name = SelectorName(rule.series_query);
    const nlohmann::json overrides =
        r.value("resources", nlohmann::json::object()).value("overrides", nlohmann::json::object());
    for (const auto& [label, target] : overrides.items()) {
      if (label != "namespace") rule.resource = Str(target, "resource");
    }
    const nlohmann::json name = r.value("name", nlohmann::json::object());
    rule.exposed_name = Str(name, "as") == "${1}" ? rule.series_name : Str(name, "as");
    rules.push_back(rule);
  }
  return rules;
}

std::string RenderAdapterQuery(const AdapterRule& rule, const std::string& label_matchers,
                               const std::string& group_by) {
  return absl::StrReplaceAll(rule.metrics_query, {{"<<.Series>>", rule.series_name},
                                                  {"<<.LabelMatchers>>", label_matchers},
                                                  {"<<.GroupBy>>", group_by}});
}

std::vector<HpaMetric> HpaMetrics(const std::vector<nlohmann::json>& manifests) {
  std::vector<HpaMetric> metrics;
  for (const nlohmann::json& doc : manifests) {
    if (Str(doc, "kind") != "HorizontalPodAutoscaler") continue;
    const nlohmann::json spec = doc.value("spec", nlohmann::json::object());
    for (const nlohmann::json& m : spec.value("metrics", nlohmann::json::array())) {
      HpaMetric metric;
      metric.type = Str(m, "type");
      const nlohmann::json body =
          m.value(metric.type == "Object" ? "object" : "pods", nlohmann::json::object());
      metric.name = Str(body.value("metric", nlohmann::json::object()), "name");
      const nlohmann::json described = body.value("describedObject", nlohmann::json::object());
      metric.described_kind = Str(described, "kind");
      metric.described_name = Str(described, "name");
      metrics.push_back(metric);
    }
  }
  return metrics;
}

std::set<std::string> OnecardMetricNames(const std::string& expr) {
  std::set<std::string> names;
  size_t i = 0;
  while (i < expr.size()) {
    const char c = expr[i];
    if (c == '"' || c == '\'' || c == '`') {  // skip a quoted string
      const size_t close = expr.find(c, i + 1);
      i = close == std::string::npos ? expr.size() : close + 1;
      continue;
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':') {
      size_t end = i;
      while (end < expr.size() && (std::isalnum(static_cast<unsigned char>(expr[end])) ||
                                   expr[end] == '_' || expr[end] == ':')) {
        ++end;
      }
      const std::string word = expr.substr(i, end - i);
      if (absl::StartsWith(word, "onecard_") && !absl::StrContains(word, ':')) names.insert(word);
      i = end;
      continue;
    }
    ++i;
  }
  return names;
}

std::string MetricFamilyName(const std::string& sample_name,
                             const std::set<std::string>& histogram_families) {
  for (const char* suffix : {"_bucket", "_sum", "_count"}) {
    if (!absl::EndsWith(sample_name, suffix)) continue;
    const std::string base = sample_name.substr(0, sample_name.size() - std::strlen(suffix));
    if (histogram_families.count(base) > 0) return base;
  }
  return sample_name;
}

nlohmann::json FindObject(const std::vector<nlohmann::json>& manifests, const std::string& kind,
                          const std::string& suffix) {
  for (const nlohmann::json& doc : manifests) {
    if (Str(doc, "kind") != kind) continue;
    const std::string name = Str(doc.value("metadata", nlohmann::json::object()), "name");
    if (absl::EndsWith(name, suffix)) return doc;
  }
  return nullptr;
}

}  // namespace onecard::testing
