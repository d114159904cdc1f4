// gtest helpers over `helm template` output for the chart tests
// (helm_chart_test.cc, helm_values_test.cc): render with values files and
// --set arguments (a failed render is a test failure), and reach into a
// workload's pod spec, containers, ports and volumes, and the services'
// typed config files the chart writes.
#ifndef ONECARD_TESTS_DEPLOY_HELM_TESTING_H_
#define ONECARD_TESTS_DEPLOY_HELM_TESTING_H_

#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "onecard/v1/config.pb.h"

namespace onecard::testing {

// A scalar rendered as a string ("3") as an int; -1 (and a failure) otherwise.
int Int(const nlohmann::json& j);
std::vector<nlohmann::json> Render(const std::vector<std::string>& files,
                                   const std::vector<std::string>& sets = {});
const nlohmann::json& PodSpec(const nlohmann::json& workload);
const nlohmann::json& Container(const nlohmann::json& workload, const std::string& name);
int PortNamed(const nlohmann::json& container, const std::string& name);
// The volume named `name` of a workload's pod, or null.
nlohmann::json Volume(const nlohmann::json& workload, const std::string& name);
// data[key] (or stringData[key]) of a ConfigMap or Secret, parsed by the
// services' own config loader.
v1::OnecardConfig ParseConfig(const nlohmann::json& object, const std::string& key);

}  // namespace onecard::testing

#endif  // ONECARD_TESTS_DEPLOY_HELM_TESTING_H_
