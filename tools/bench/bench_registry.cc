// The scenario registry (see bench_registry.h).
// Tested by tests/tools/bench/bench_report_test.cc.
#include "tools/bench/bench_registry.h"

#include <algorithm>
#include <map>
#include <memory>

namespace onecard::bench {
namespace {

// Built on first use, so registration from other files' static
// initializers does not depend on initialization order.
std::map<std::string, std::unique_ptr<Scenario>>& Registry() {
  static auto* registry = new std::map<std::string, std::unique_ptr<Scenario>>();
  return *registry;
}

}  // namespace

bool RegisterScenario(Scenario scenario) {
  const std::string name = scenario.name;
  Registry()[name] = std::make_unique<Scenario>(std::move(scenario));
  return true;
}

const Scenario* FindScenario(const std::string& name) {
  auto it = Registry().find(name);
  return it == Registry().end() ? nullptr : it->second.get();
}

std::vector<const Scenario*> AllScenarios() {
  std::vector<const Scenario*> all;
  for (const auto& [name, scenario] : Registry()) all.push_back(scenario.get());
  return all;
}

}  // namespace onecard::bench
