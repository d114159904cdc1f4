// The fault suite's scenarios (issue 22): each starts a fresh FaultCluster
// (metrics service, two CPU workers, a router), runs FaultLoad against the
// router, injects its fault mid-load and then accounts for every request:
// sent = completed + failed by code, lost = 0, every stream a prefix of its
// prompt's greedy answer (no duplicated or replayed token), failures only
// with the codes the fault allows, and every gauge back to zero.
//
//   worker-sigkill   a worker is SIGKILLed while it streams
//   worker-sigstop   a worker hangs (SIGSTOP): deadlines end its requests,
//                    the control plane ejects it, it comes back (SIGCONT)
//   metrics-restart  the metrics service is killed and started again
//   router-restart   the router is killed and started again on its port
//   disconnect       `clients` clients cancel after their first token
//   slow-readers     clients that never read, beside normal clients
//   drain-sigterm    a worker drains on SIGTERM under load
//
// Run by onecard-fault (tools/fault/main.cc, scripts/fault.sh); a subset by
// tests/integration/fault_suite_test.cc.
#ifndef ONECARD_TOOLS_FAULT_FAULT_SCENARIOS_H_
#define ONECARD_TOOLS_FAULT_FAULT_SCENARIOS_H_

#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "tools/fault/fault_cluster.h"
#include "tools/fault/fault_load.h"

namespace onecard::fault {

struct ScenarioOptions {
  FaultClusterOptions cluster;  // work_dir: a sub-folder per scenario is made
  int disconnect_clients = 1000;
  int slow_readers = 32;
};

struct ScenarioResult {
  std::string name;
  StreamAccount account;
  std::set<std::string> allowed_codes;  // failures the fault may cause
  absl::Status setup;                   // the cluster or the fault could not be run
  absl::Status idle;                    // gauges back to zero
  std::string note;                     // scenario figures (ejection time, RSS, exit code)
  absl::Duration wall;
  bool passed() const;
  std::string Why() const;  // what failed, for a test message
};

std::vector<std::string> ScenarioNames();
ScenarioResult RunScenario(const std::string& name, const ScenarioOptions& options);

// The results as a Markdown table, one row a scenario.
std::string ResultsTable(const std::vector<ScenarioResult>& results);

}  // namespace onecard::fault

#endif  // ONECARD_TOOLS_FAULT_FAULT_SCENARIOS_H_
