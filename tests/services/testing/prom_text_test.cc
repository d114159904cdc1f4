// Tests of the Prometheus text parser used by the service tests: it must
// accept what the format allows and reject each kind of malformed input,
// otherwise "the /metrics output parses" would prove nothing. Expected
// values are written from the format's specification.
#include "tests/services/testing/prom_text.h"

#include <cmath>

#include "gtest/gtest.h"

namespace onecard::testing {
namespace {

constexpr char kGood[] = R"(# HELP requests_total Requests by outcome.
# TYPE requests_total counter
requests_total{outcome="stop"} 3
requests_total{outcome="len\"gth"} 4 1700000000000
# TYPE usage_ratio gauge
usage_ratio 0.25
# TYPE latency_seconds histogram
latency_seconds_bucket{le="0.1"} 1
latency_seconds_bucket{le="1"} 2
latency_seconds_bucket{le="+Inf"} 3
latency_seconds_sum 4.5
latency_seconds_count 3
)";

TEST(PromTextTest, ParsesCountersGaugesHistograms) {
  absl::StatusOr<PromText> parsed = ParsePromText(kGood);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->types.at("requests_total"), "counter");
  EXPECT_EQ(parsed->help.at("requests_total"), "Requests by outcome.");
  EXPECT_EQ(parsed->Value("requests_total", {{"outcome", "stop"}}), 3);
  EXPECT_EQ(parsed->Value("requests_total", {{"outcome", "len\"gth"}}), 4);
  EXPECT_EQ(parsed->Value("requests_total"), std::nullopt) << "two samples match";
  EXPECT_EQ(parsed->Sum("requests_total"), 7);
  EXPECT_EQ(parsed->Value("usage_ratio"), 0.25);
  EXPECT_EQ(parsed->Value("latency_seconds_count"), 3);
}

TEST(PromTextTest, RejectsMalformedInput) {
  const char* bad[] = {
      "x 1\n",                                    // no TYPE
      "# TYPE x gauge\nx{a=\"1\" 1\n",            // unclosed labels
      "# TYPE x gauge\nx{a=1} 1\n",               // unquoted label value
      "# TYPE x gauge\nx one\n",                  // bad value
      "# TYPE x gauge\nx\n",                      // no value
      "# TYPE x gauge\n# TYPE x counter\nx 1\n",  // TYPE twice
      "# TYPE x sometype\nx 1\n",                 // unknown type
      "# TYPE x gauge\nx{a=\"1\",a=\"2\"} 1\n",   // duplicate label
      "# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_count 1\n",
      "# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_count 1\n",  // no +Inf
      "# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_count 3\n",
  };
  for (const char* text : bad) {
    EXPECT_FALSE(ParsePromText(text).ok()) << text;
  }
}

}  // namespace
}  // namespace onecard::testing
