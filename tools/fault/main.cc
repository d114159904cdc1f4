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
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "services/common/command_line.h"
#include "tools/fault/fault_scenarios.h"
#include "tools/fault/soak.h"

ABSL_FLAG(std::string, scenarios, "all", "Comma-separated scenario names, or all");
ABSL_FLAG(std::string, work_dir, "/tmp/onecard-fault", "Configs and logs, a folder a scenario");
ABSL_FLAG(std::string, model, "models/SmolLM2-135M-Instruct.Q4_1.gguf", "The workers' model");
ABSL_FLAG(int32_t, clients, 1000, "Clients of the disconnect scenario");
ABSL_FLAG(std::string, out, "", "Also write the table to this file");
ABSL_FLAG(absl::Duration, soak, absl::ZeroDuration(), "Run the soak (soak.h) this long instead");
ABSL_FLAG(std::string, samples, "", "Soak: every sample as CSV to this file");

namespace {

onecard::services::CommandLineSpec CommandLine() {
  return {.program = "onecard-fault",
          .usage = {"[--scenarios=worker-sigkill,disconnect] [--work-dir=DIR] [--out=FILE]",
                    "--soak=30m [--samples=FILE.csv] [--out=FILE]"},
          .description =
              "Starts a local cluster (metrics service, two CPU workers, a router) for each\n"
              "fault scenario, injects the fault under load and checks that every request\n"
              "ended in one stated state (lost = 0), no stream repeated a token and every\n"
              "gauge went back to zero; prints the table (Markdown) and exits 1 when a\n"
              "scenario fails. Scenarios: " +
              absl::StrJoin(onecard::fault::ScenarioNames(), ", ") +
              ".\nWith --soak: mixed load for that long, sampling each service's RSS,\n"
              "descriptors and threads (scripts/soak.sh).",
          .groups = {{"Scenarios", {"scenarios", "clients", "model", "work_dir"}},
                     {"Soak", {"soak", "samples"}},
                     {"Output", {"out"}}},
          .epilog =
              "The services are found beside this binary's build folder\n"
              "(services/worker/onecard-worker, router/onecard-router, ...)."};
}

}  // namespace

int main(int argc, char** argv) {
  const onecard::services::CommandLine cli =
      onecard::services::ParseCommandLine(CommandLine(), argc, argv);
  if (cli.exit_code) return *cli.exit_code;
  if (cli.args.size() > 1) {
    std::cerr << "onecard-fault: unexpected argument " << cli.args[1]
              << " (see onecard-fault --help)\n";
    return 2;
  }
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
    const std::vector<std::string> known = names;
    names = absl::StrSplit(absl::GetFlag(FLAGS_scenarios), ',', absl::SkipEmpty());
    for (const std::string& name : names) {
      if (std::find(known.begin(), known.end(), name) == known.end()) {
        std::cerr << "onecard-fault: --scenarios: unknown scenario " << name
                  << " (known: " << absl::StrJoin(known, ", ") << ")\n";
        return 2;
      }
    }
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
