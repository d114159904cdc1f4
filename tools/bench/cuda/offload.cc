// Scenarios "offload-70b-24g" and "offload-123b-32g" (issue 19,
// ../shared/benchmarks.md): llama3-70b / mistral-large-123b with 4-bit
// projections (groups of 128, symmetric; synthetic) under a 24 / 32 GiB
// --gpu-memory-budget and 96 GiB of pinned host memory
// (CudaRunnerOptions::cpu_memory_budget) for the layers the card cannot
// hold, split by the runner's cost model between the CPU (steps of up to
// cpu_max_rows rows; cpu_span.h) and streaming through a ring of two slots
// (weight_stream.h; larger steps stream the CPU's layers too).
// At batches 1, 8 and 64, each on a runner made for it (max_num_seqs the
// batch; KV for that many sequences of 160 tokens, or for one full-context
// sequence of 2112 tokens when that is more; the rest of the budget goes to
// layers): a 128-token prompt per sequence, then 24 greedy decode steps
// sampled on the GPU (the first two untimed: eager, capture), CUDA graphs
// on. Reports tok/s against the cost model's floor for the runner's own
// placement at that batch (PredictPlanStep over the rates the runner
// measured at start: the larger of the chain, the card's and the CPU's
// layers in order, and the streamed bytes over the pinned upload rate), the
// bytes streamed and CPU-computed a token, the achieved upload rate (streamed
// bytes a step over the step), the split and the runner's creation time.
// Then, on the batch-1 runner, TTFT of one 2048-token prompt (one step, every
// offloaded layer streamed; median of 3 after one) against the larger of its
// stream time and its compute time, the latter the same prefill on a runner
// of the same model with every layer on the card (made after the offloading
// ones are gone), and the streamed copies timed on the copy engine in the
// same prefill (their rate against the pinned upload rate, the time the
// copy stream was busy, first copy's start to last one's end); --batches
// skips it.
#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
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
constexpr int32_t kMaxBatch = 64;  // the largest --batches value
constexpr int32_t kPrefill = 2048;
constexpr int kPrefillRuns = 3;

// kPrefillRuns prefills of one kPrefill-token prompt (one step) after one
// untimed: the median of their times, and of their streamed layers' copies
// (CudaStepTiming: bytes, summed time on the copy engine, first start to
// last end; zeros on a runner that streams nothing).
struct PrefillTimes {
  double seconds = 0;
  double stream_bytes = 0;
  double stream_busy_s = 0;
  double stream_span_s = 0;
};

absl::StatusOr<PrefillTimes> TimePrefill(engine::CudaModelRunner& runner) {
  std::vector<double> s, bytes, busy, span;
  for (int run = 0; run <= kPrefillRuns; ++run) {
    BatchDriver driver(&runner, 1, kPrefill, kPrefill + 1);
    const auto t0 = std::chrono::steady_clock::now();
    RETURN_IF_ERROR(driver.Prefill());
    if (run > 0) {
      s.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      const engine::CudaStepTiming t = runner.last_step_timing();
      bytes.push_back(static_cast<double>(t.stream_bytes));
      busy.push_back(t.stream_busy_us * 1e-6);
      span.push_back(t.stream_span_us * 1e-6);
    }
  }
  return PrefillTimes{.seconds = Median(s),
                      .stream_bytes = Median(bytes),
                      .stream_busy_s = Median(busy),
                      .stream_span_s = Median(span)};
}

struct Preset {
  const char* scenario;
  const char* model;
  int64_t budget_gib;
  std::vector<int32_t> batches;
};

// A runner of the preset for steps of up to `batch` sequences: KV for that
// many sequences of the decode run, or for one full-context sequence when
// that is more (the rest of the budget goes to layers).
absl::StatusOr<std::unique_ptr<engine::CudaModelRunner>> MakeRunner(const Preset& preset,
                                                                    int32_t batch,
                                                                    BenchReporter& reporter) {
  engine::CudaRunnerOptions o = BenchRunnerOptions();
  ASSIGN_OR_RETURN(o.synthetic_weights, engine::ParseProjectionSpec("int4"));
  o.gpu_memory_budget = preset.budget_gib * engine::kGiB;
  o.cpu_memory_budget = 96 * engine::kGiB;
  o.max_num_seqs = batch;
  o.max_batched_tokens = kPrefill;
  o.max_context = kPrefill + 64;
  const int64_t blocks_per_seq = (kPrompt + kSteps + 8 + o.kv_block_size - 1) / o.kv_block_size;
  const int64_t context_blocks = (o.max_context + o.kv_block_size - 1) / o.kv_block_size;
  o.num_kv_blocks = std::max(int64_t{batch} * blocks_per_seq, context_blocks);
  o.time_steps = true;
  const auto created = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(auto runner, engine::CreateSyntheticCudaModelRunner(preset.model, o));
  const double create_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - created).count();
  const engine::PlacementPlan* place = runner->placement();
  if (place == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(preset.scenario, ": the model fit the card; nothing was offloaded"));
  }
  const std::string name = absl::StrCat("batch", batch);
  const auto add = [&](const char* metric, double value, const char* unit) {
    reporter.Add({preset.scenario, name, metric, value, unit, {}});
  };
  add("runner_create_s", create_s, "s");
  add("device_layers", place->device_layers, "layers");
  add("streamed_layers", place->streamed_layers, "layers");
  add("cpu_layers", place->cpu_layers, "layers");
  add("streamed_gib", static_cast<double>(place->streamed_bytes) / engine::kGiB, "GiB");
  add("cpu_gib", static_cast<double>(place->cpu_bytes) / engine::kGiB, "GiB");
  add("host_embedding_gib", static_cast<double>(place->host_embedding_bytes) / engine::kGiB, "GiB");
  add("cpu_max_rows", place->cpu_max_rows, "rows");
  add("h2d_rate", place->rates.h2d_bytes_per_s / 1e9, "GB/s");
  add("host_read_rate", place->rates.host_read_bytes_per_s / 1e9, "GB/s");
  add("host_rows2_rate", place->rates.host_rows2_bytes_per_s / 1e9, "GB/s");
  add("cpu_span_us", place->rates.span_s * 1e6, "us");
  return runner;
}

// Decode at `batch` on a runner made for it (MakeRunner).
absl::Status Decode(const Preset& preset, int32_t batch, engine::CudaModelRunner& runner,
                    BenchReporter& reporter) {
  const engine::PlacementPlan* place = runner.placement();
  engine::PlacementInput in;
  in.config = runner.config();
  ASSIGN_OR_RETURN(const engine::ProjectionSpec spec, engine::ParseProjectionSpec("int4"));
  in.weights = engine::ModelWeightsSpec::Uniform(in.config, spec);
  in.rates = place->rates;
  BatchDriver driver(&runner, batch, kPrompt, kPrompt + kSteps + 8);
  RETURN_IF_ERROR(driver.Prefill());
  double total_ms = 0;
  std::vector<double> step_ms, cpu_ms, linear_ms;
  for (int32_t i = 0; i < kSteps; ++i) {
    ASSIGN_OR_RETURN(const double ms, driver.DecodeStep());
    if (i < kUntimed) continue;
    total_ms += ms;
    step_ms.push_back(ms);
    cpu_ms.push_back(runner.last_step_timing().cpu_us * 1e-3);
    linear_ms.push_back(runner.last_step_timing().cpu_linear_us * 1e-3);
  }
  const engine::StepPrediction predicted = engine::PredictPlanStep(in, *place, batch);
  const bool cpu = batch <= place->cpu_max_rows;
  const double streamed = static_cast<double>(place->streamed_bytes + (cpu ? 0 : place->cpu_bytes));
  const double cpu_bytes = cpu ? static_cast<double>(place->cpu_bytes) : 0.0;
  const double steps = static_cast<double>(step_ms.size());
  const double tok_s = batch * steps / (total_ms * 1e-3);
  const std::string name = absl::StrCat("batch", batch);
  const char* kScenario = preset.scenario;
  reporter.Add({kScenario, name, "decode_tok_per_s", tok_s, "tok/s", predicted.tokens_per_s()});
  reporter.Add({kScenario, name, "ms_per_step", Median(step_ms), "ms", {}});
  reporter.Add({kScenario, name, "predicted_ms_per_step", predicted.step_s * 1e3, "ms", {}});
  reporter.Add({kScenario, name, "cpu_ms_per_step", Median(cpu_ms), "ms", {}});
  reporter.Add({kScenario, name, "cpu_products_ms_per_step", Median(linear_ms), "ms", {}});
  reporter.Add({kScenario, name, "predicted_cpu_ms", predicted.cpu_s * 1e3, "ms", {}});
  reporter.Add({kScenario, name, "predicted_stream_ms", predicted.stream_s * 1e3, "ms", {}});
  reporter.Add({kScenario, name, "streamed_bytes_per_token", streamed / batch, "B", {}});
  reporter.Add({kScenario, name, "cpu_bytes_per_token", cpu_bytes / batch, "B", {}});
  reporter.Add({kScenario, name, "achieved_h2d_rate", streamed / (Median(step_ms) * 1e-3) / 1e9,
                "GB/s", place->rates.h2d_bytes_per_s / 1e9});
  return absl::OkStatus();
}

absl::Status RunOffload(const Preset& preset, BenchReporter& reporter) {
  std::vector<int32_t> batches = preset.batches;
  const bool only = !CurrentBenchSelection().batches.empty();
  if (only) batches = CurrentBenchSelection().batches;
  for (const int32_t batch : batches) {
    if (batch > kMaxBatch) {
      return absl::InvalidArgumentError(
          absl::StrCat("--batches: ", batch, " is over the offload presets' ", kMaxBatch));
    }
  }
  PrefillTimes offloaded;
  double stream_s = 0, rate = 0;
  int64_t streamed_bytes = 0;
  for (const int32_t batch : batches) {
    ASSIGN_OR_RETURN(auto runner, MakeRunner(preset, batch, reporter));
    RETURN_IF_ERROR(Decode(preset, batch, *runner, reporter));
    if (batch != 1 || only) continue;
    // Prefill under offload (every offloaded layer streamed: a step past the
    // CPU's rows) on the batch-1 runner.
    const engine::PlacementPlan* place = runner->placement();
    ASSIGN_OR_RETURN(offloaded, TimePrefill(*runner));
    streamed_bytes = place->streamed_bytes + place->cpu_bytes;
    rate = place->rates.h2d_bytes_per_s;
    stream_s = static_cast<double>(streamed_bytes) / rate;
  }
  const double ttft = offloaded.seconds;
  if (only || ttft == 0) return absl::OkStatus();
  // Its compute: the same prefill with every layer on the card, timed on a
  // runner of the same model made after the offloading ones are gone.
  engine::CudaRunnerOptions whole = BenchRunnerOptions();
  ASSIGN_OR_RETURN(whole.synthetic_weights, engine::ParseProjectionSpec("int4"));
  whole.max_num_seqs = 1;
  whole.max_batched_tokens = kPrefill;
  whole.max_context = kPrefill + 64;
  ASSIGN_OR_RETURN(auto card, engine::CreateSyntheticCudaModelRunner(preset.model, whole));
  ASSIGN_OR_RETURN(const PrefillTimes on_card, TimePrefill(*card));
  const double compute_s = on_card.seconds;
  const std::string name = absl::StrCat("prefill", kPrefill);
  const char* kScenario = preset.scenario;
  reporter.Add({kScenario, name, "prefill_tok_per_s", kPrefill / ttft, "tok/s",
                kPrefill / std::max(stream_s, compute_s)});
  reporter.Add({kScenario, name, "ttft", ttft, "s", {}});
  reporter.Add({kScenario, name, "stream_s", stream_s, "s", {}});
  reporter.Add({kScenario, name, "on_card_ttft", compute_s, "s", {}});
  reporter.Add(
      {kScenario, name, "achieved_h2d_rate", streamed_bytes / ttft / 1e9, "GB/s", rate / 1e9});
  // The copies themselves, timed on the copy engine: their rate against the
  // pinned upload rate measured at start, and the share of the TTFT the
  // copy stream was busy.
  if (offloaded.stream_busy_s > 0) {
    reporter.Add({kScenario, name, "stream_copied_bytes", offloaded.stream_bytes, "B", {}});
    reporter.Add({kScenario, name, "stream_copy_rate",
                  offloaded.stream_bytes / offloaded.stream_busy_s / 1e9, "GB/s", rate / 1e9});
    reporter.Add({kScenario, name, "stream_busy_s", offloaded.stream_busy_s, "s", {}});
    reporter.Add({kScenario, name, "stream_span_s", offloaded.stream_span_s, "s", {}});
  }
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
                      " GiB, the rest computed by the CPU or streamed from pinned host memory, "
                      "batch ",
                      absl::StrJoin(p.batches, "/"), ", vs the placement's predicted step"),
         [&p](const BenchOptions&, BenchReporter& r) { return RunOffload(p, r); }});
  }
  return true;
}();

}  // namespace
}  // namespace onecard::bench
