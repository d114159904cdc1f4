// Killing workers during a run through the router (real processes, SmolLM2
// on the CPU backend). Worker A is stopped (SIGSTOP) before the load, so the
// requests the router sends it never get a token; worker C is killed while it
// streams; worker B stays. Then A is killed too. Requests that had no token
// are retried on B and complete; those that had tokens end with UNAVAILABLE
// naming the worker; nothing hangs, and sent = completed + failed.
#include <signal.h>

#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/integration/router_testing.h"
#include "tests/testing/time_scale.h"
#include "tools/bench/serve/load_runner.h"

namespace onecard::router::testing {
namespace {

using bench::serve::LoadRun;
using bench::serve::LoadSpec;
using onecard::testing::ScaledTime;

TEST(RouterKillWorkerTest, NoTokenRequestsAreRetriedStartedOnesEndUnavailable) {
  std::vector<std::unique_ptr<ChildProcess>> w;
  for (const char* name : {"kill-worker-a", "kill-worker-b", "kill-worker-c"}) {
    auto p = StartWorker(name);
    ASSERT_TRUE(p.ok()) << p.status();
    w.push_back(std::move(*p));
  }
  ChildProcess& a = *w[0];
  ChildProcess& c = *w[2];
  a.Signal(SIGSTOP);
  const std::string config = LogDir() + "/kill-router.yaml";
  std::ofstream(config) << "dispatch: {probe_interval: 10m, eject_after_failures: 3}\n";
  auto router = StartRouter("kill-router", {w[0].get(), w[1].get(), w[2].get()},
                            {"--config", config, "--max-in-flight-per-worker", "4"});
  ASSERT_TRUE(router.ok()) << router.status();
  const std::string metrics = (*router)->metrics_address();

  LoadSpec spec;
  spec.target = (*router)->grpc_address();
  spec.mix = *bench::serve::ParseMix("k=1:16/24");
  spec.users = 12;
  spec.num_requests = 48;
  spec.request_timeout = ScaledTime(absl::Minutes(5));
  spec.progress = false;
  absl::StatusOr<LoadRun> run;
  std::thread load([&] { run = bench::serve::RunLoad(spec); });

  // A holds requests without tokens; C is streaming.
  ASSERT_TRUE(AwaitMetrics(metrics, [&](const onecard::testing::PromText& t) {
    return t.Value("onecard_router_worker_in_flight", {{"worker", a.grpc_address()}}) >= 1 &&
           t.Value("onecard_router_worker_in_flight", {{"worker", c.grpc_address()}}) >= 2;
  }));
  ASSERT_TRUE(AwaitMetrics(c.metrics_address(), [](const onecard::testing::PromText& t) {
    return t.Value("onecard_worker_generation_tokens_total").value_or(0) >= 8;
  }));
  c.Kill();
  ASSERT_TRUE(AwaitMetrics(metrics, [&](const onecard::testing::PromText& t) {
    return t.Value("onecard_router_worker_in_flight", {{"worker", c.grpc_address()}}).value_or(0) ==
           0;
  }));
  a.Kill();
  load.join();

  ASSERT_TRUE(run.ok()) << run.status();
  const bench::serve::ClassStats& total = run->result.total;
  EXPECT_EQ(total.sent, 48);
  EXPECT_EQ(static_cast<int64_t>(run->records.size()), 48);
  int64_t failed = 0;
  for (const bench::serve::RequestRecord& r : run->records) {
    if (r.code == 0) {
      EXPECT_EQ(r.output_tokens, 24);
      continue;
    }
    ++failed;
    EXPECT_EQ(r.code, static_cast<int>(grpc::StatusCode::UNAVAILABLE));
    EXPECT_GT(r.output_tokens, 0) << "a request failed before its first token";
  }
  EXPECT_EQ(total.ok + failed, total.sent);
  EXPECT_GE(failed, 1) << "no request was streaming on the killed worker";
  // The router counts a call closed when gRPC is done with it, which can be a
  // moment after the client has its status: wait for the gauges to settle.
  EXPECT_TRUE(AwaitMetrics(
      metrics,
      [&](const onecard::testing::PromText& t) {
        return t.Value("onecard_router_open_streams") == 0 &&
               t.Value("onecard_router_requests_total",
                       {{"api", "grpc"}, {"code", "UNAVAILABLE"}}) == failed;
      },
      ScaledTime(absl::Seconds(10))));
  absl::StatusOr<onecard::testing::PromText> text = Scrape(metrics);
  ASSERT_TRUE(text.ok());
  EXPECT_GE(text->Value("onecard_router_retries_total").value_or(0), 1);
  EXPECT_EQ(
      text->Value("onecard_router_requests_total", {{"api", "grpc"}, {"code", "UNAVAILABLE"}}),
      failed);
  EXPECT_EQ(text->Value("onecard_router_open_streams"), 0);
  std::cout << "sent " << total.sent << ", completed " << total.ok << ", failed " << failed
            << " (after their first token), retried "
            << text->Value("onecard_router_retries_total").value_or(0) << "\n";
  EXPECT_EQ((*router)->Terminate(ScaledTime(absl::Seconds(30))), 0);
}

}  // namespace
}  // namespace onecard::router::testing
