// A tiny blocking HTTP/1.0 GET over a loopback TCP socket, for tests that
// scrape /metrics (no HTTP client library is needed). Bounded by a receive
// timeout, so a silent server fails the test instead of hanging it.
// Tested through tests/services/common/metrics_server_test.cc.
#ifndef ONECARD_TESTS_SERVICES_TESTING_HTTP_GET_H_
#define ONECARD_TESTS_SERVICES_TESTING_HTTP_GET_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace onecard::testing {

struct HttpResponse {
  int status_code = 0;
  std::string content_type;
  std::string body;
};

// GET http://<host:port><path>. The host must be a numeric IPv4 address.
absl::StatusOr<HttpResponse> HttpGet(const std::string& host_port, const std::string& path,
                                     absl::Duration timeout = absl::Seconds(10));

}  // namespace onecard::testing

#endif  // ONECARD_TESTS_SERVICES_TESTING_HTTP_GET_H_
