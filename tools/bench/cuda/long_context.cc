// Scenario "decode-long-context" (../shared/benchmarks.md): decode at batch
// 32 with 8k and 32k tokens of context, a BF16 KV cache against an FP8 one
// (KvCacheDtype::kFp8E4m3), on llama3-8b (BF16 weights) and llama3-70b
// (4-bit weights, groups of 128), each on the whole card. Cases
// "batch32-ctx8k-kv-bf16", "batch32-ctx8k-kv-fp8", "batch32-ctx32k-kv-..."
// (llama3-8b) and "70b-int4-batch32-ctx8k-kv-..." where the batch's
// contexts fit the KV pool (a case that does not fit says so and is
// skipped). The contexts are not prefilled: the sequences start at the
// context length over the pool as it is (zeros, or the FP8 calibration's
// codes), since a decode step's time does not depend on the values it reads
// (the attention reads every position either way). Reports tok/s against
// the floor (weights + K/V read and written, at the cache's bytes an
// element, over the copy bandwidth of this run's ceilings), ms a step, the
// KV tokens the plan holds in the budget, and at 8k the FP8 / BF16 step-rate
// ratio. CUDA graphs on; 2 eager steps, then 48 timed.
#include <cstdio>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/model/synthetic_shapes.h"
#include "engine/runtime/cuda/cuda_model_runner.h"
#include "engine/runtime/cuda/memory_plan.h"
#include "tools/bench/bench_registry.h"
#include "tools/bench/bench_report.h"
#include "tools/bench/cuda/cuda_bench.h"

namespace onecard::bench {
namespace {

constexpr char kScenario[] = "decode-long-context";
constexpr int32_t kBatch = 32;
constexpr int32_t kWarmSteps = 2;
constexpr int32_t kSteps = 48;

struct Case {
  const char* prefix;  // "" for llama3-8b, "70b-int4-"
  const char* model;
  const char* weights;
  int32_t context;
  engine::KvCacheDtype kv;
};

// Step rate (tok/s) of the case, or nullopt when its contexts do not fit.
absl::StatusOr<std::optional<double>> RunCase(const Case& c, const Ceilings& ceil,
                                              BenchReporter& reporter) {
  const bool fp8 = c.kv == engine::KvCacheDtype::kFp8E4m3;
  const std::string name = absl::StrCat(c.prefix, "batch", kBatch, "-ctx", c.context / 1024,
                                        "k-kv-", fp8 ? "fp8" : "bf16");
  ASSIGN_OR_RETURN(const engine::ProjectionSpec weights, engine::ParseProjectionSpec(c.weights));
  engine::CudaRunnerOptions o = BenchRunnerOptions();
  o.synthetic_weights = weights;
  o.kv_cache_dtype = c.kv;
  o.max_num_seqs = kBatch;
  o.max_context = c.context + kWarmSteps + kSteps + 16;
  o.time_steps = true;
  // What the card's free memory holds in this cache format (the plan the
  // runner would make), before making a runner only for the batch's blocks.
  ASSIGN_OR_RETURN(const engine::ModelConfig config, engine::SyntheticModelConfig(c.model));
  size_t free_bytes = 0, total_bytes = 0;
  CUDA_RETURN_IF_ERROR(cudaMemGetInfo(&free_bytes, &total_bytes));
  int device = 0, sms = 0;
  CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
  CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  absl::StatusOr<engine::MemoryPlan> plan = engine::PlanMemory(
      engine::CudaMemoryPlanInput(config, engine::ModelWeightsSpec::Uniform(config, weights), o,
                                  static_cast<int64_t>(free_bytes), sms));
  if (!plan.ok()) {
    std::fprintf(stderr, "%s %s: does not fit: %s\n", kScenario, name.c_str(),
                 plan.status().ToString().c_str());
    return std::nullopt;
  }
  const int64_t kv_tokens = plan->num_kv_blocks * plan->kv_block_size;
  reporter.Add({kScenario, name, "kv_cache_tokens", static_cast<double>(kv_tokens), "tokens", {}});
  const int64_t blocks_each = (o.max_context + plan->kv_block_size - 1) / plan->kv_block_size;
  if (kBatch * blocks_each > plan->num_kv_blocks) {
    std::fprintf(stderr, "%s %s: %d sequences of %d tokens need %lld KV blocks; %lld fit\n",
                 kScenario, name.c_str(), kBatch, o.max_context,
                 static_cast<long long>(kBatch * blocks_each),
                 static_cast<long long>(plan->num_kv_blocks));
    return std::nullopt;
  }
  o.num_kv_blocks = kBatch * blocks_each;
  ASSIGN_OR_RETURN(std::unique_ptr<engine::CudaModelRunner> runner,
                   engine::CreateSyntheticCudaModelRunner(c.model, o));
  const engine::ModelWeightsSpec spec =
      engine::ModelWeightsSpec::Uniform(runner->config(), weights);
  BatchDriver driver(runner.get(), kBatch, /*prompt_tokens=*/1, o.max_context);
  driver.Rewind(c.context);
  std::vector<double> step_ms;
  double total_ms = 0, floor_s = 0;
  for (int32_t i = 0; i < kWarmSteps + kSteps; ++i) {
    const int64_t context = driver.position() + 1;
    ASSIGN_OR_RETURN(const double ms, driver.DecodeStep());
    if (i < kWarmSteps) continue;  // eager, then captured
    step_ms.push_back(ms);
    total_ms += ms;
    floor_s += DecodeStepBytes(runner->config(), spec, kBatch, context, fp8 ? 1 : 2) /
               ceil.copy_bytes_per_s;
  }
  const double tok_s = kBatch * kSteps / (total_ms * 1e-3);
  reporter.Add(
      {kScenario, name, "decode_tok_per_s", tok_s, "tok/s", kBatch * double{kSteps} / floor_s});
  reporter.Add({kScenario, name, "ms_per_step", Median(step_ms), "ms", {}});
  return tok_s;
}

absl::Status RunLongContext(BenchReporter& reporter) {
  ASSIGN_OR_RETURN(const Ceilings ceil, MeasureCeilings());
  using engine::KvCacheDtype;
  for (const auto& [prefix, model, weights] :
       {std::tuple{"", "llama3-8b", "bf16"}, std::tuple{"70b-int4-", "llama3-70b", "int4"}}) {
    for (int32_t context : {8192, 32768}) {
      std::optional<double> rate[2];
      for (KvCacheDtype kv : {KvCacheDtype::kBf16, KvCacheDtype::kFp8E4m3}) {
        ASSIGN_OR_RETURN(rate[kv == KvCacheDtype::kFp8E4m3 ? 1 : 0],
                         RunCase({prefix, model, weights, context, kv}, ceil, reporter));
      }
      if (rate[0].has_value() && rate[1].has_value()) {
        reporter.Add({kScenario,
                      absl::StrCat(prefix, "batch", kBatch, "-ctx", context / 1024, "k"),
                      "kv_fp8_over_bf16_step_rate",
                      *rate[1] / *rate[0],
                      "ratio",
                      {}});
      }
    }
  }
  return absl::OkStatus();
}

const bool kRegistered = [] {
  RegisterScenario({kScenario,
                    "CUDA: batch 32 decode at 8k / 32k context, BF16 vs FP8 KV cache "
                    "(llama3-8b bf16, llama3-70b int4)",
                    [](const BenchOptions&, BenchReporter& r) { return RunLongContext(r); }});
  return true;
}();

}  // namespace
}  // namespace onecard::bench
