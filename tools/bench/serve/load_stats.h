// What a serve run measured: one record per request, summarized per class
// and in total (P50/P95/P99 of time to first token, time per output token
// and end-to-end latency; outcomes by gRPC code; throughput), as JSON and
// as BenchRecords for bench/results/results.jsonl.
// Percentiles are nearest-rank: the smallest sample with at least p% of the
// samples at or below it.
// Tested by tests/tools/bench/serve/load_stats_test.cc.
#ifndef ONECARD_TOOLS_BENCH_SERVE_LOAD_STATS_H_
#define ONECARD_TOOLS_BENCH_SERVE_LOAD_STATS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "tools/bench/bench_report.h"
#include "tools/bench/serve/load_spec.h"

namespace onecard::bench::serve {

struct RequestRecord {
  std::string class_name;
  int code = 0;                        // grpc::StatusCode
  std::optional<absl::Duration> ttft;  // sent -> first token
  absl::Duration e2e;                  // sent -> status
  int64_t output_tokens = 0;
};

struct Percentiles {
  int64_t count = 0;
  double mean = 0, p50 = 0, p95 = 0, p99 = 0, max = 0;  // seconds
};
Percentiles Summarize(std::vector<double> samples);

struct ClassStats {
  std::string name;
  int64_t sent = 0;
  int64_t ok = 0;
  std::map<std::string, int64_t> errors;  // code name -> count
  int64_t output_tokens = 0;
  Percentiles ttft, tpot, e2e;  // over OK requests (TTFT: any with a token)
};

struct LoadResult {
  std::vector<ClassStats> classes;  // in mix order
  ClassStats total;
  absl::Duration wall;
  double requests_per_second = 0;       // completed OK
  double output_tokens_per_second = 0;  // over every request
};

LoadResult Summarize(const std::vector<RequestRecord>& records,
                     const std::vector<RequestClass>& mix, absl::Duration wall);
nlohmann::json ToJson(const LoadResult& result);
// Records named <class>-<metric> for `scenario` (case = the class name):
// ttft/tpot/e2e p50/p95/p99 in seconds, throughput and error counts.
std::vector<BenchRecord> ToBenchRecords(const LoadResult& result, const std::string& scenario);

}  // namespace onecard::bench::serve

#endif  // ONECARD_TOOLS_BENCH_SERVE_LOAD_STATS_H_
