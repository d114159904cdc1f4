// TokenBucket and RateLimiter (see token_bucket.h).
// Tested by tests/router/token_bucket_test.cc with a FakeClock.
#include "router/token_bucket.h"

#include <algorithm>
#include <cmath>

namespace onecard::router {

TokenBucket::TokenBucket(double rate_per_second, double burst, const Clock* clock)
    : rate_per_second_(rate_per_second),
      burst_(burst > 0 ? burst : std::max(rate_per_second, 1.0)),
      clock_(clock),
      level_(burst_),
      last_refill_(clock->Now()) {}

void TokenBucket::Refill() {
  absl::Time now = clock_->Now();
  if (now <= last_refill_) return;
  double seconds = absl::ToDoubleSeconds(now - last_refill_);
  level_ = std::min(burst_, level_ + seconds * rate_per_second_);
  last_refill_ = now;
}

absl::Duration TokenBucket::WaitFor(double amount) {
  if (unlimited()) return absl::ZeroDuration();
  Refill();
  double needed = std::min(amount, burst_);
  if (level_ >= needed) return absl::ZeroDuration();
  // Round up to whole microseconds so that waiting exactly this long passes.
  double micros = std::ceil((needed - level_) / rate_per_second_ * 1e6);
  return absl::Microseconds(std::max(1.0, micros));
}

void TokenBucket::Take(double amount) {
  if (unlimited()) return;
  Refill();
  level_ -= amount;
}

void TokenBucket::Refund(double amount) {
  if (unlimited() || amount <= 0) return;
  Refill();
  level_ = std::min(burst_, level_ + amount);
}

double TokenBucket::Level() {
  if (unlimited()) return burst_;
  Refill();
  return level_;
}

void RateLimiter::SetTenant(const std::string& tenant, const TenantLimits& limits) {
  absl::MutexLock lock(&mu_);
  tenants_.insert_or_assign(
      tenant, Buckets{TokenBucket(limits.requests_per_second, limits.request_burst, clock_),
                      TokenBucket(limits.tokens_per_second, limits.token_burst, clock_),
                      limits.max_concurrent_streams, 0});
}

RateLimiter::Decision RateLimiter::Admit(const std::string& tenant, int64_t cost_tokens) {
  absl::MutexLock lock(&mu_);
  auto it = tenants_.find(tenant);
  if (it == tenants_.end()) return Decision{true, "", absl::ZeroDuration()};
  Buckets& b = it->second;
  if (b.max_streams > 0 && b.open_streams >= b.max_streams) {
    return Decision{false, "streams", kStreamRetryAfter};
  }
  absl::Duration wait_requests = b.requests.WaitFor(1);
  absl::Duration wait_tokens = b.tokens.WaitFor(static_cast<double>(cost_tokens));
  if (wait_requests > absl::ZeroDuration() || wait_tokens > absl::ZeroDuration()) {
    const char* limit = wait_requests >= wait_tokens ? "requests" : "tokens";
    return Decision{false, limit, std::max(wait_requests, wait_tokens)};
  }
  b.requests.Take(1);
  b.tokens.Take(static_cast<double>(cost_tokens));
  ++b.open_streams;
  return Decision{true, "", absl::ZeroDuration()};
}

void RateLimiter::Finish(const std::string& tenant, int64_t reserved_tokens, int64_t used_tokens) {
  absl::MutexLock lock(&mu_);
  auto it = tenants_.find(tenant);
  if (it == tenants_.end()) return;
  if (it->second.open_streams > 0) --it->second.open_streams;  // 0: Finish without Admit
  if (reserved_tokens > used_tokens) {
    it->second.tokens.Refund(static_cast<double>(reserved_tokens - used_tokens));
  }
}

int64_t RateLimiter::OpenStreams(const std::string& tenant) {
  absl::MutexLock lock(&mu_);
  auto it = tenants_.find(tenant);
  return it == tenants_.end() ? 0 : it->second.open_streams;
}

double RateLimiter::TokenLevel(const std::string& tenant) {
  absl::MutexLock lock(&mu_);
  auto it = tenants_.find(tenant);
  return it == tenants_.end() ? 0.0 : it->second.tokens.Level();
}

}  // namespace onecard::router
