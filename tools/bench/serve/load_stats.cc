// Serve-run statistics (see load_stats.h).
// Tested by tests/tools/bench/serve/load_stats_test.cc.
#include "tools/bench/serve/load_stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "services/common/status.h"

namespace onecard::bench::serve {

Percentiles Summarize(std::vector<double> samples) {
  Percentiles p;
  p.count = static_cast<int64_t>(samples.size());
  if (samples.empty()) return p;
  std::sort(samples.begin(), samples.end());
  auto rank = [&](double pct) {
    size_t r = static_cast<size_t>(std::ceil(pct / 100.0 * static_cast<double>(samples.size())));
    return samples[std::clamp<size_t>(r, 1, samples.size()) - 1];
  };
  p.mean = std::accumulate(samples.begin(), samples.end(), 0.0) / samples.size();
  p.p50 = rank(50);
  p.p95 = rank(95);
  p.p99 = rank(99);
  p.max = samples.back();
  return p;
}

namespace {

ClassStats Collect(const std::string& name, const std::vector<const RequestRecord*>& records) {
  ClassStats s;
  s.name = name;
  std::vector<double> ttft, tpot, e2e;
  for (const RequestRecord* r : records) {
    ++s.sent;
    s.output_tokens += r->output_tokens;
    if (r->code != 0) {
      ++s.errors[services::GrpcCodeName(r->code)];
      continue;
    }
    ++s.ok;
    e2e.push_back(absl::ToDoubleSeconds(r->e2e));
    if (r->ttft.has_value()) {
      ttft.push_back(absl::ToDoubleSeconds(*r->ttft));
      if (r->output_tokens >= 2) {
        tpot.push_back(absl::ToDoubleSeconds(r->e2e - *r->ttft) /
                       static_cast<double>(r->output_tokens - 1));
      }
    }
  }
  s.ttft = Summarize(ttft);
  s.tpot = Summarize(tpot);
  s.e2e = Summarize(e2e);
  return s;
}

nlohmann::json PercentilesJson(const Percentiles& p) {
  return {{"count", p.count}, {"mean", p.mean}, {"p50", p.p50},
          {"p95", p.p95},     {"p99", p.p99},   {"max", p.max}};
}

nlohmann::json ClassJson(const ClassStats& s) {
  return {{"name", s.name},
          {"sent", s.sent},
          {"ok", s.ok},
          {"errors", s.errors},
          {"output_tokens", s.output_tokens},
          {"ttft_s", PercentilesJson(s.ttft)},
          {"tpot_s", PercentilesJson(s.tpot)},
          {"e2e_s", PercentilesJson(s.e2e)}};
}

}  // namespace

LoadResult Summarize(const std::vector<RequestRecord>& records,
                     const std::vector<RequestClass>& mix, absl::Duration wall) {
  LoadResult result;
  result.wall = wall;
  std::vector<const RequestRecord*> all;
  for (const RequestRecord& r : records) all.push_back(&r);
  for (const RequestClass& c : mix) {
    std::vector<const RequestRecord*> mine;
    for (const RequestRecord& r : records) {
      if (r.class_name == c.name) mine.push_back(&r);
    }
    result.classes.push_back(Collect(c.name, mine));
  }
  result.total = Collect("total", all);
  const double seconds = absl::ToDoubleSeconds(wall);
  if (seconds > 0) {
    result.requests_per_second = static_cast<double>(result.total.ok) / seconds;
    result.output_tokens_per_second = static_cast<double>(result.total.output_tokens) / seconds;
  }
  return result;
}

nlohmann::json ToJson(const LoadResult& result) {
  nlohmann::json classes = nlohmann::json::array();
  for (const ClassStats& c : result.classes) classes.push_back(ClassJson(c));
  return {{"wall_s", absl::ToDoubleSeconds(result.wall)},
          {"requests_per_second", result.requests_per_second},
          {"output_tokens_per_second", result.output_tokens_per_second},
          {"classes", classes},
          {"total", ClassJson(result.total)}};
}

std::vector<BenchRecord> ToBenchRecords(const LoadResult& result, const std::string& scenario) {
  std::vector<BenchRecord> out;
  auto add = [&](const std::string& case_name, const std::string& metric, double value,
                 const std::string& unit) {
    out.push_back(BenchRecord{scenario, case_name, metric, value, unit, std::nullopt});
  };
  std::vector<ClassStats> all = result.classes;
  all.push_back(result.total);
  for (const ClassStats& c : all) {
    for (auto [name, p] :
         {std::pair{"ttft", c.ttft}, std::pair{"tpot", c.tpot}, std::pair{"e2e", c.e2e}}) {
      if (p.count == 0) continue;
      add(c.name, std::string(name) + "_p50", p.p50, "s");
      add(c.name, std::string(name) + "_p95", p.p95, "s");
      add(c.name, std::string(name) + "_p99", p.p99, "s");
    }
    add(c.name, "requests_ok", static_cast<double>(c.ok), "requests");
    add(c.name, "requests_failed", static_cast<double>(c.sent - c.ok), "requests");
  }
  add("total", "output_tokens_per_second", result.output_tokens_per_second, "tok/s");
  add("total", "requests_per_second", result.requests_per_second, "req/s");
  return out;
}

}  // namespace onecard::bench::serve
