// 2,000 concurrent streams against one onecard-router (one onecard-worker
// behind it, CPU, SmolLM2). The worker is paused (SIGSTOP) until all 2,000
// calls are open at the router, so they really are concurrent; then it runs
// and every one completes: none lost. The router's resident memory at 2,000
// open streams is reported and bounded.
#include <signal.h>

#include <iostream>
#include <thread>

#include "gtest/gtest.h"
#include "tests/integration/router_testing.h"
#include "tests/testing/time_scale.h"
#include "tools/bench/serve/load_runner.h"

namespace onecard::router::testing {
namespace {

using onecard::testing::ScaledTime;

constexpr int kStreams = 2000;

TEST(RouterStreamsTest, TwoThousandConcurrentStreamsNoneLost) {
  // Big batches: the worker takes 256 one-token prompts per step.
  auto worker = StartWorker("streams-worker", {"--max-num-seqs", "256"});
  ASSERT_TRUE(worker.ok()) << worker.status();
  auto router = StartRouter("streams-router", {worker->get()},
                            {"--queue-max-depth", "4096", "--queue-timeout",
                             absl::FormatDuration(ScaledTime(absl::Minutes(10)))});
  ASSERT_TRUE(router.ok()) << router.status();
  const int64_t idle_rss = (*router)->RssBytes();
  (*worker)->Signal(SIGSTOP);

  bench::serve::LoadSpec spec;
  spec.target = (*router)->grpc_address();
  spec.mix = *bench::serve::ParseMix("tiny=1:1/1");
  spec.users = kStreams;
  spec.num_requests = kStreams;
  spec.request_timeout = ScaledTime(absl::Minutes(8));
  spec.progress = false;
  absl::StatusOr<bench::serve::LoadRun> run;
  std::thread load([&] { run = bench::serve::RunLoad(spec); });

  const bool all_open = AwaitMetrics((*router)->metrics_address(),
                                     [](const onecard::testing::PromText& t) {
                                       return t.Value("onecard_router_open_streams") == kStreams;
                                     },
                                     ScaledTime(absl::Minutes(3)));
  const int64_t busy_rss = (*router)->RssBytes();
  (*worker)->Signal(SIGCONT);
  load.join();
  ASSERT_TRUE(all_open) << "the router never held all streams at once";
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->result.total.sent, kStreams);
  EXPECT_EQ(run->result.total.ok, kStreams) << "lost or failed streams";
  EXPECT_EQ(run->result.total.output_tokens, kStreams);
  std::cout << "router RSS: " << idle_rss / (1 << 20) << " MiB idle, " << busy_rss / (1 << 20)
            << " MiB with " << kStreams << " open streams\n";
  RecordProperty("router_rss_idle_mib", static_cast<int>(idle_rss >> 20));
  RecordProperty("router_rss_2000_streams_mib", static_cast<int>(busy_rss >> 20));
  EXPECT_LT(busy_rss, int64_t{512} << 20);
  EXPECT_EQ((*router)->Terminate(ScaledTime(absl::Seconds(30))), 0);
}

}  // namespace
}  // namespace onecard::router::testing
