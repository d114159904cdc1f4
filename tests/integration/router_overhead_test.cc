// router-overhead on loopback: the same small requests straight to an
// onecard-worker and through an onecard-router's gRPC and HTTP APIs, in turn. Checks that
// every request completes and the figures are consistent; no wall-clock
// thresholds (the committed figures come from `onecard-bench router-overhead`).
#include <cmath>
#include <iostream>

#include "gtest/gtest.h"
#include "tests/integration/router_testing.h"
#include "tests/testing/time_scale.h"
#include "tools/bench/serve/experiments.h"

namespace onecard::router::testing {
namespace {

TEST(RouterOverheadTest, SameRequestsDirectAndThroughTheRouter) {
  bench::serve::RouterOverheadOptions o;
  o.cluster.worker_bin = ONECARD_WORKER_BIN;
  o.cluster.router_bin = ONECARD_ROUTER_BIN;
  o.cluster.log_dir = LogDir();
  o.pairs = 20;
  o.max_tokens = 2;
  o.admission_requests = 300;
  o.admission_deadline = onecard::testing::ScaledTime(o.admission_deadline);
  absl::StatusOr<bench::serve::RouterOverhead> r = bench::serve::RunRouterOverhead(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->failed, 0);
  EXPECT_EQ(r->direct_ttft.count, 20);
  EXPECT_EQ(r->router_ttft.count, 20);
  EXPECT_EQ(r->http_ttft.count, 20);
  EXPECT_LE(r->http_ttft.p50, r->http_e2e.p50);
  EXPECT_DOUBLE_EQ(r->added_http_ttft_p50_s, r->http_ttft.p50 - r->direct_ttft.p50);
  EXPECT_LE(r->router_ttft.p50, r->router_e2e.p50);
  EXPECT_DOUBLE_EQ(r->added_ttft_p50_s, r->router_ttft.p50 - r->direct_ttft.p50);
  EXPECT_TRUE(std::isfinite(r->added_e2e_p99_s));
  EXPECT_GT(r->admissions_per_second, 0);
  std::cout << "added TTFT p50 " << r->added_ttft_p50_s * 1000 << " ms (gRPC), "
            << r->added_http_ttft_p50_s * 1000 << " ms (HTTP); p99 " << r->added_ttft_p99_s * 1000
            << " ms (gRPC); " << r->admissions_per_second << " admissions/s\n";
}

}  // namespace
}  // namespace onecard::router::testing
