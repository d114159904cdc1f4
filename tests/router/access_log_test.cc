// Tests of the router's access line (router/access_log.h): field order and
// names, the "-" of missing values, quoting, milliseconds with one decimal.
#include "router/access_log.h"

#include "gtest/gtest.h"

namespace onecard::router {
namespace {

TEST(AccessLogTest, FormatsEveryFieldInOrder) {
  const AccessRecord r{.request_id = "rtr-7",
                       .tenant = "ops",
                       .priority = "interactive",
                       .prompt_tokens = 12,
                       .completion_tokens = 16,
                       .time_to_first_token = absl::Microseconds(41240),
                       .total_time = absl::Milliseconds(230),
                       .code = absl::StatusCode::kOk};
  EXPECT_EQ(FormatAccessRecord(r),
            "request_id=rtr-7 tenant=ops priority=interactive prompt_tokens=12 "
            "completion_tokens=16 ttft_ms=41.2 total_ms=230.0 status=OK");
}

TEST(AccessLogTest, MissingValuesAreDashesAndOddOnesQuoted) {
  const AccessRecord r{.request_id = "my id=\"x\"",
                       .total_time = absl::Milliseconds(3),
                       .code = absl::StatusCode::kUnauthenticated};
  EXPECT_EQ(FormatAccessRecord(r),
            "request_id=\"my id=\\\"x\\\"\" tenant=- priority=- prompt_tokens=0 "
            "completion_tokens=0 ttft_ms=- total_ms=3.0 status=UNAUTHENTICATED");
}

}  // namespace
}  // namespace onecard::router
