// TokenBucket: a refilling budget of `rate` units per second holding at most
// `burst` units, on an injected clock. RateLimiter: one requests/s bucket and
// one tokens/s bucket per tenant. The token cost of a request (prompt tokens +
// max_tokens) is reserved at admission and the unused part refunded when the
// request ends.
//
// A cost larger than the burst is admitted from a full bucket and leaves it in
// debt (a negative level that refill pays back), so no request is refused
// forever and the long-run rate still holds.
// Tested by tests/router/token_bucket_test.cc with a FakeClock.
#ifndef ONECARD_ROUTER_TOKEN_BUCKET_H_
#define ONECARD_ROUTER_TOKEN_BUCKET_H_

#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "engine/common/clock.h"

namespace onecard::router {

// Not thread-safe; RateLimiter holds the lock.
class TokenBucket {
 public:
  // rate_per_second <= 0 means unlimited. The bucket starts full.
  TokenBucket(double rate_per_second, double burst, const Clock* clock);

  // How long until `amount` could be taken; zero when it can be now. An
  // amount above the burst needs a full bucket. Unlimited: always zero.
  absl::Duration WaitFor(double amount);
  // Takes `amount` (the caller checked WaitFor first); may leave a debt.
  void Take(double amount);
  // Gives back `amount`, never above the burst.
  void Refund(double amount);
  double Level();  // after refill; may be negative (a debt)

  bool unlimited() const { return rate_per_second_ <= 0; }
  double burst() const { return burst_; }

 private:
  void Refill();

  double rate_per_second_;
  double burst_;
  const Clock* clock_;
  double level_;
  absl::Time last_refill_;
};

// Per-tenant limits. A rate <= 0 turns that limit off; a burst <= 0 defaults
// to one second of the rate.
struct TenantLimits {
  double requests_per_second = 0;
  double request_burst = 0;
  double tokens_per_second = 0;
  double token_burst = 0;
  int64_t max_concurrent_streams = 0;  // admitted and not yet finished; <= 0: unlimited
};

class RateLimiter {
 public:
  explicit RateLimiter(const Clock* clock) : clock_(clock) {}

  // Adds or replaces a tenant's limits (its buckets restart full).
  void SetTenant(const std::string& tenant, const TenantLimits& limits);

  struct Decision {
    bool admitted = false;
    const char* limit = "";      // "requests" or "tokens" when refused
    absl::Duration retry_after;  // when refused: the wait until it would pass
  };
  // Admits one request costing `cost_tokens` when both buckets allow it and
  // the tenant has a stream to spare ("streams": max_concurrent_streams
  // open; retry_after is then kStreamRetryAfter), and takes from both;
  // otherwise takes nothing. Tenants without limits pass.
  Decision Admit(const std::string& tenant, int64_t cost_tokens);
  // Ends an admitted request: frees its stream and refunds
  // reserved_tokens - used_tokens (when positive).
  void Finish(const std::string& tenant, int64_t reserved_tokens, int64_t used_tokens);
  // The tenant's admitted, unfinished requests (tests); 0 when unknown.
  int64_t OpenStreams(const std::string& tenant);

  // What a client refused for its open streams is told to wait: streams end
  // at their own pace, so this is a hint, not a promise.
  static constexpr absl::Duration kStreamRetryAfter = absl::Seconds(1);
  // The tenant's token-bucket level (tests and metrics); 0 when unknown.
  double TokenLevel(const std::string& tenant);

 private:
  struct Buckets {
    TokenBucket requests;
    TokenBucket tokens;
    int64_t max_streams = 0;
    int64_t open_streams = 0;
  };
  const Clock* clock_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, Buckets> tenants_ ABSL_GUARDED_BY(mu_);
};

}  // namespace onecard::router

#endif  // ONECARD_ROUTER_TOKEN_BUCKET_H_
