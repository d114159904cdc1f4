// Tests router/token_bucket.h with a FakeClock: burst, refill, the debt of a
// cost above the burst, reserve and refund, all-or-nothing admission across
// the two buckets, retry-after exactness, and a random sequence checked
// against the bucket's conservation law.
#include "router/token_bucket.h"

#include <random>

#include "engine/common/clock.h"
#include "gtest/gtest.h"

namespace onecard::router {
namespace {

TEST(TokenBucketTest, BurstThenRefillAtRate) {
  FakeClock clock;
  TokenBucket bucket(/*rate_per_second=*/5, /*burst=*/10, &clock);
  for (int i = 0; i < 10; ++i) {
    ASSERT_EQ(bucket.WaitFor(1), absl::ZeroDuration()) << i;
    bucket.Take(1);
  }
  EXPECT_EQ(bucket.WaitFor(1), absl::Milliseconds(200));  // 1 unit at 5/s
  clock.Advance(absl::Milliseconds(199));
  EXPECT_GT(bucket.WaitFor(1), absl::ZeroDuration());
  clock.Advance(absl::Milliseconds(1));
  EXPECT_EQ(bucket.WaitFor(1), absl::ZeroDuration());
}

TEST(TokenBucketTest, NeverFillsPastBurst) {
  FakeClock clock;
  TokenBucket bucket(100, 10, &clock);
  clock.Advance(absl::Hours(1));
  EXPECT_DOUBLE_EQ(bucket.Level(), 10);
  bucket.Refund(50);
  EXPECT_DOUBLE_EQ(bucket.Level(), 10);
}

TEST(TokenBucketTest, CostAboveBurstNeedsFullBucketAndLeavesDebt) {
  FakeClock clock;
  TokenBucket bucket(/*rate_per_second=*/10, /*burst=*/20, &clock);
  bucket.Take(5);                                          // level 15
  EXPECT_EQ(bucket.WaitFor(50), absl::Milliseconds(500));  // back to 20 first
  clock.Advance(absl::Milliseconds(500));
  ASSERT_EQ(bucket.WaitFor(50), absl::ZeroDuration());
  bucket.Take(50);
  EXPECT_DOUBLE_EQ(bucket.Level(), -30);
  // The debt is paid back before anything else passes: 31 units at 10/s.
  EXPECT_EQ(bucket.WaitFor(1), absl::Milliseconds(3100));
}

TEST(TokenBucketTest, UnlimitedAlwaysPasses) {
  FakeClock clock;
  TokenBucket bucket(0, 0, &clock);
  EXPECT_TRUE(bucket.unlimited());
  for (int i = 0; i < 1000; ++i) bucket.Take(1e6);
  EXPECT_EQ(bucket.WaitFor(1e9), absl::ZeroDuration());
}

TEST(TokenBucketTest, ZeroBurstDefaultsToOneSecondOfRate) {
  FakeClock clock;
  EXPECT_DOUBLE_EQ(TokenBucket(40, 0, &clock).burst(), 40);
  EXPECT_DOUBLE_EQ(TokenBucket(0.5, 0, &clock).burst(), 1);
}

TenantLimits Limits(double rps, double rburst, double tps, double tburst) {
  return TenantLimits{rps, rburst, tps, tburst};
}

TEST(RateLimiterTest, ReserveAtAdmissionRefundUnusedAtEnd) {
  FakeClock clock;
  RateLimiter limiter(&clock);
  limiter.SetTenant("acme", Limits(100, 100, 10, 1000));
  ASSERT_TRUE(limiter.Admit("acme", 300).admitted);  // prompt 44 + max_tokens 256
  EXPECT_DOUBLE_EQ(limiter.TokenLevel("acme"), 700);
  limiter.Finish("acme", /*reserved_tokens=*/300, /*used_tokens=*/44 + 16);
  EXPECT_DOUBLE_EQ(limiter.TokenLevel("acme"), 940);
  // Using everything refunds nothing; using "more" (never) refunds nothing.
  ASSERT_TRUE(limiter.Admit("acme", 100).admitted);
  limiter.Finish("acme", 100, 100);
  EXPECT_DOUBLE_EQ(limiter.TokenLevel("acme"), 840);
}

TEST(RateLimiterTest, RefusesAllOrNothingAndNamesTheLimit) {
  FakeClock clock;
  RateLimiter limiter(&clock);
  limiter.SetTenant("t", Limits(/*rps=*/1, /*rburst=*/2, /*tps=*/100, /*tburst=*/100));
  ASSERT_TRUE(limiter.Admit("t", 80).admitted);
  RateLimiter::Decision d = limiter.Admit("t", 80);  // tokens short by 60
  EXPECT_FALSE(d.admitted);
  EXPECT_STREQ(d.limit, "tokens");
  EXPECT_EQ(d.retry_after, absl::Milliseconds(600));
  // The refused request took no request unit: one small request still fits.
  ASSERT_TRUE(limiter.Admit("t", 10).admitted);
  d = limiter.Admit("t", 1);
  EXPECT_FALSE(d.admitted);
  EXPECT_STREQ(d.limit, "requests");
  EXPECT_EQ(d.retry_after, absl::Seconds(1));
}

TEST(RateLimiterTest, ConcurrentStreamsAreCountedUntilFinish) {
  FakeClock clock;
  RateLimiter limiter(&clock);
  TenantLimits limits;
  limits.max_concurrent_streams = 2;
  limiter.SetTenant("t", limits);
  limiter.SetTenant("other", TenantLimits{});
  ASSERT_TRUE(limiter.Admit("t", 10).admitted);
  ASSERT_TRUE(limiter.Admit("t", 10).admitted);
  RateLimiter::Decision d = limiter.Admit("t", 10);
  EXPECT_FALSE(d.admitted);
  EXPECT_STREQ(d.limit, "streams");
  EXPECT_EQ(d.retry_after, absl::Seconds(1));
  EXPECT_EQ(limiter.OpenStreams("t"), 2);
  // Time does not free a stream; only Finish does (whatever was used).
  clock.Advance(absl::Hours(1));
  EXPECT_FALSE(limiter.Admit("t", 10).admitted);
  limiter.Finish("t", 10, 10);
  EXPECT_EQ(limiter.OpenStreams("t"), 1);
  EXPECT_TRUE(limiter.Admit("t", 10).admitted);
  // Other tenants are not limited by it.
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(limiter.Admit("other", 10).admitted);
  // A stray Finish never makes the count negative.
  limiter.Finish("t", 10, 10);
  limiter.Finish("t", 10, 10);
  limiter.Finish("t", 10, 10);
  EXPECT_EQ(limiter.OpenStreams("t"), 0);
}

TEST(RateLimiterTest, RetryAfterIsExactlyEnough) {
  FakeClock clock;
  RateLimiter limiter(&clock);
  limiter.SetTenant("t", Limits(3, 1, 0, 0));
  ASSERT_TRUE(limiter.Admit("t", 1).admitted);
  RateLimiter::Decision d = limiter.Admit("t", 1);
  ASSERT_FALSE(d.admitted);
  clock.Advance(d.retry_after - absl::Microseconds(2));
  EXPECT_FALSE(limiter.Admit("t", 1).admitted);
  clock.Advance(absl::Microseconds(2));
  EXPECT_TRUE(limiter.Admit("t", 1).admitted);
}

TEST(RateLimiterTest, TenantsAreIndependentAndUnknownOnesPass) {
  FakeClock clock;
  RateLimiter limiter(&clock);
  limiter.SetTenant("a", Limits(1, 1, 0, 0));
  limiter.SetTenant("b", Limits(1, 1, 0, 0));
  EXPECT_TRUE(limiter.Admit("a", 1).admitted);
  EXPECT_FALSE(limiter.Admit("a", 1).admitted);
  EXPECT_TRUE(limiter.Admit("b", 1).admitted);
  for (int i = 0; i < 100; ++i) EXPECT_TRUE(limiter.Admit("nobody", 1 << 20).admitted);
}

// Random admissions, finishes and time steps. Conservation: what was taken
// minus what was refunded never exceeds burst + rate * elapsed + the largest
// debt one request can leave; the level stays within [burst - max_cost, burst].
TEST(RateLimiterTest, RandomSequenceKeepsTheRate) {
  std::mt19937 rng(1234);
  FakeClock clock;
  RateLimiter limiter(&clock);
  const double rate = 50, burst = 200, max_cost = 400;
  limiter.SetTenant("t", Limits(0, 0, rate, burst));
  const absl::Time start = clock.Now();
  double taken = 0, refunded = 0;
  std::vector<std::pair<int64_t, int64_t>> running;  // (reserved, used)
  for (int step = 0; step < 20000; ++step) {
    int op = rng() % 3;
    if (op == 0) {
      int64_t cost = 1 + rng() % static_cast<int64_t>(max_cost);
      if (limiter.Admit("t", cost).admitted) {
        taken += cost;
        running.emplace_back(cost, rng() % (cost + 1));
      }
    } else if (op == 1 && !running.empty()) {
      size_t i = rng() % running.size();
      auto [reserved, used] = running[i];
      double before = limiter.TokenLevel("t");
      limiter.Finish("t", reserved, used);
      refunded += limiter.TokenLevel("t") - before;  // clamped at the burst
      running.erase(running.begin() + i);
    } else {
      clock.Advance(absl::Milliseconds(rng() % 50));
    }
    double elapsed = absl::ToDoubleSeconds(clock.Now() - start);
    double level = limiter.TokenLevel("t");
    ASSERT_LE(level, burst + 1e-6) << step;
    ASSERT_GE(level, burst - max_cost - 1e-6) << step;
    ASSERT_LE(taken - refunded, burst + rate * elapsed + max_cost + 1e-6) << step;
  }
}

}  // namespace
}  // namespace onecard::router
