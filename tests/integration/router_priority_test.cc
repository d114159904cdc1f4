// serve-priority on loopback: one onecard-worker (CPU, SmolLM2) behind a FIFO
// router, then behind a priority router, both dispatching one request at a
// time; a 90 % short / 10 % long Poisson load (the same seed for both). The
// short requests' P95 TTFT must be at least 2x better with priority. The
// committed figure comes from `onecard-bench serve-priority` (see
// bench/results/router.md); this test runs a smaller load.
#include <iostream>

#include "gtest/gtest.h"
#include "tests/integration/router_testing.h"
#include "tools/bench/serve/experiments.h"

namespace onecard::router::testing {
namespace {

TEST(RouterPriorityTest, ShortRequestP95TtftAtLeastTwiceBetterThanFifo) {
  bench::serve::PriorityComparisonOptions o;
  o.cluster.worker_bin = ONECARD_WORKER_BIN;
  o.cluster.router_bin = ONECARD_ROUTER_BIN;
  o.cluster.log_dir = LogDir();
  o.load.mix = *bench::serve::ParseMix(PRIORITY_MIX);
  o.load.mode = bench::serve::ArrivalMode::kPoisson;
  o.load.rate_per_second = PRIORITY_RATE;
  o.load.num_requests = PRIORITY_REQUESTS;
  o.load.seed = 11;
  o.load.progress = false;
  absl::StatusOr<bench::serve::PriorityComparison> c = bench::serve::RunPriorityComparison(o);
  ASSERT_TRUE(c.ok()) << c.status();
  std::cout << "short P95 TTFT: FIFO " << c->short_p95_ttft_fifo_s << " s, priority "
            << c->short_p95_ttft_priority_s << " s, ratio " << c->ratio << "\n";
  EXPECT_EQ(c->fifo.total.ok, c->fifo.total.sent);
  EXPECT_EQ(c->priority.total.ok, c->priority.total.sent);
  EXPECT_GE(c->ratio, 2.0);
}

}  // namespace
}  // namespace onecard::router::testing
