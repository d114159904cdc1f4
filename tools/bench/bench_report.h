// BenchReporter: collects a run's measurements, prints them as a table and
// appends each as one JSON line to the results file (../shared/benchmarks.md
// "Reporting"): {"scenario","case","metric","value","unit","floor",
// "pct_of_floor","commit","device","date"}; floor and pct_of_floor are null
// where no floor applies. Tested by tests/tools/bench/bench_report_test.cc.
#ifndef ONECARD_TOOLS_BENCH_BENCH_REPORT_H_
#define ONECARD_TOOLS_BENCH_BENCH_REPORT_H_

#include <filesystem>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace onecard::bench {

struct BenchRecord {
  std::string scenario;   // "cpu-decode"
  std::string case_name;  // "batch1"
  std::string metric;     // "decode_tokens_per_second"
  double value = 0;
  std::string unit;             // "tok/s"
  std::optional<double> floor;  // same unit; pct_of_floor = 100 * value / floor
};

// Where and when the run happened.
struct RunInfo {
  std::string commit;  // RunCommit's
  std::string device;  // "AMD EPYC (2 cores)"
  std::string date;    // ISO 8601 UTC
};

// The commit a run records: $ONECARD_COMMIT when set (scripts/device/*.sh),
// else the first word of bundle_commit_file where it can be read (a packed
// bundle's COMMIT beside its bin/, scripts/device/pack.sh: the GPU machine's
// copy of the tree may hold another commit's .git or none), else `git
// rev-parse --short HEAD`, else "unknown".
std::string RunCommit(const std::filesystem::path& bundle_commit_file);

// The current machine's RunInfo: the CPU model of /proc/cpuinfo and the core
// count, RunCommit of the COMMIT file beside the executable's folder, now.
RunInfo CurrentRunInfo();

// One results line (no trailing newline).
std::string RecordJson(const BenchRecord& record, const RunInfo& info);

// Where onecard-bench and onecard-bench-cuda append their records unless
// --results says otherwise: an ignored path (.gitignore), so a user's run
// leaves the repository clean. Committed figures go to
// bench/results/results.jsonl by passing it explicitly (bench/README.md).
inline constexpr char kDefaultResultsPath[] = "bench/results/local/results.jsonl";

class BenchReporter {
 public:
  explicit BenchReporter(RunInfo info) : info_(std::move(info)) {}
  void Add(BenchRecord record) { records_.push_back(std::move(record)); }
  const std::vector<BenchRecord>& records() const { return records_; }
  // A table of every record, with the run's device and commit.
  void PrintTable(std::ostream& out) const;
  // Appends every record to path (created with its folders when missing).
  absl::Status AppendJsonLines(const std::string& path) const;

 private:
  RunInfo info_;
  std::vector<BenchRecord> records_;
};

}  // namespace onecard::bench

#endif  // ONECARD_TOOLS_BENCH_BENCH_REPORT_H_
