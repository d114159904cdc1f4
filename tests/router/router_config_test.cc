// Tests router/router_config.h: defaults of config.proto, the queue order
// derived from aging_step, tenants, and errors naming the field.
#include "router/router_config.h"

#include <limits>

#include "gtest/gtest.h"
#include "router/api_keys.h"
#include "services/common/config.h"
#include "services/common/proto_time.h"

namespace onecard::router {
namespace {

onecard::v1::RouterConfig Minimal() {
  onecard::v1::RouterConfig c;
  c.set_model_path("models/m.gguf");
  c.set_allow_unauthenticated(true);
  return c;
}

TEST(RouterConfigTest, Defaults) {
  absl::StatusOr<RouterOptions> o = ResolveRouterOptions(Minimal());
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->config.listen_address(), "0.0.0.0:50050");
  EXPECT_EQ(o->config.metrics_listen_address(), "0.0.0.0:9401");
  EXPECT_EQ(o->queue.max_depth, 1024);
  EXPECT_EQ(o->queue.max_depth_per_class[2], 1024);
  EXPECT_EQ(o->queue.queue_timeout, absl::Seconds(30));
  EXPECT_EQ(o->queue.class_offset[1], absl::Seconds(5));
  EXPECT_EQ(o->queue.class_offset[2], absl::Seconds(10));
  EXPECT_EQ(o->queue.cost_per_token, absl::Milliseconds(1));
  EXPECT_EQ(o->queue.max_cost_term, absl::Milliseconds(2500));
  EXPECT_FALSE(o->queue.fifo);
  EXPECT_EQ(o->pool.eject_after_failures, 3);
  EXPECT_EQ(o->config.dispatch().max_attempts(), 3);
  EXPECT_EQ(o->pool.eject_base, absl::Seconds(5));
  EXPECT_EQ(o->default_deadline, absl::Minutes(10));
  EXPECT_EQ(o->max_deadline, absl::Hours(1));
  EXPECT_EQ(o->grace_period, absl::Seconds(30));
  EXPECT_EQ(o->config.default_max_tokens(), 256);
  EXPECT_EQ(o->config.http().listen_address(), "0.0.0.0:8000");
  EXPECT_EQ(o->config.http().max_body_bytes(), 32 << 20);
  EXPECT_EQ(o->config.http().max_connections(), 256);
  EXPECT_EQ(o->config.dispatch().affinity_prefix_tokens(), 64);
  EXPECT_EQ(o->stale_worker_grace, absl::Seconds(10));
  EXPECT_TRUE(o->tenants.empty());
}

TEST(RouterConfigTest, FromYamlWithTenants) {
  onecard::v1::RouterConfig c;
  std::string yaml =
      "model_path: models/m.gguf\n"
      "queue: {aging_step: 2s, fifo: true, max_depth: 10}\n"
      "tenants:\n"
      "  - name: acme\n"
      "    api_key_sha256: [" +
      Sha256Hex("k") +
      "]\n"
      "    requests_per_second: 5\n"
      "    tokens_per_second: 1000\n"
      "    max_priority: interactive\n";
  ASSERT_TRUE(services::ParseConfigText(yaml, "router.yaml", &c).ok());
  absl::StatusOr<RouterOptions> o = ResolveRouterOptions(c);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_TRUE(o->queue.fifo);
  EXPECT_EQ(o->queue.max_depth, 10);
  EXPECT_EQ(o->queue.class_offset[2], absl::Seconds(4));
  EXPECT_EQ(o->queue.max_cost_term, absl::Seconds(1));
  ASSERT_EQ(o->tenants.size(), 1u);
  EXPECT_EQ(o->tenants[0].tenant.name, "acme");
  EXPECT_EQ(o->tenants[0].tenant.max_priority, PriorityClass::kInteractive);
  EXPECT_DOUBLE_EQ(o->tenants[0].tenant.limits.requests_per_second, 5);
  ApplyTokenBurstDefaults(8192, &o->tenants);
  EXPECT_DOUBLE_EQ(o->tenants[0].tenant.limits.token_burst, 8192);  // max(context, tps)
}

TEST(RouterConfigTest, ErrorsNameTheField) {
  struct Case {
    std::function<void(onecard::v1::RouterConfig&)> set;
    std::string field;
  };
  std::vector<Case> cases = {
      {[](auto& c) { c.clear_model_path(); }, "model_path"},
      {[](auto& c) { c.mutable_queue()->set_max_depth(-1); }, "queue.max_depth"},
      {[](auto& c) {
         services::ToProtoDuration(absl::Seconds(-1), c.mutable_queue()->mutable_aging_step());
       },
       "queue.aging_step"},
      {[](auto& c) { c.mutable_dispatch()->set_max_in_flight_per_worker(-2); },
       "dispatch.max_in_flight_per_worker"},
      {[](auto& c) { c.add_tenants()->set_tokens_per_second(-5); }, "tenants[0].tokens_per_second"},
      {[](auto& c) { c.set_default_max_tokens(-1); }, "default_max_tokens"},
      // Issue 22: values that would exhaust memory or spin a core.
      {[](auto& c) { c.mutable_queue()->set_max_depth(1 << 30); }, "queue.max_depth"},
      {[](auto& c) { c.set_max_request_bytes(2147483647); }, "max_request_bytes"},
      {[](auto& c) { c.set_default_max_tokens(1 << 30); }, "default_max_tokens"},
      {[](auto& c) { c.mutable_load_report_interval()->set_nanos(1); }, "load_report_interval"},
      {[](auto& c) { c.mutable_reconnect()->mutable_initial_backoff()->set_nanos(1); },
       "reconnect.initial_backoff"},
      {[](auto& c) { c.mutable_dispatch()->mutable_probe_interval()->set_nanos(1); },
       "dispatch.probe_interval"},
      {[](auto& c) { c.mutable_timeouts()->mutable_worker_connect_timeout()->set_nanos(1); },
       "timeouts.worker_connect_timeout"},
      {[](auto& c) { c.mutable_dispatch()->set_max_in_flight_per_worker(1 << 30); },
       "dispatch.max_in_flight_per_worker"},
      {[](auto& c) { c.mutable_dispatch()->set_max_attempts(17); }, "dispatch.max_attempts"},
      {[](auto& c) { c.mutable_dispatch()->set_max_attempts(-1); }, "dispatch.max_attempts"},
      {[](auto& c) { c.mutable_dispatch()->mutable_stale_worker_grace()->set_seconds(7200); },
       "dispatch.stale_worker_grace"},
      {[](auto& c) {
         c.add_tenants()->set_requests_per_second(std::numeric_limits<double>::infinity());
       },
       "tenants[0].requests_per_second"},
  };
  for (const Case& k : cases) {
    onecard::v1::RouterConfig c = Minimal();
    k.set(c);
    absl::Status s = ResolveRouterOptions(c).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << k.field;
    EXPECT_EQ(s.message().substr(0, k.field.size() + 1), k.field + ":") << s;
  }
}

// Issue 22: a router with no tenants served everyone without a warning; it
// now needs allow_unauthenticated: true to start that way.
TEST(RouterConfigTest, NoTenantsNeedsAllowUnauthenticated) {
  onecard::v1::RouterConfig c = Minimal();
  c.set_allow_unauthenticated(false);
  absl::Status s = ResolveRouterOptions(c).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message().rfind("tenants: none configured", 0), 0u) << s;
  EXPECT_NE(s.message().find("allow_unauthenticated: true"), std::string::npos) << s;
  c.add_tenants()->set_name("acme");
  EXPECT_TRUE(ResolveRouterOptions(c).ok());
  onecard::v1::RouterConfig parsed;
  ASSERT_TRUE(services::ParseConfigText("model_path: m.gguf\nallow_unauthenticated: true\n",
                                        "r.yaml", &parsed)
                  .ok());
  EXPECT_TRUE(ResolveRouterOptions(parsed).ok());
}

TEST(RouterConfigTest, BoundsNameTheRange) {
  onecard::v1::RouterConfig c = Minimal();
  c.mutable_load_report_interval()->set_nanos(1);
  EXPECT_EQ(ResolveRouterOptions(c).status().message(),
            "load_report_interval: 1ns is outside [10ms, 1h]");
  c = Minimal();
  c.mutable_http()->set_max_body_bytes(100);
  EXPECT_EQ(ResolveRouterOptions(c).status().message(),
            "http.max_body_bytes: 100 is outside [1024, 268435456]");
  c = Minimal();
  c.mutable_http()->set_max_connections(20000);
  EXPECT_EQ(ResolveRouterOptions(c).status().message(),
            "http.max_connections: 20000 is outside [1, 10000]");
}

TEST(RouterConfigTest, TenantStreamAndTokenLimits) {
  onecard::v1::RouterConfig c = Minimal();
  onecard::v1::TenantConfig* t = c.add_tenants();
  t->set_name("acme");
  t->add_api_key_sha256(std::string(64, 'a'));
  t->set_max_concurrent_streams(8);
  t->set_max_prompt_tokens(1000);
  t->set_max_tokens(64);
  absl::StatusOr<RouterOptions> o = ResolveRouterOptions(c);
  ASSERT_TRUE(o.ok()) << o.status();
  ASSERT_EQ(o->tenants.size(), 1u);
  EXPECT_EQ(o->tenants[0].tenant.limits.max_concurrent_streams, 8);
  EXPECT_EQ(o->tenants[0].tenant.max_prompt_tokens, 1000);
  EXPECT_EQ(o->tenants[0].tenant.max_tokens, 64);
  for (auto [set, field] :
       {std::pair<void (*)(onecard::v1::TenantConfig*), const char*>{
            [](onecard::v1::TenantConfig* x) { x->set_max_concurrent_streams(-1); },
            "tenants[0].max_concurrent_streams"},
        {[](onecard::v1::TenantConfig* x) { x->set_max_concurrent_streams(1000001); },
         "tenants[0].max_concurrent_streams"},
        {[](onecard::v1::TenantConfig* x) { x->set_max_prompt_tokens(1 << 21); },
         "tenants[0].max_prompt_tokens"},
        {[](onecard::v1::TenantConfig* x) { x->set_max_tokens(-5); }, "tenants[0].max_tokens"}}) {
    onecard::v1::RouterConfig bad = c;
    set(bad.mutable_tenants(0));
    absl::StatusOr<RouterOptions> r = ResolveRouterOptions(bad);
    ASSERT_FALSE(r.ok()) << field;
    EXPECT_EQ(r.status().message().substr(0, std::string(field).size() + 1),
              std::string(field) + ":")
        << r.status();
  }
}

}  // namespace
}  // namespace onecard::router
