// RouterCore: what every Generate call of one router shares — options, the
// model's preparer, API keys, rate limiter, dispatcher, metrics, the worker
// stubs (one channel per worker address), the draining flag and the count of
// open calls that a drain waits on. Thread-safe.
// Tested through tests/router/router_service_test.cc (in-process router
// against fake workers over gRPC).
#ifndef ONECARD_ROUTER_ROUTER_CORE_H_
#define ONECARD_ROUTER_ROUTER_CORE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "engine/common/clock.h"
#include "onecard/v1/worker.grpc.pb.h"
#include "router/api_keys.h"
#include "router/dispatcher.h"
#include "router/request_prep.h"
#include "router/router_config.h"
#include "router/router_metrics.h"
#include "router/token_bucket.h"
#include "services/common/service_auth.h"

namespace onecard::router {

class RouterCore {
 public:
  // `preparer` and `metrics` must outlive the core. `auth` (the router's
  // credentials towards workers; null: none) makes the worker channels and
  // marks each worker call (AttachCredentials).
  RouterCore(const RouterOptions& options, ApiKeys keys, const RequestPreparer* preparer,
             RouterMetrics* metrics, const Clock* clock,
             std::shared_ptr<const services::ServiceAuth> auth = nullptr);

  const RouterOptions& options() const { return options_; }
  const Clock* clock() const { return clock_; }
  const ApiKeys& keys() const { return keys_; }
  const RequestPreparer& preparer() const { return *preparer_; }
  RateLimiter& limiter() { return limiter_; }
  Dispatcher& dispatcher() { return dispatcher_; }
  RouterMetrics& metrics() { return *metrics_; }

  // The stub for a worker address (created on first use, then shared).
  onecard::v1::Worker::Stub* Stub(const std::string& address);
  // Adds the router's token to a call to a worker (token mode).
  void AttachCredentials(grpc::ClientContext* context) const;
  uint64_t NextId() { return next_id_.fetch_add(1) + 1; }

  bool draining() const { return draining_.load(); }
  void SetDraining() { draining_.store(true); }
  void CallStarted();
  void CallEnded();
  // Waits until no call is open or `deadline` passes; true when idle.
  bool WaitIdle(absl::Time deadline);
  RouterGauges Gauges();

 private:
  RouterOptions options_;
  const Clock* clock_;
  ApiKeys keys_;
  const RequestPreparer* preparer_;
  RouterMetrics* metrics_;
  const std::shared_ptr<const services::ServiceAuth> auth_;
  RateLimiter limiter_;
  Dispatcher dispatcher_;
  std::atomic<uint64_t> next_id_{0};
  std::atomic<bool> draining_{false};

  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::unique_ptr<onecard::v1::Worker::Stub>> stubs_
      ABSL_GUARDED_BY(mu_);
  int64_t open_calls_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace onecard::router

#endif  // ONECARD_ROUTER_ROUTER_CORE_H_
