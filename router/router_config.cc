// Router configuration defaults and validation (see router_config.h).
// Tested by tests/router/router_config_test.cc.
#include "router/router_config.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "router/request_prep.h"
#include "services/common/config_bounds.h"
#include "services/common/proto_time.h"

namespace onecard::router {
namespace {

constexpr int64_t kMaxQueueDepth = 1000000;
constexpr int64_t kMaxInFlightPerWorker = 100000;
constexpr int64_t kMaxEjectAfterFailures = 1000000;
constexpr int64_t kMaxAttempts = 16;
constexpr int64_t kMaxConcurrentStreams = 1000000;
constexpr double kMaxRate = 1e12;  // requests or tokens a second, and bursts
constexpr int64_t kMaxHttpConnections = 10000;

using google::protobuf::Duration;
using services::FromProtoDuration;

void DefaultDuration(Duration* d, absl::Duration value) {
  if (d->seconds() == 0 && d->nanos() == 0) services::ToProtoDuration(value, d);
}

void DefaultString(std::string* s, const char* value) {
  if (s->empty()) *s = value;
}

absl::Status Within(const Duration& d, absl::string_view field, absl::Duration lo,
                    absl::Duration hi = services::kMaxConfigDuration) {
  return services::CheckDurationRange(field, FromProtoDuration(d), lo, hi);
}

absl::Status ValidateTenant(const onecard::v1::TenantConfig& t, int i) {
  const std::string field = absl::StrCat("tenants[", i, "]");
  for (auto [value, name] : {std::pair{t.requests_per_second(), "requests_per_second"},
                             std::pair{t.request_burst(), "request_burst"},
                             std::pair{t.tokens_per_second(), "tokens_per_second"},
                             std::pair{t.token_burst(), "token_burst"}}) {
    RETURN_IF_ERROR(services::CheckDoubleRange(absl::StrCat(field, ".", name), value, 0, kMaxRate));
  }
  if (!onecard::v1::Priority_IsValid(t.max_priority())) {
    return absl::InvalidArgumentError(absl::StrCat(field, ".max_priority: unknown class"));
  }
  RETURN_IF_ERROR(services::CheckRange(absl::StrCat(field, ".max_concurrent_streams"),
                                       t.max_concurrent_streams(), 0, kMaxConcurrentStreams));
  RETURN_IF_ERROR(services::CheckRange(absl::StrCat(field, ".max_prompt_tokens"),
                                       t.max_prompt_tokens(), 0, services::kMaxTokens));
  return services::CheckRange(absl::StrCat(field, ".max_tokens"), t.max_tokens(), 0,
                              services::kMaxTokens);
}

// The queue and the deadlines: sizes and waits.
absl::Status ValidateQueue(const onecard::v1::RouterConfig& c) {
  const onecard::v1::QueueConfig& q = c.queue();
  RETURN_IF_ERROR(services::CheckRange("queue.max_depth", q.max_depth(), 1, kMaxQueueDepth));
  RETURN_IF_ERROR(services::CheckRange("queue.max_depth_per_class", q.max_depth_per_class(), 1,
                                       kMaxQueueDepth));
  const absl::Duration zero = absl::ZeroDuration();
  RETURN_IF_ERROR(Within(q.queue_timeout(), "queue.queue_timeout", zero));
  RETURN_IF_ERROR(Within(q.aging_step(), "queue.aging_step", zero));
  RETURN_IF_ERROR(Within(q.cost_per_token(), "queue.cost_per_token", zero, absl::Hours(1)));
  RETURN_IF_ERROR(Within(q.max_cost_term(), "queue.max_cost_term", zero));
  const onecard::v1::TimeoutConfig& t = c.timeouts();
  RETURN_IF_ERROR(Within(t.default_deadline(), "timeouts.default_deadline", zero));
  RETURN_IF_ERROR(Within(t.max_deadline(), "timeouts.max_deadline", zero));
  RETURN_IF_ERROR(Within(t.worker_connect_timeout(), "timeouts.worker_connect_timeout",
                         services::kMinConfigInterval, absl::Hours(1)));
  return Within(t.grace_period(), "timeouts.grace_period", zero);
}

// Dispatch, message sizes and the periods of the router's own loops.
absl::Status ValidateDispatch(const onecard::v1::RouterConfig& c) {
  const onecard::v1::DispatchConfig& d = c.dispatch();
  RETURN_IF_ERROR(services::CheckRange("dispatch.max_in_flight_per_worker",
                                       d.max_in_flight_per_worker(), 0, kMaxInFlightPerWorker));
  RETURN_IF_ERROR(services::CheckRange("dispatch.eject_after_failures", d.eject_after_failures(), 1,
                                       kMaxEjectAfterFailures));
  RETURN_IF_ERROR(services::CheckRange("dispatch.max_attempts", d.max_attempts(), 1, kMaxAttempts));
  RETURN_IF_ERROR(Within(d.probe_interval(), "dispatch.probe_interval",
                         services::kMinConfigInterval, absl::Hours(1)));
  RETURN_IF_ERROR(Within(d.stale_worker_grace(), "dispatch.stale_worker_grace",
                         absl::ZeroDuration(), absl::Hours(1)));
  RETURN_IF_ERROR(services::CheckRange("dispatch.affinity_prefix_tokens",
                                       d.affinity_prefix_tokens(), 1, services::kMaxTokens));
  RETURN_IF_ERROR(services::CheckRange("max_request_bytes", c.max_request_bytes(), 1,
                                       services::kMaxMessageBytes));
  RETURN_IF_ERROR(
      services::CheckRange("default_max_tokens", c.default_max_tokens(), 1, services::kMaxTokens));
  RETURN_IF_ERROR(Within(c.load_report_interval(), "load_report_interval",
                         services::kMinConfigInterval, absl::Hours(1)));
  RETURN_IF_ERROR(Within(c.reconnect().initial_backoff(), "reconnect.initial_backoff",
                         services::kMinConfigInterval, absl::Hours(1)));
  return Within(c.reconnect().max_backoff(), "reconnect.max_backoff",
                FromProtoDuration(c.reconnect().initial_backoff()), absl::Hours(1));
}

absl::Status ValidateHttp(const onecard::v1::HttpConfig& h) {
  RETURN_IF_ERROR(services::CheckRange("http.max_body_bytes", h.max_body_bytes(), 1024,
                                       services::kMaxMessageBytes));
  return services::CheckRange("http.max_connections", h.max_connections(), 1, kMaxHttpConnections);
}

absl::Status Validate(const onecard::v1::RouterConfig& c) {
  RETURN_IF_ERROR(ValidateQueue(c));
  RETURN_IF_ERROR(ValidateHttp(c.http()));
  RETURN_IF_ERROR(ValidateDispatch(c));
  if (c.model_path().empty()) {
    return absl::InvalidArgumentError("model_path: required (the tokenizer comes from it)");
  }
  if (c.tenants_size() == 0 && !c.allow_unauthenticated()) {
    return absl::InvalidArgumentError(
        "tenants: none configured, so every caller would be served without an API key; add "
        "tenants, or set allow_unauthenticated: true (--allow-unauthenticated) for local use");
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
  if (d->max_attempts() == 0) d->set_max_attempts(3);
  DefaultDuration(d->mutable_probe_interval(), absl::Seconds(5));
  DefaultDuration(d->mutable_stale_worker_grace(), absl::Seconds(10));
  if (d->affinity_prefix_tokens() == 0) d->set_affinity_prefix_tokens(64);
  if (c->max_request_bytes() == 0) c->set_max_request_bytes(4 << 20);
  DefaultDuration(c->mutable_load_report_interval(), absl::Milliseconds(250));
  DefaultDuration(c->mutable_reconnect()->mutable_initial_backoff(), absl::Milliseconds(100));
  DefaultDuration(c->mutable_reconnect()->mutable_max_backoff(), absl::Seconds(5));
  if (c->default_max_tokens() == 0) c->set_default_max_tokens(engine::kDefaultMaxTokens);
  onecard::v1::HttpConfig* h = c->mutable_http();
  DefaultString(h->mutable_listen_address(), "0.0.0.0:8000");
  if (h->max_body_bytes() == 0) h->set_max_body_bytes(32 << 20);
  if (h->max_connections() == 0) h->set_max_connections(256);
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
    spec.tenant.limits =
        TenantLimits{t.requests_per_second(), t.request_burst(), t.tokens_per_second(),
                     t.token_burst(), t.max_concurrent_streams()};
    spec.tenant.max_prompt_tokens = t.max_prompt_tokens();
    spec.tenant.max_tokens = t.max_tokens();
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
  o.stale_worker_grace = FromProtoDuration(c.dispatch().stale_worker_grace());
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
