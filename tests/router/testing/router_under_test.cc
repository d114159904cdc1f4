// The in-process router tests' shared setup (see router_under_test.h).
#include "tests/router/testing/router_under_test.h"

#include "gtest/gtest.h"
#include "tests/services/testing/http_get.h"

namespace onecard::router::testing {

onecard::v1::RouterConfig ConfigForFakeWorkers(const std::vector<FakeWorker*>& workers,
                                               int32_t max_in_flight_per_worker) {
  onecard::v1::RouterConfig c;
  c.set_model_path("models/SmolLM2-135M-Instruct.Q4_1.gguf");
  c.set_model_name("smol");
  c.set_listen_address("127.0.0.1:0");
  c.set_metrics_listen_address("127.0.0.1:0");
  c.mutable_http()->set_listen_address("127.0.0.1:0");
  for (FakeWorker* w : workers) c.mutable_dispatch()->add_static_workers(w->address());
  c.mutable_dispatch()->set_max_in_flight_per_worker(max_in_flight_per_worker);
  return c;
}

onecard::testing::PromText ScrapeMetrics(const std::string& metrics_address) {
  absl::StatusOr<onecard::testing::HttpResponse> r =
      onecard::testing::HttpGet(metrics_address, "/metrics");
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return {};
  absl::StatusOr<onecard::testing::PromText> text = onecard::testing::ParsePromText(r->body);
  EXPECT_TRUE(text.ok()) << text.status();
  return text.ok() ? *text : onecard::testing::PromText();
}

}  // namespace onecard::router::testing
