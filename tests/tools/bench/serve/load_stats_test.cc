// Tests tools/bench/serve/load_stats.h: nearest-rank percentiles on known
// samples, per-class aggregation (errors by code, TPOT from TTFT and e2e),
// throughput, the JSON and the bench records.
#include "tools/bench/serve/load_stats.h"

#include "gtest/gtest.h"

namespace onecard::bench::serve {
namespace {

TEST(LoadStatsTest, NearestRankPercentiles) {
  std::vector<double> samples;
  for (int i = 100; i >= 1; --i) samples.push_back(i);  // unsorted on purpose
  Percentiles p = Summarize(samples);
  EXPECT_EQ(p.count, 100);
  EXPECT_DOUBLE_EQ(p.p50, 50);
  EXPECT_DOUBLE_EQ(p.p95, 95);
  EXPECT_DOUBLE_EQ(p.p99, 99);
  EXPECT_DOUBLE_EQ(p.max, 100);
  EXPECT_DOUBLE_EQ(p.mean, 50.5);
  p = Summarize({3, 1, 2});
  EXPECT_DOUBLE_EQ(p.p50, 2);  // rank ceil(1.5) = 2
  EXPECT_DOUBLE_EQ(p.p95, 3);
  EXPECT_EQ(Summarize({}).count, 0);
}

RequestRecord Record(const std::string& cls, int code, double ttft, double e2e, int64_t tokens) {
  RequestRecord r;
  r.class_name = cls;
  r.code = code;
  if (ttft >= 0) r.ttft = absl::Seconds(ttft);
  r.e2e = absl::Seconds(e2e);
  r.output_tokens = tokens;
  return r;
}

TEST(LoadStatsTest, AggregatesPerClass) {
  std::vector<RequestClass> mix = {RequestClass{"short"}, RequestClass{"long"}};
  std::vector<RequestRecord> records = {
      Record("short", 0, 0.1, 0.5, 5),   // TPOT (0.5 - 0.1) / 4 = 0.1
      Record("short", 0, 0.3, 0.3, 1),   // one token: no TPOT
      Record("short", 14, 0.2, 1.0, 3),  // UNAVAILABLE after 3 tokens
      Record("long", 8, -1, 0.01, 0),    // RESOURCE_EXHAUSTED
  };
  LoadResult r = Summarize(records, mix, absl::Seconds(2));
  ASSERT_EQ(r.classes.size(), 2u);
  const ClassStats& s = r.classes[0];
  EXPECT_EQ(s.sent, 3);
  EXPECT_EQ(s.ok, 2);
  EXPECT_EQ(s.errors.at("UNAVAILABLE"), 1);
  EXPECT_EQ(s.output_tokens, 9);
  EXPECT_EQ(s.ttft.count, 2);
  EXPECT_DOUBLE_EQ(s.ttft.p50, 0.1);
  EXPECT_EQ(s.tpot.count, 1);
  EXPECT_DOUBLE_EQ(s.tpot.p50, 0.1);
  EXPECT_EQ(r.classes[1].errors.at("RESOURCE_EXHAUSTED"), 1);
  EXPECT_EQ(r.total.sent, 4);
  EXPECT_DOUBLE_EQ(r.requests_per_second, 1.0);
  EXPECT_DOUBLE_EQ(r.output_tokens_per_second, 4.5);
  nlohmann::json j = ToJson(r);
  EXPECT_EQ(j["classes"][0]["name"], "short");
  EXPECT_DOUBLE_EQ(j["classes"][0]["ttft_s"]["p50"].get<double>(), 0.1);
  EXPECT_EQ(j["total"]["errors"]["UNAVAILABLE"], 1);
  std::vector<BenchRecord> recs = ToBenchRecords(r, "serve");
  bool found = false;
  for (const BenchRecord& b : recs) {
    if (b.case_name == "short" && b.metric == "ttft_p95") {
      found = true;
      EXPECT_DOUBLE_EQ(b.value, 0.3);
      EXPECT_EQ(b.scenario, "serve");
      EXPECT_FALSE(b.floor.has_value());
    }
  }
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace onecard::bench::serve
