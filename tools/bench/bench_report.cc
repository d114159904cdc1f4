// BenchReporter and the run's environment (see bench_report.h).
// Tested by tests/tools/bench/bench_report_test.cc.
#include "tools/bench/bench_report.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "nlohmann/json.hpp"

namespace onecard::bench {
namespace {

std::string CpuModelName() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon != std::string::npos) {
      return std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
    }
  }
  return "unknown CPU";
}

std::string GitShortCommit() {
  FILE* pipe = popen("git rev-parse --short HEAD 2>/dev/null", "r");
  if (pipe == nullptr) return "unknown";
  char buffer[64] = {0};
  const bool got = fgets(buffer, sizeof(buffer), pipe) != nullptr;
  pclose(pipe);
  std::string commit = got ? std::string(absl::StripAsciiWhitespace(buffer)) : "";
  return commit.empty() ? "unknown" : commit;
}

}  // namespace

std::string RunCommit(const std::filesystem::path& bundle_commit_file) {
  if (const char* env = std::getenv("ONECARD_COMMIT"); env != nullptr && *env != '\0') {
    return env;
  }
  std::ifstream bundle(bundle_commit_file);
  std::string commit;
  if (bundle >> commit && !commit.empty()) return commit;
  return GitShortCommit();
}

RunInfo CurrentRunInfo() {
  std::error_code error;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", error);
  return {
      .commit = RunCommit(error ? std::filesystem::path() : exe.parent_path() / ".." / "COMMIT"),
      .device = absl::StrCat(CpuModelName(), " (", std::thread::hardware_concurrency(), " cores)"),
      .date = absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::Now(), absl::UTCTimeZone())};
}

std::string RecordJson(const BenchRecord& record, const RunInfo& info) {
  nlohmann::ordered_json j;
  j["scenario"] = record.scenario;
  j["case"] = record.case_name;
  j["metric"] = record.metric;
  j["value"] = record.value;
  j["unit"] = record.unit;
  if (record.floor.has_value() && *record.floor > 0) {
    j["floor"] = *record.floor;
    j["pct_of_floor"] = 100.0 * record.value / *record.floor;
  } else {
    j["floor"] = nullptr;
    j["pct_of_floor"] = nullptr;
  }
  j["commit"] = info.commit;
  j["device"] = info.device;
  j["date"] = info.date;
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void BenchReporter::PrintTable(std::ostream& out) const {
  out << absl::StrFormat("%-14s %-10s %-28s %12s %-7s %s\n", "scenario", "case", "metric", "value",
                         "unit", "% of floor");
  for (const BenchRecord& r : records_) {
    const std::string pct = r.floor.has_value() && *r.floor > 0
                                ? absl::StrFormat("%.1f", 100.0 * r.value / *r.floor)
                                : "-";
    out << absl::StrFormat("%-14s %-10s %-28s %12.2f %-7s %s\n", r.scenario, r.case_name, r.metric,
                           r.value, r.unit, pct);
  }
  out << "device: " << info_.device << ", commit " << info_.commit << ", " << info_.date << "\n";
}

absl::Status BenchReporter::AppendJsonLines(const std::string& path) const {
  std::error_code ec;
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  std::ofstream file(path, std::ios::app);
  if (!file) return absl::UnavailableError(absl::StrCat(path, ": cannot open for appending"));
  for (const BenchRecord& r : records_) file << RecordJson(r, info_) << "\n";
  file.flush();
  if (!file) return absl::DataLossError(absl::StrCat(path, ": write failed"));
  return absl::OkStatus();
}

}  // namespace onecard::bench
