// serve-priority on loopback: one onecard-worker (CPU, SmolLM2) behind a FIFO
// router, then behind a priority router, both dispatching one request at a
// time; 90 % short and 10 % long requests, the long ones in bursts of 4,
// Poisson arrivals at 0.8x the worker's capacity (calibrated first; the same
// seed and rate for both). The
// short requests' P95 TTFT must be at least 2x better with priority. The
// committed figure comes from `onecard-bench serve-priority` (see
// bench/results/router.md); this test runs a smaller load.
#include <iostream>

#include "gtest/gtest.h"
#include "tests/integration/router_testing.h"
#include "tests/testing/time_scale.h"
#include "tools/bench/serve/experiments.h"

namespace onecard::router::testing {
namespace {

TEST(RouterPriorityTest, ShortRequestP95TtftAtLeastTwiceBetterThanFifo) {
  bench::serve::PriorityComparisonOptions o;
  o.cluster.worker_bin = ONECARD_WORKER_BIN;
  o.cluster.router_bin = ONECARD_ROUTER_BIN;
  o.cluster.log_dir = LogDir();
  o.load.mix = *bench::serve::ParseMix(PRIORITY_MIX);
  o.target_load = PRIORITY_TARGET_LOAD;  // Poisson at 0.8x the calibrated capacity
  o.load.num_requests = PRIORITY_REQUESTS;
  o.load.seed = 11;
  o.load.progress = false;
  // Time windows follow the build's speed: the wait before a batch request
  // ranks as interactive, and the requests' deadline.
  o.aging_step = onecard::testing::ScaledTime(o.aging_step);
  o.load.request_timeout = onecard::testing::ScaledTime(o.load.request_timeout);
  absl::StatusOr<bench::serve::PriorityComparison> c = bench::serve::RunPriorityComparison(o);
  ASSERT_TRUE(c.ok()) << c.status();
  std::cout << "capacity " << c->capacity_per_second << " req/s, offered " << c->rate_per_second
            << " req/s; short P95 TTFT: FIFO " << c->short_p95_ttft_fifo_s << " s, priority "
            << c->short_p95_ttft_priority_s << " s, ratio " << c->ratio << "\n";
  EXPECT_EQ(c->fifo.total.ok, c->fifo.total.sent);
  EXPECT_EQ(c->priority.total.ok, c->priority.total.sent);
  EXPECT_GE(c->ratio, 2.0);
}

}  // namespace
}  // namespace onecard::router::testing
