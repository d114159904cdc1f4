// The fault suite's CI subset (the whole suite: scripts/fault.sh): real
// onecard-metrics, two onecard-worker (CPU, SmolLM2) and onecard-router
// processes on loopback; a worker SIGKILLed mid-stream, 200 clients that
// hang up after their first token, a worker draining on SIGTERM under load.
// After each: sent = completed + failed with the codes the fault allows,
// nothing lost, every stream a prefix of its prompt's greedy answer, every
// gauge back to zero (tools/fault/fault_scenarios.h).
#include <unistd.h>

#include <iostream>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/testing/time_scale.h"
#include "tools/fault/fault_scenarios.h"

namespace onecard::fault {
namespace {

ScenarioOptions Options() {
  ScenarioOptions o;
  o.cluster.work_dir = absl::StrCat("/tmp/onecard-fault-it-", getpid());
  o.cluster.metrics_bin = ONECARD_METRICS_BIN;
  o.cluster.worker_bin = ONECARD_WORKER_BIN;
  o.cluster.router_bin = ONECARD_ROUTER_BIN;
  o.disconnect_clients = 200;
  o.cluster.time_scale = onecard::testing::kTestTimeScale;  // a sanitizer build's slowdown
  return o;
}

// The checks every scenario shares.
void ExpectAccounted(const ScenarioResult& r) {
  std::cout << ResultsTable({r});
  EXPECT_TRUE(r.passed()) << r.Why();
  EXPECT_EQ(r.account.lost, 0);
  EXPECT_EQ(r.account.bad_streams, 0);
  EXPECT_TRUE(r.idle.ok()) << r.idle;
}

int64_t Failed(const ScenarioResult& r, const std::string& code) {
  auto it = r.account.failed.find(code);
  return it == r.account.failed.end() ? 0 : it->second;
}

TEST(FaultSuiteTest, WorkerSigkillFailsOnlyItsStartedStreams) {
  const ScenarioResult r = RunScenario("worker-sigkill", Options());
  ExpectAccounted(r);
  EXPECT_EQ(r.account.sent, 48);
  EXPECT_GE(r.account.completed, 1);
  EXPECT_GE(Failed(r, "UNAVAILABLE"), 1) << "nothing was streaming on the killed worker";
  EXPECT_EQ(r.account.completed + Failed(r, "UNAVAILABLE"), 48);
}

TEST(FaultSuiteTest, ClientsHangingUpMidStreamAreAllCancelled) {
  const ScenarioResult r = RunScenario("disconnect", Options());
  ExpectAccounted(r);
  EXPECT_EQ(r.account.sent, 200);
  EXPECT_EQ(Failed(r, "CANCELLED"), 200);
}

TEST(FaultSuiteTest, DrainingWorkerFinishesEveryStream) {
  const ScenarioResult r = RunScenario("drain-sigterm", Options());
  ExpectAccounted(r);
  EXPECT_EQ(r.account.sent, 48);
  EXPECT_EQ(r.account.completed, 48);
}

}  // namespace
}  // namespace onecard::fault
