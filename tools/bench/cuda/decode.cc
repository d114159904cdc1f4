// Scenarios "decode-8b-bf16", "decode-8b-int4", "decode-70b-int4",
// "decode-70b-int4-48g", "decode-72b-int4", "decode-123b-int4",
// "decode-8b-fp8", "decode-70b-fp8", "decode-123b-fp8"
// (../shared/benchmarks.md): the
// synthetic model (llama3-8b BF16; llama3-8b / llama3-70b / qwen2-72b /
// mistral-large-123b with 4-bit projections, groups of 128, symmetric, or
// FP8 E4M3 projections with a scale a row), a
// 128-token prompt per sequence, then 256 greedy decode steps sampled on the
// GPU, at each preset's batches; CUDA graphs on (decode-70b-int4-48g: under
// a 48 GiB budget). Reports tok/s
// against the floor of the same work computed from this run's ceilings: per
// step the larger of (weights + KV read and written) / copy bandwidth and
// FLOPs / GEMM rate (FP8 presets past 4 rows: the E4M3 rate), summed over
// the steps; ms per step (wall, and on the
// device from the metadata copy to the tokens' copy); the achieved
// bandwidth against the copy bandwidth. Then, at batch 1 and 32, 48 more
// steps with graphs off and 48 with graphs on: the host's enqueue time per
// step (pack + copy + launches, before waiting) and the step time, both ways.
// Also the runner's creation time (startup/runner_create_s: weights made on
// the device, buffers, GEMM tuning); onecard-bench-cuda's --tuning_cache
// names a tuning cache file (CudaRunnerOptions::tuning_cache) to load and
// write, --batches picks batch sizes (CurrentBenchSelection), and
// --kv_cache_dtype fp8 runs the preset over an FP8 KV cache (cases
// "batchN-kv-fp8", the floor counting a byte a K or V element), and
// --weights another format of the preset's kind (cases "batchN-<format>",
// e.g. "batch1-int4-g32-min", the floor counting that format's bytes).
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "engine/common/status_macros.h"
#include "engine/kernels/gemv.h"
#include "engine/runtime/cuda/cuda_model_runner.h"
#include "tools/bench/bench_registry.h"
#include "tools/bench/bench_report.h"
#include "tools/bench/cuda/cuda_bench.h"
#include "tools/bench/cuda/power_monitor.h"

namespace onecard::bench {
namespace {

constexpr int32_t kPrompt = 128;
constexpr int32_t kSteps = 256;
constexpr int32_t kGraphSteps = 48;

struct Preset {
  const char* scenario;
  const char* model;
  const char* weights;  // ParseProjectionSpec
  std::vector<int32_t> batches;
  int64_t budget_gib = 0;  // --gpu-memory-budget; 0: the card
};

// `weights`: the projections' format as --weights named it (the cases'
// suffix); empty for the preset's own.
absl::Status MeasureBatch(const Preset& preset, absl::string_view weights,
                          const engine::ModelWeightsSpec& spec, engine::CudaModelRunner& runner,
                          int32_t batch, const Ceilings& ceil, PowerMonitor* power,
                          BenchReporter& reporter) {
  const char* kScenario = preset.scenario;
  const engine::ModelConfig& c = runner.config();
  BatchDriver driver(&runner, batch, kPrompt, kPrompt + kSteps + kGraphSteps + 1);
  RETURN_IF_ERROR(driver.Prefill());
  double total_ms = 0, floor_s = 0, bytes = 0;
  std::vector<double> step_ms, gpu_ms, runner_ms, enqueue_us;
  // FP8 weights: the FP8 matrix rate where the step multiplies in FP8 (W8A8,
  // past the GEMV's rows); the bf16 rate otherwise.
  const bool fp8_products = std::string_view(preset.weights).starts_with("fp8") &&
                            batch > engine::kGemvMaxRows && ceil.gemm_fp8_flops_per_s > 0;
  const double matrix_rate = fp8_products ? ceil.gemm_fp8_flops_per_s : ceil.gemm_flops_per_s;
  // The KV cache's bytes an element (onecard-bench-cuda --kv_cache_dtype).
  const int64_t kv_element_bytes = runner.kv_scales() != nullptr ? 1 : 2;
  if (power != nullptr) power->Start();
  for (int32_t i = 0; i < kSteps; ++i) {
    const int64_t context = driver.position() + 1;
    ASSIGN_OR_RETURN(const double ms, driver.DecodeStep());
    if (i >= 2) {  // the first steps of a bucket run eagerly, then capture
      total_ms += ms;
      step_ms.push_back(ms);
      const engine::CudaStepTiming timing = runner.last_step_timing();
      gpu_ms.push_back(timing.gpu_us * 1e-3);
      runner_ms.push_back(timing.total_us * 1e-3);
      enqueue_us.push_back(timing.enqueue_us);
      const double step_bytes = DecodeStepBytes(c, spec, batch, context, kv_element_bytes);
      bytes += step_bytes;
      floor_s += std::max(step_bytes / ceil.copy_bytes_per_s,
                          DecodeStepFlops(c, batch, context) / matrix_rate);
    }
  }
  const PowerMonitor::Summary board = power != nullptr ? power->Stop() : PowerMonitor::Summary{};
  const double steps = static_cast<double>(step_ms.size());
  const std::string name = absl::StrCat("batch", batch, weights.empty() ? "" : "-", weights,
                                        kv_element_bytes == 1 ? "-kv-fp8" : "");
  reporter.Add({kScenario, name, "decode_tok_per_s", batch * steps / (total_ms * 1e-3), "tok/s",
                batch * steps / floor_s});
  reporter.Add({kScenario, name, "ms_per_step", Median(step_ms), "ms", {}});
  reporter.Add({kScenario, name, "gpu_ms_per_step", Median(gpu_ms), "ms", {}});
  // Where the host's share goes: the runner's whole call (check, pack,
  // enqueue, wait, unpack) and its enqueue part; the rest of ms_per_step is
  // this driver building the batch.
  reporter.Add({kScenario, name, "runner_ms_per_step", Median(runner_ms), "ms", {}});
  reporter.Add({kScenario, name, "enqueue_us_per_step", Median(enqueue_us), "us", {}});
  reporter.Add({kScenario, name, "achieved_bandwidth", bytes / (total_ms * 1e-3) / 1e9, "GB/s",
                ceil.copy_bytes_per_s / 1e9});
  if (board.samples > 0) {  // the board over the kSteps steps (NVML)
    reporter.Add({kScenario, name, "board_power", board.mean_watts, "W", {}});
    reporter.Add({kScenario, name, "sm_clock", board.mean_sm_mhz, "MHz", {}});
    reporter.Add({kScenario, name, "sm_clock_min", board.min_sm_mhz, "MHz", {}});
    reporter.Add(
        {kScenario, name, "clock_limited_fraction", board.limited_fraction, "fraction", {}});
    if (board.joules > 0) {
      reporter.Add(
          {kScenario, name, "joules_per_token", board.joules / (batch * double{kSteps}), "J", {}});
    }
  }
  if (batch != 1 && batch != 32) return absl::OkStatus();
  for (bool graphs : {false, true}) {
    runner.set_use_cuda_graphs(graphs);
    driver.Rewind(kPrompt + kSteps);
    std::vector<double> host_us, wall_ms;
    for (int32_t i = 0; i < kGraphSteps; ++i) {
      ASSIGN_OR_RETURN(const double ms, driver.DecodeStep());
      host_us.push_back(runner.last_step_timing().enqueue_us);
      wall_ms.push_back(ms);
    }
    const char* mode = graphs ? "graphs_on" : "graphs_off";
    reporter.Add({kScenario, name, absl::StrCat(mode, "_host_us"), Median(host_us), "us", {}});
    reporter.Add({kScenario, name, absl::StrCat(mode, "_step_ms"), Median(wall_ms), "ms", {}});
  }
  return absl::OkStatus();
}

absl::Status RunDecode(const Preset& preset, BenchReporter& reporter) {
  const char* kScenario = preset.scenario;
  const std::string& chosen = CurrentBenchSelection().weights;
  ASSIGN_OR_RETURN(const engine::ProjectionSpec own, engine::ParseProjectionSpec(preset.weights));
  ASSIGN_OR_RETURN(const engine::ProjectionSpec weights,
                   engine::ParseProjectionSpec(chosen.empty() ? preset.weights : chosen));
  if (weights.format != own.format) {
    return absl::InvalidArgumentError(absl::StrCat("--weights: ", chosen, " is not of ", kScenario,
                                                   "'s kind (", preset.weights, ")"));
  }
  ASSIGN_OR_RETURN(const Ceilings ceil, MeasureCeilings());
  engine::CudaRunnerOptions o = BenchRunnerOptions();
  o.synthetic_weights = weights;
  o.gpu_memory_budget = preset.budget_gib * engine::kGiB;
  o.max_num_seqs = 128;
  o.max_batched_tokens = 4096;
  o.time_steps = true;
  const auto created = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(auto runner, engine::CreateSyntheticCudaModelRunner(preset.model, o));
  const engine::ModelWeightsSpec spec =
      engine::ModelWeightsSpec::Uniform(runner->config(), weights);
  // Weights generated on the device, buffers, cuBLAS tuning (or its cache).
  const double create_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - created).count();
  reporter.Add({kScenario, "startup", "runner_create_s", create_s, "s", {}});
  std::vector<int32_t> batches = preset.batches;
  if (const std::vector<int32_t>& only = CurrentBenchSelection().batches; !only.empty()) {
    for (const int32_t batch : only) {
      if (batch > o.max_num_seqs) {
        return absl::InvalidArgumentError(
            absl::StrCat("--batches: ", batch, " is over the presets' ", o.max_num_seqs));
      }
    }
    batches = only;
  }
  // Board power, clock and energy next to each batch's figures, where the
  // driver's NVML is there.
  int device = 0;
  cudaGetDevice(&device);
  absl::StatusOr<std::unique_ptr<PowerMonitor>> power =
      PowerMonitor::Create(device, absl::Milliseconds(50));
  if (!power.ok()) {
    std::fprintf(stderr, "decode: no board readings: %s\n", power.status().ToString().c_str());
  }
  for (int32_t batch : batches) {
    RETURN_IF_ERROR(MeasureBatch(preset, chosen, spec, *runner, batch, ceil,
                                 power.ok() ? power->get() : nullptr, reporter));
  }
  return absl::OkStatus();
}

// decode-70b-int4-48g: llama3-70b under a 48 GiB budget (the memory plan's
// acceptance; its KV holds batches up to 32 of these sequences).
const Preset kPresets[] = {
    {"decode-8b-bf16", "llama3-8b", "bf16", {1, 8, 32, 128}},
    {"decode-8b-int4", "llama3-8b", "int4", {1, 8, 16, 32, 64, 128}},
    {"decode-70b-int4", "llama3-70b", "int4", {1, 8, 16, 32, 64, 128}},
    {"decode-70b-int4-48g", "llama3-70b", "int4", {1, 8}, 48},
    {"decode-72b-int4", "qwen2-72b", "int4", {1, 8, 16, 32, 64, 128}},
    {"decode-123b-int4", "mistral-large-123b", "int4", {1, 8, 16, 32, 64, 128}},
    {"decode-8b-fp8", "llama3-8b", "fp8", {1, 8, 16, 32, 64, 128}},
    {"decode-70b-fp8", "llama3-70b", "fp8", {1, 8, 16, 32, 64, 128}},
    {"decode-123b-fp8", "mistral-large-123b", "fp8", {1, 8, 32}},
};

const bool kRegistered = [] {
  for (const Preset& p : kPresets) {
    RegisterScenario(
        {p.scenario,
         absl::StrCat("CUDA: ", p.model, " ", p.weights, " decode vs the HBM/compute floor, batch ",
                      absl::StrJoin(p.batches, "/")),
         [&p](const BenchOptions&, BenchReporter& r) { return RunDecode(p, r); }});
  }
  return true;
}();

}  // namespace
}  // namespace onecard::bench
