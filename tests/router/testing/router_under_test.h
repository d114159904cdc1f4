// What the in-process router tests share: a RouterConfig serving SmolLM2's
// tokenizer as "smol" on 127.0.0.1:0 (gRPC, HTTP API, /metrics) in front of
// FakeWorkers, and a /metrics scrape parsed with the strict text parser.
// Used by tests/router/router_service_test.cc and http_server_test.cc.
#ifndef ONECARD_TESTS_ROUTER_TESTING_ROUTER_UNDER_TEST_H_
#define ONECARD_TESTS_ROUTER_TESTING_ROUTER_UNDER_TEST_H_

#include <string>
#include <vector>

#include "onecard/v1/config.pb.h"
#include "tests/router/testing/fake_worker.h"
#include "tests/services/testing/prom_text.h"

namespace onecard::router::testing {

// No tenants: the caller adds them (or allow_unauthenticated).
onecard::v1::RouterConfig ConfigForFakeWorkers(const std::vector<FakeWorker*>& workers,
                                               int32_t max_in_flight_per_worker);

// GET /metrics of `metrics_address`, parsed; fails the test on any error.
onecard::testing::PromText ScrapeMetrics(const std::string& metrics_address);

}  // namespace onecard::router::testing

#endif  // ONECARD_TESTS_ROUTER_TESTING_ROUTER_UNDER_TEST_H_
