// onecard-bench-cuda: onecard-bench's CLI for the CUDA presets (registered
// from tools/bench/cuda/*.cc into the same registry, bench_registry.h):
//   onecard-bench-cuda list
//   onecard-bench-cuda ceilings|decode-8b-bf16|decode-8b-int4|decode-70b-int4|
//       decode-72b-int4|decode-123b-int4|prefill|budget-8b-bf16|kernels-8b|kernels-int4
//       [--results PATH] [--commit HASH]
// Differs from onecard-bench's main only in RunInfo: the device is the GPU
// ("NVIDIA H200 (132 SMs, 139.8 GiB)") and the commit comes from --commit or
// $ONECARD_COMMIT (the GPU machine has no .git), else `git rev-parse`.
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "tools/bench/bench_registry.h"
#include "tools/bench/bench_report.h"
#include "tools/bench/cuda/cuda_bench.h"

ABSL_FLAG(std::string, results, onecard::bench::kDefaultResultsPath,
          "JSON lines file to append to (git-ignored by default); empty = do not write");
ABSL_FLAG(std::string, commit, "", "commit to record; default $ONECARD_COMMIT or git");

int main(int argc, char** argv) {
  // Load every kernel at CUDA initialization, so that device memory measured
  // between requests (budget-8b-bf16) does not move with lazy module loads.
  setenv("CUDA_MODULE_LOADING", "EAGER", /*overwrite=*/0);
  absl::SetProgramUsageMessage("onecard-bench-cuda SCENARIO [flags]; onecard-bench-cuda list");
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  const std::string name = args.size() >= 2 ? args[1] : "";
  if (name == "list") {
    for (const onecard::bench::Scenario* s : onecard::bench::AllScenarios()) {
      std::cout << "  " << s->name << ": " << s->description << "\n";
    }
    return 0;
  }
  const onecard::bench::Scenario* scenario = onecard::bench::FindScenario(name);
  if (scenario == nullptr) {
    std::cerr << "usage: onecard-bench-cuda SCENARIO [flags] (onecard-bench-cuda list)\n";
    return 2;
  }
  onecard::bench::RunInfo info = onecard::bench::CurrentRunInfo();
  info.device = onecard::bench::CudaDeviceDescription();
  const char* env_commit = std::getenv("ONECARD_COMMIT");
  if (!absl::GetFlag(FLAGS_commit).empty()) {
    info.commit = absl::GetFlag(FLAGS_commit);
  } else if (env_commit != nullptr && *env_commit != '\0') {
    info.commit = env_commit;
  }
  onecard::bench::BenchReporter reporter(info);
  if (absl::Status s = scenario->run(onecard::bench::BenchOptions{}, reporter); !s.ok()) {
    reporter.PrintTable(std::cout);
    std::cerr << "onecard-bench-cuda " << name << ": " << s << "\n";
    return 1;
  }
  reporter.PrintTable(std::cout);
  const std::string results = absl::GetFlag(FLAGS_results);
  if (!results.empty()) {
    if (absl::Status s = reporter.AppendJsonLines(results); !s.ok()) {
      std::cerr << "onecard-bench-cuda: " << s << "\n";
      return 1;
    }
    std::cout << "appended " << reporter.records().size() << " records to " << results << "\n";
  }
  return 0;
}
