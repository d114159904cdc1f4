// RouterCore (see router_core.h).
#include "router/router_core.h"

#include <limits>

#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"

namespace onecard::router {

RouterCore::RouterCore(const RouterOptions& options, ApiKeys keys, const RequestPreparer* preparer,
                       RouterMetrics* metrics, const Clock* clock,
                       std::shared_ptr<const services::ServiceAuth> auth)
    : options_(options),
      clock_(clock),
      keys_(std::move(keys)),
      preparer_(preparer),
      metrics_(metrics),
      auth_(std::move(auth)),
      limiter_(clock),
      dispatcher_(options.queue, options.pool, clock) {
  std::vector<TenantSpec> tenants = options.tenants;
  ApplyTokenBurstDefaults(preparer->model().context_length, &tenants);
  for (const TenantSpec& t : tenants) limiter_.SetTenant(t.tenant.name, t.tenant.limits);
}

onecard::v1::Worker::Stub* RouterCore::Stub(const std::string& address) {
  absl::MutexLock lock(&mu_);
  auto it = stubs_.find(address);
  if (it == stubs_.end()) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(std::numeric_limits<int>::max());
    // Reconnect quickly after a worker restarts; ejection limits the retries.
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
    auto channel = grpc::CreateCustomChannel(
        address,
        auth_ != nullptr ? auth_->ChannelCredentials() : grpc::InsecureChannelCredentials(), args);
    it = stubs_.emplace(address, onecard::v1::Worker::NewStub(channel)).first;
  }
  return it->second.get();
}

void RouterCore::AttachCredentials(grpc::ClientContext* context) const {
  if (auth_ != nullptr) auth_->Attach(services::ServiceRole::kRouter, context);
}

void RouterCore::CallStarted() {
  absl::MutexLock lock(&mu_);
  ++open_calls_;
}

void RouterCore::CallEnded() {
  absl::MutexLock lock(&mu_);
  --open_calls_;
}

bool RouterCore::WaitIdle(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return open_calls_ == 0; };
  return mu_.AwaitWithDeadline(absl::Condition(&idle), deadline);
}

RouterGauges RouterCore::Gauges() {
  RouterGauges g;
  g.queue_depth = dispatcher_.QueueDepths();
  g.workers = dispatcher_.Workers();
  g.draining = draining();
  absl::MutexLock lock(&mu_);
  g.open_streams = open_calls_;
  return g;
}

}  // namespace onecard::router
