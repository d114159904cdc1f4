// The router's configuration: defaults for unset fields of
// onecard.v1.RouterConfig (those written in config.proto), validation with
// errors naming the field, and the options of the admission core it implies.
//
// Queue order from the config: class_offset = {0, aging_step, 2 * aging_step}
// (a waiting request rises one class per aging_step), cost_per_token and
// max_cost_term as given (default 1ms and aging_step / 2).
// Tested by tests/router/router_config_test.cc.
#ifndef ONECARD_ROUTER_ROUTER_CONFIG_H_
#define ONECARD_ROUTER_ROUTER_CONFIG_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "onecard/v1/config.pb.h"
#include "router/api_keys.h"
#include "router/request_queue.h"
#include "router/worker_pool.h"

namespace onecard::router {

struct RouterOptions {
  onecard::v1::RouterConfig config;  // with every default filled in
  QueueOptions queue;
  WorkerPoolOptions pool;
  std::vector<TenantSpec> tenants;  // token_burst still 0 = "from the context"
  absl::Duration default_deadline;
  absl::Duration max_deadline;
  absl::Duration worker_connect_timeout;
  absl::Duration grace_period;
  absl::Duration load_report_interval;
  absl::Duration reconnect_initial_backoff;
  absl::Duration reconnect_max_backoff;
  absl::Duration stale_worker_grace;  // dispatch.stale_worker_grace
};

void ApplyRouterDefaults(onecard::v1::RouterConfig* config);

// Applies the defaults, validates, and derives the options. InvalidArgument
// naming the field (e.g. "queue.max_depth", "tenants[0].max_priority").
absl::StatusOr<RouterOptions> ResolveRouterOptions(const onecard::v1::RouterConfig& config);

// A tenant's token burst once the model's context is known: the configured
// one, else max(context, tokens_per_second).
void ApplyTokenBurstDefaults(int64_t context_length, std::vector<TenantSpec>* tenants);

}  // namespace onecard::router

#endif  // ONECARD_ROUTER_ROUTER_CONFIG_H_
