// onecard-fault: runs the fault suite's scenarios (fault_scenarios.h)
// against real processes on loopback and prints their table (Markdown);
// exits 1 when a scenario fails. scripts/fault.sh runs every scenario.
//   onecard-fault [--scenarios=worker-sigkill,disconnect] [--work_dir=DIR]
//                 [--clients=1000] [--out=FILE]
//   onecard-fault --soak=30m [--samples=FILE.csv] [--out=FILE]   (soak.h)
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "tools/fault/fault_scenarios.h"
#include "tools/fault/soak.h"

ABSL_FLAG(std::string, scenarios, "all", "Comma-separated scenario names, or all");
ABSL_FLAG(std::string, work_dir, "/tmp/onecard-fault", "Configs and logs, a folder a scenario");
ABSL_FLAG(std::string, model, "models/SmolLM2-135M-Instruct.Q4_1.gguf", "The workers' model");
ABSL_FLAG(int32_t, clients, 1000, "Clients of the disconnect scenario");
ABSL_FLAG(std::string, out, "", "Also write the table to this file");
ABSL_FLAG(absl::Duration, soak, absl::ZeroDuration(), "Run the soak (soak.h) this long instead");
ABSL_FLAG(std::string, samples, "", "Soak: every sample as CSV to this file");

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  using onecard::bench::serve::FindBinary;
  onecard::fault::ScenarioOptions options;
  options.cluster.work_dir = absl::GetFlag(FLAGS_work_dir);
  options.cluster.model_path = absl::GetFlag(FLAGS_model);
  options.cluster.metrics_bin = FindBinary("services/metrics/onecard-metrics");
  options.cluster.worker_bin = FindBinary("services/worker/onecard-worker");
  options.cluster.router_bin = FindBinary("router/onecard-router");
  options.disconnect_clients = absl::GetFlag(FLAGS_clients);
  if (absl::GetFlag(FLAGS_soak) > absl::ZeroDuration()) {
    onecard::fault::SoakOptions soak;
    soak.cluster = options.cluster;
    soak.cluster.work_dir += "/soak";
    soak.duration = absl::GetFlag(FLAGS_soak);
    soak.warmup = std::min(soak.warmup, soak.duration / 5);
    soak.samples_csv = absl::GetFlag(FLAGS_samples);
    absl::StatusOr<onecard::fault::SoakReport> report = onecard::fault::RunSoak(soak);
    if (!report.ok()) {
      std::cerr << "soak: " << report.status() << "\n";
      return 1;
    }
    std::cout << report->Table();
    if (!absl::GetFlag(FLAGS_out).empty())
      std::ofstream(absl::GetFlag(FLAGS_out)) << report->Table();
    return 0;
  }
  std::vector<std::string> names = onecard::fault::ScenarioNames();
  if (absl::GetFlag(FLAGS_scenarios) != "all") {
    names = absl::StrSplit(absl::GetFlag(FLAGS_scenarios), ',', absl::SkipEmpty());
  }
  std::vector<onecard::fault::ScenarioResult> results;
  bool passed = true;
  for (const std::string& name : names) {
    std::fprintf(stderr, "fault: %s ...\n", name.c_str());
    results.push_back(onecard::fault::RunScenario(name, options));
    const onecard::fault::ScenarioResult& r = results.back();
    std::fprintf(stderr, "fault: %s %s %s\n", name.c_str(), r.passed() ? "pass" : "FAIL",
                 r.Why().c_str());
    passed = passed && r.passed();
  }
  const std::string table = onecard::fault::ResultsTable(results);
  std::cout << table;
  if (!absl::GetFlag(FLAGS_out).empty()) std::ofstream(absl::GetFlag(FLAGS_out)) << table;
  return passed ? 0 : 1;
}
