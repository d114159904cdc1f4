// Scenarios "offload-70b-24g" and "offload-123b-32g" (issue 19,
// ../shared/benchmarks.md): llama3-70b / mistral-large-123b with 4-bit
// projections (groups of 128, symmetric; synthetic) under a 24 / 32 GiB
// --gpu-memory-budget and 96 GiB of pinned host memory
// (CudaRunnerOptions::cpu_memory_budget) for the layers the card cannot
// hold, streamed every step through a ring of two slots (weight_stream.h).
// At batches 1, 8 and 64: a 128-token prompt per sequence, then 24 greedy
// decode steps sampled on the GPU (the first two untimed: eager, capture),
// CUDA graphs on; the KV cache holds the largest batch (64 sequences of 160
// tokens), the rest of the budget goes to layers. Reports tok/s against the
// cost model's floor for the runner's own placement at that batch
// (PredictStep over the rates the runner measured at start: the larger of
// the card's chain and the streamed bytes over the pinned upload rate), the
// bytes streamed a token, the achieved upload rate (streamed bytes a step
// over the step), the split and the runner's creation time. Then TTFT of one
// 2048-token prompt (one step; median of 3 after one) against the larger of
// its stream time and its compute time, the latter the same prefill on a
// runner of the same model with every layer on the card (made after the
// offloading one is gone); --batches skips it.
#include <algorithm>
#include <chrono>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/common/status_macros.h"
#include "engine/runtime/cuda/cuda_model_runner.h"
#include "engine/runtime/cuda/placement_plan.h"
#include "tools/bench/bench_registry.h"
#include "tools/bench/bench_report.h"
#include "tools/bench/cuda/cuda_bench.h"

namespace onecard::bench {
namespace {

constexpr int32_t kPrompt = 128;
constexpr int32_t kSteps = 24;
constexpr int32_t kUntimed = 2;
constexpr int32_t kMaxBatch = 64;
constexpr int32_t kPrefill = 2048;
constexpr int kPrefillRuns = 3;

// The median time of kPrefillRuns prefills of one kPrefill-token prompt (one
// step) after one untimed.
absl::StatusOr<double> PrefillSeconds(engine::CudaModelRunner& runner) {
  std::vector<double> s;
  for (int run = 0; run <= kPrefillRuns; ++run) {
    BatchDriver driver(&runner, 1, kPrefill, kPrefill + 1);
    const auto t0 = std::chrono::steady_clock::now();
    RETURN_IF_ERROR(driver.Prefill());
    if (run > 0) {
      s.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
  }
  return Median(s);
}

struct Preset {
  const char* scenario;
  const char* model;
  int64_t budget_gib;
  std::vector<int32_t> batches;
};

absl::Status RunOffload(const Preset& preset, BenchReporter& reporter) {
  const char* kScenario = preset.scenario;
  engine::CudaRunnerOptions o = BenchRunnerOptions();
  ASSIGN_OR_RETURN(o.synthetic_weights, engine::ParseProjectionSpec("int4"));
  o.gpu_memory_budget = preset.budget_gib * engine::kGiB;
  o.cpu_memory_budget = 96 * engine::kGiB;
  o.max_num_seqs = kMaxBatch;
  o.max_batched_tokens = 2048;
  o.max_context = kPrefill + 64;
  const int32_t blocks_per_seq = (kPrompt + kSteps + 8 + o.kv_block_size - 1) / o.kv_block_size;
  o.num_kv_blocks = int64_t{kMaxBatch} * blocks_per_seq;
  o.time_steps = true;
  const auto created = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(auto runner, engine::CreateSyntheticCudaModelRunner(preset.model, o));
  const double create_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - created).count();
  reporter.Add({kScenario, "startup", "runner_create_s", create_s, "s", {}});
  const engine::PlacementPlan* place = runner->placement();
  if (place == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(kScenario, ": the model fit the card; nothing was offloaded"));
  }
  reporter.Add({kScenario,
                "placement",
                "device_layers",
                static_cast<double>(place->device_layers),
                "layers",
                {}});
  reporter.Add({kScenario,
                "placement",
                "streamed_layers",
                static_cast<double>(place->streamed_layers),
                "layers",
                {}});
  reporter.Add(
      {kScenario, "placement", "cpu_layers", static_cast<double>(place->cpu_layers), "layers", {}});
  reporter.Add({kScenario,
                "placement",
                "streamed_gib",
                static_cast<double>(place->streamed_bytes) / engine::kGiB,
                "GiB",
                {}});
  reporter.Add(
      {kScenario, "placement", "h2d_rate", place->rates.h2d_bytes_per_s / 1e9, "GB/s", {}});
  engine::PlacementInput in;
  in.config = runner->config();
  in.weights = engine::ModelWeightsSpec::Uniform(in.config, o.synthetic_weights);
  in.rates = place->rates;
  std::vector<int32_t> batches = preset.batches;
  if (const std::vector<int32_t>& only = CurrentBenchSelection().batches; !only.empty()) {
    batches = only;
  }
  for (const int32_t batch : batches) {
    if (batch > kMaxBatch) {
      return absl::InvalidArgumentError(
          absl::StrCat("--batches: ", batch, " is over the offload presets' ", kMaxBatch));
    }
    BatchDriver driver(runner.get(), batch, kPrompt, kPrompt + kSteps + 8);
    RETURN_IF_ERROR(driver.Prefill());
    double total_ms = 0;
    std::vector<double> step_ms;
    for (int32_t i = 0; i < kSteps; ++i) {
      ASSIGN_OR_RETURN(const double ms, driver.DecodeStep());
      if (i < kUntimed) continue;
      total_ms += ms;
      step_ms.push_back(ms);
    }
    const engine::StepPrediction predicted = engine::PredictStep(in, place->layers, batch);
    const double steps = static_cast<double>(step_ms.size());
    const double tok_s = batch * steps / (total_ms * 1e-3);
    const std::string name = absl::StrCat("batch", batch);
    reporter.Add({kScenario, name, "decode_tok_per_s", tok_s, "tok/s", predicted.tokens_per_s()});
    reporter.Add({kScenario, name, "ms_per_step", Median(step_ms), "ms", {}});
    reporter.Add({kScenario, name, "predicted_ms_per_step", predicted.step_s * 1e3, "ms", {}});
    reporter.Add({kScenario,
                  name,
                  "streamed_bytes_per_token",
                  static_cast<double>(place->streamed_bytes) / batch,
                  "B",
                  {}});
    reporter.Add({kScenario,
                  name,
                  "cpu_bytes_per_token",
                  static_cast<double>(place->cpu_bytes) / batch,
                  "B",
                  {}});
    reporter.Add({kScenario, name, "achieved_h2d_rate",
                  static_cast<double>(place->streamed_bytes) / (Median(step_ms) * 1e-3) / 1e9,
                  "GB/s", place->rates.h2d_bytes_per_s / 1e9});
  }
  if (!CurrentBenchSelection().batches.empty()) return absl::OkStatus();
  // Prefill under offload against the larger of its stream (the streamed
  // bytes at the measured upload rate) and its compute: the same prefill
  // with every layer on the card, timed on a second runner of the same model
  // made after this one is gone.
  ASSIGN_OR_RETURN(const double ttft, PrefillSeconds(*runner));
  const double stream_s = static_cast<double>(place->streamed_bytes) / place->rates.h2d_bytes_per_s;
  const int64_t streamed_bytes = place->streamed_bytes;
  runner.reset();
  engine::CudaRunnerOptions whole = o;
  whole.gpu_memory_budget = 0;
  whole.cpu_memory_budget = 0;
  whole.num_kv_blocks = 0;
  ASSIGN_OR_RETURN(auto card, engine::CreateSyntheticCudaModelRunner(preset.model, whole));
  ASSIGN_OR_RETURN(const double compute_s, PrefillSeconds(*card));
  const std::string name = absl::StrCat("prefill", kPrefill);
  reporter.Add({kScenario, name, "prefill_tok_per_s", kPrefill / ttft, "tok/s",
                kPrefill / std::max(stream_s, compute_s)});
  reporter.Add({kScenario, name, "ttft", ttft, "s", {}});
  reporter.Add({kScenario, name, "stream_s", stream_s, "s", {}});
  reporter.Add({kScenario, name, "on_card_ttft", compute_s, "s", {}});
  reporter.Add({kScenario, name, "achieved_h2d_rate", streamed_bytes / ttft / 1e9, "GB/s",
                place->rates.h2d_bytes_per_s / 1e9});
  return absl::OkStatus();
}

const Preset kPresets[] = {
    {"offload-70b-24g", "llama3-70b", 24, {1, 8, 64}},
    {"offload-123b-32g", "mistral-large-123b", 32, {1, 8, 64}},
};

const bool kRegistered = [] {
  for (const Preset& p : kPresets) {
    RegisterScenario(
        {p.scenario,
         absl::StrCat("CUDA: ", p.model, " int4 under ", p.budget_gib,
                      " GiB, the rest streamed from pinned host memory, batch ",
                      absl::StrJoin(p.batches, "/"), ", vs the placement's predicted step"),
         [&p](const BenchOptions&, BenchReporter& r) { return RunOffload(p, r); }});
  }
  return true;
}();

}  // namespace
}  // namespace onecard::bench
