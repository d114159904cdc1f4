// Helpers of the chart tests. See helm_testing.h.
#include "tests/deploy/helm_testing.h"

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "gtest/gtest.h"
#include "services/common/config.h"
#include "tests/deploy/deploy_testing.h"

namespace onecard::testing {

using json = nlohmann::json;

int Int(const json& j) {
  int value = -1;
  if (j.is_string()) EXPECT_TRUE(absl::SimpleAtoi(j.get<std::string>(), &value)) << j;
  return value;
}

std::vector<json> Render(const std::vector<std::string>& files,
                         const std::vector<std::string>& sets) {
  absl::StatusOr<std::vector<json>> docs = HelmTemplate(files, sets);
  EXPECT_TRUE(docs.ok()) << docs.status();
  return docs.ok() ? *docs : std::vector<json>{};
}

const json& PodSpec(const json& workload) { return workload.at("spec").at("template").at("spec"); }

const json& Container(const json& workload, const std::string& name) {
  static const json kNone;
  for (const json& c : PodSpec(workload).at("containers")) {
    if (c.value("name", "") == name) return c;
  }
  ADD_FAILURE() << "no container " << name;
  return kNone;
}

int PortNamed(const json& container, const std::string& name) {
  for (const json& p : container.at("ports")) {
    if (p.value("name", "") == name) return Int(p.at("containerPort"));
  }
  return -1;
}

json Volume(const json& workload, const std::string& name) {
  for (const json& v : PodSpec(workload).at("volumes")) {
    if (v.value("name", "") == name) return v;
  }
  return json();
}

v1::OnecardConfig ParseConfig(const json& object, const std::string& key) {
  const json& data = object.contains("data") ? object.at("data") : object.at("stringData");
  v1::OnecardConfig config;
  const absl::Status status = services::ParseConfigText(data.value(key, ""), key, &config);
  EXPECT_TRUE(status.ok()) << status;
  return config;
}

}  // namespace onecard::testing
