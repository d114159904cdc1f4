// onecard-bench's scenarios: a registry from scenario name (the ids of
// ../shared/benchmarks.md: cpu-decode, decode-8b-bf16, prefill, ...) to the
// function that runs it. A new preset is a new .cc file beside this one that
// registers itself at namespace scope:
//   const bool kRegistered = RegisterScenario({"name", "what it measures", &RunIt});
// and is added to onecard-bench's sources in tools/bench/CMakeLists.txt.
// Results go through a BenchReporter (bench_report.h).
// Tested by tests/tools/bench/bench_report_test.cc (registry and records).
#ifndef ONECARD_TOOLS_BENCH_BENCH_REGISTRY_H_
#define ONECARD_TOOLS_BENCH_BENCH_REGISTRY_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace onecard::bench {

class BenchReporter;

// What a scenario may use from the command line.
struct BenchOptions {
  std::string model_path;              // e.g. models/SmolLM2-135M-Instruct.Q4_1.gguf
  int32_t num_threads = 0;             // cpu backend; 0 = all cores
  std::string cpu_weights = "native";  // cpu backend: engine::ParseCpuWeightFormat
  int32_t prompt_tokens = 128;
  int32_t new_tokens = 64;
  std::vector<int32_t> batches = {1, 8};  // cpu-decode's batch sizes
  std::string cpu_isa;                    // host-linear's kernels (CpuIsaName); empty: the best
};

using ScenarioFn =
    std::function<absl::Status(const BenchOptions& options, BenchReporter& reporter)>;

struct Scenario {
  std::string name;
  std::string description;
  ScenarioFn run;
};

// Adds a scenario; returns true (for namespace-scope registration).
bool RegisterScenario(Scenario scenario);
// nullptr when unknown.
const Scenario* FindScenario(const std::string& name);
// Sorted by name.
std::vector<const Scenario*> AllScenarios();

}  // namespace onecard::bench

#endif  // ONECARD_TOOLS_BENCH_BENCH_REGISTRY_H_
