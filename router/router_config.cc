// Router configuration defaults and validation (see router_config.h).
// Tested by tests/router/router_config_test.cc.
#include "router/router_config.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "router/request_prep.h"
#include "services/common/proto_time.h"

namespace onecard::router {
namespace {

using google::protobuf::Duration;
using services::FromProtoDuration;

void DefaultDuration(Duration* d, absl::Duration value) {
  if (d->seconds() == 0 && d->nanos() == 0) services::ToProtoDuration(value, d);
}

void DefaultString(std::string* s, const char* value) {
  if (s->empty()) *s = value;
}

absl::Status NonNegative(const Duration& d, absl::string_view field) {
  if (FromProtoDuration(d) < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": must not be negative"));
  }
  return absl::OkStatus();
}

absl::Status Positive(int64_t v, absl::string_view field) {
  if (v <= 0) return absl::InvalidArgumentError(absl::StrCat(field, ": must be > 0"));
  return absl::OkStatus();
}

absl::Status ValidateTenant(const onecard::v1::TenantConfig& t, int i) {
  const std::string field = absl::StrCat("tenants[", i, "]");
  for (auto [value, name] : {std::pair{t.requests_per_second(), "requests_per_second"},
                             std::pair{t.request_burst(), "request_burst"},
                             std::pair{t.tokens_per_second(), "tokens_per_second"},
                             std::pair{t.token_burst(), "token_burst"}}) {
    if (!(value >= 0)) {
      return absl::InvalidArgumentError(absl::StrCat(field, ".", name, ": must be >= 0"));
    }
  }
  if (!onecard::v1::Priority_IsValid(t.max_priority())) {
    return absl::InvalidArgumentError(absl::StrCat(field, ".max_priority: unknown class"));
  }
  return absl::OkStatus();
}

absl::Status Validate(const onecard::v1::RouterConfig& c) {
  RETURN_IF_ERROR(Positive(c.queue().max_depth(), "queue.max_depth"));
  RETURN_IF_ERROR(Positive(c.queue().max_depth_per_class(), "queue.max_depth_per_class"));
  RETURN_IF_ERROR(NonNegative(c.queue().queue_timeout(), "queue.queue_timeout"));
  RETURN_IF_ERROR(NonNegative(c.queue().aging_step(), "queue.aging_step"));
  RETURN_IF_ERROR(NonNegative(c.queue().cost_per_token(), "queue.cost_per_token"));
  RETURN_IF_ERROR(NonNegative(c.queue().max_cost_term(), "queue.max_cost_term"));
  RETURN_IF_ERROR(NonNegative(c.timeouts().default_deadline(), "timeouts.default_deadline"));
  RETURN_IF_ERROR(NonNegative(c.timeouts().max_deadline(), "timeouts.max_deadline"));
  if (c.dispatch().max_in_flight_per_worker() < 0) {
    return absl::InvalidArgumentError("dispatch.max_in_flight_per_worker: must be >= 0");
  }
  RETURN_IF_ERROR(Positive(c.dispatch().eject_after_failures(), "dispatch.eject_after_failures"));
  RETURN_IF_ERROR(
      Positive(c.dispatch().affinity_prefix_tokens(), "dispatch.affinity_prefix_tokens"));
  RETURN_IF_ERROR(Positive(c.max_request_bytes(), "max_request_bytes"));
  RETURN_IF_ERROR(Positive(c.default_max_tokens(), "default_max_tokens"));
  if (c.model_path().empty()) {
    return absl::InvalidArgumentError("model_path: required (the tokenizer comes from it)");
  }
  for (int i = 0; i < c.tenants_size(); ++i) RETURN_IF_ERROR(ValidateTenant(c.tenants(i), i));
  return absl::OkStatus();
}

}  // namespace

void ApplyRouterDefaults(onecard::v1::RouterConfig* c) {
  DefaultString(c->mutable_listen_address(), "0.0.0.0:50050");
  DefaultString(c->mutable_metrics_listen_address(), "0.0.0.0:9401");
  onecard::v1::QueueConfig* q = c->mutable_queue();
  if (q->max_depth() == 0) q->set_max_depth(1024);
  if (q->max_depth_per_class() == 0) q->set_max_depth_per_class(q->max_depth());
  DefaultDuration(q->mutable_queue_timeout(), absl::Seconds(30));
  DefaultDuration(q->mutable_aging_step(), absl::Seconds(5));
  DefaultDuration(q->mutable_cost_per_token(), absl::Milliseconds(1));
  DefaultDuration(q->mutable_max_cost_term(), FromProtoDuration(q->aging_step()) / 2);
  onecard::v1::TimeoutConfig* t = c->mutable_timeouts();
  DefaultDuration(t->mutable_default_deadline(), absl::Minutes(10));
  DefaultDuration(t->mutable_max_deadline(), absl::Hours(1));
  DefaultDuration(t->mutable_worker_connect_timeout(), absl::Seconds(2));
  DefaultDuration(t->mutable_grace_period(), absl::Seconds(30));
  onecard::v1::DispatchConfig* d = c->mutable_dispatch();
  if (d->eject_after_failures() == 0) d->set_eject_after_failures(3);
  DefaultDuration(d->mutable_probe_interval(), absl::Seconds(5));
  if (d->affinity_prefix_tokens() == 0) d->set_affinity_prefix_tokens(64);
  if (c->max_request_bytes() == 0) c->set_max_request_bytes(4 << 20);
  DefaultDuration(c->mutable_load_report_interval(), absl::Milliseconds(250));
  DefaultDuration(c->mutable_reconnect()->mutable_initial_backoff(), absl::Milliseconds(100));
  DefaultDuration(c->mutable_reconnect()->mutable_max_backoff(), absl::Seconds(5));
  if (c->default_max_tokens() == 0) c->set_default_max_tokens(256);
}

absl::StatusOr<RouterOptions> ResolveRouterOptions(const onecard::v1::RouterConfig& config) {
  RouterOptions o;
  o.config = config;
  ApplyRouterDefaults(&o.config);
  const onecard::v1::RouterConfig& c = o.config;
  RETURN_IF_ERROR(Validate(c));
  const absl::Duration aging = FromProtoDuration(c.queue().aging_step());
  o.queue.max_depth = c.queue().max_depth();
  o.queue.max_depth_per_class = {c.queue().max_depth_per_class(), c.queue().max_depth_per_class(),
                                 c.queue().max_depth_per_class()};
  o.queue.queue_timeout = FromProtoDuration(c.queue().queue_timeout());
  o.queue.class_offset = {absl::ZeroDuration(), aging, 2 * aging};
  o.queue.cost_per_token = FromProtoDuration(c.queue().cost_per_token());
  o.queue.max_cost_term = FromProtoDuration(c.queue().max_cost_term());
  o.queue.fifo = c.queue().fifo();
  o.pool.eject_after_failures = c.dispatch().eject_after_failures();
  o.pool.eject_base = FromProtoDuration(c.dispatch().probe_interval());
  o.pool.eject_max = 8 * o.pool.eject_base;
  for (const onecard::v1::TenantConfig& t : c.tenants()) {
    TenantSpec spec;
    spec.tenant.name = t.name();
    spec.tenant.limits = TenantLimits{t.requests_per_second(), t.request_burst(),
                                      t.tokens_per_second(), t.token_burst()};
    spec.tenant.max_priority = FromProtoPriority(t.max_priority());
    spec.api_key_sha256.assign(t.api_key_sha256().begin(), t.api_key_sha256().end());
    o.tenants.push_back(std::move(spec));
  }
  o.default_deadline = FromProtoDuration(c.timeouts().default_deadline());
  o.max_deadline = FromProtoDuration(c.timeouts().max_deadline());
  o.worker_connect_timeout = FromProtoDuration(c.timeouts().worker_connect_timeout());
  o.grace_period = FromProtoDuration(c.timeouts().grace_period());
  o.load_report_interval = FromProtoDuration(c.load_report_interval());
  o.reconnect_initial_backoff = FromProtoDuration(c.reconnect().initial_backoff());
  o.reconnect_max_backoff = FromProtoDuration(c.reconnect().max_backoff());
  return o;
}

void ApplyTokenBurstDefaults(int64_t context_length, std::vector<TenantSpec>* tenants) {
  for (TenantSpec& spec : *tenants) {
    TenantLimits& l = spec.tenant.limits;
    if (l.tokens_per_second > 0 && l.token_burst <= 0) {
      l.token_burst = std::max<double>(static_cast<double>(context_length), l.tokens_per_second);
    }
  }
}

}  // namespace onecard::router
