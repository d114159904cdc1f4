// Helpers of the router integration tests: a local cluster of real
// onecard-worker processes (CPU backend, SmolLM2) behind a real
// onecard-router process on loopback (port 0 everywhere), a Generation stub,
// and /metrics scrapes parsed with the strict Prometheus text parser.
// Used by tests/integration/router_*_test.cc.
#ifndef ONECARD_TESTS_INTEGRATION_ROUTER_TESTING_H_
#define ONECARD_TESTS_INTEGRATION_ROUTER_TESTING_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "onecard/v1/generation.grpc.pb.h"
#include "tests/services/testing/prom_text.h"
#include "tools/bench/serve/local_cluster.h"

namespace onecard::router::testing {

using bench::serve::ChildProcess;

inline constexpr char kModel[] = "models/SmolLM2-135M-Instruct.Q4_1.gguf";

// A folder for process logs, unique per test process.
std::string LogDir();

absl::StatusOr<std::unique_ptr<ChildProcess>> StartWorker(const std::string& name,
                                                          std::vector<std::string> extra = {});
// A router with `workers` as its static endpoints; with no tenants in
// `extra`'s config it serves callers without a key (allow_unauthenticated).
// Its queue timeout is the default 30 s, ScaledTime'd, unless `extra` sets
// one. Both wait for READY up to 120 s, ScaledTime'd.
absl::StatusOr<std::unique_ptr<ChildProcess>> StartRouter(
    const std::string& name, const std::vector<const ChildProcess*>& workers,
    std::vector<std::string> extra = {});

std::unique_ptr<onecard::v1::Generation::Stub> Connect(const std::string& address);

absl::StatusOr<onecard::testing::PromText> Scrape(const std::string& metrics_address);
// Scrapes every 50 ms until `ready(text)` or `timeout` (a normal build's
// budget, ScaledTime'd inside); false on timeout.
bool AwaitMetrics(const std::string& metrics_address,
                  const std::function<bool(const onecard::testing::PromText&)>& ready,
                  absl::Duration timeout = absl::Seconds(60));

}  // namespace onecard::router::testing

#endif  // ONECARD_TESTS_INTEGRATION_ROUTER_TESTING_H_
