// Scenario "prefill" (../shared/benchmarks.md): time to first token of one
// 512, 2048 and 8192-token prompt on llama3-8b synthetic BF16 (cases
// prompt<N>), on llama3-70b synthetic with 4-bit projections, groups of
// 128 (cases 70b-int4-prompt<N>: each weight dequantized to BF16 for cuBLAS),
// and on llama3-8b and llama3-70b with FP8 projections, a scale a row (cases
// 8b-fp8-prompt<N>, 70b-fp8-prompt<N>: W8A8, activations quantized per
// token), as one chunk (the whole prompt in one step, first token sampled on
// the GPU). Median of 3 runs after one warm-up. Reports TTFT, prefill tok/s
// against the floor (FLOPs / this run's GEMM rate: bf16, or E4M3 for the FP8
// cases; FLOPs = 2 per matrix weight per token, causal attention
// 2 T (T + 1) head_dim heads layers, one LM-head row), and the achieved rate
// in TFLOP/s against that GEMM rate.
#include <chrono>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/runtime/cuda/cuda_model_runner.h"
#include "tools/bench/bench_registry.h"
#include "tools/bench/bench_report.h"
#include "tools/bench/cuda/cuda_bench.h"

namespace onecard::bench {
namespace {

constexpr char kScenario[] = "prefill";

absl::StatusOr<double> TimePrefillMs(engine::CudaModelRunner& runner,
                                     const std::vector<int32_t>& prompt,
                                     const std::vector<int32_t>& table) {
  engine::BatchInput in;
  in.chunks.push_back({.seq_id = 0, .token_ids = prompt, .block_table = table});
  const std::vector<engine::SampleRowParams> rows(1);
  std::vector<int32_t> tokens;
  const auto t0 = std::chrono::steady_clock::now();
  RETURN_IF_ERROR(runner.ForwardSample(in, rows, {}, &tokens));
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

absl::Status RunModel(const Ceilings& ceil, const char* model, const char* weights,
                      const char* prefix, BenchReporter& reporter) {
  engine::CudaRunnerOptions o = BenchRunnerOptions();
  o.max_num_seqs = 4;
  o.max_batched_tokens = 8192;
  ASSIGN_OR_RETURN(o.synthetic_weights, engine::ParseProjectionSpec(weights));
  ASSIGN_OR_RETURN(auto runner, engine::CreateSyntheticCudaModelRunner(model, o));
  const engine::ModelConfig& c = runner->config();
  const double rate = o.synthetic_weights.format == engine::WeightFormat::kFp8
                          ? ceil.gemm_fp8_flops_per_s
                          : ceil.gemm_flops_per_s;
  for (int32_t tokens : {512, 2048, 8192}) {
    const std::vector<int32_t> prompt = SyntheticPrompt(tokens, tokens, c.vocab_size);
    std::vector<int32_t> table((tokens + 15) / 16);
    for (size_t b = 0; b < table.size(); ++b) table[b] = static_cast<int32_t>(b);
    std::vector<double> ms;
    for (int run = 0; run < 4; ++run) {
      ASSIGN_OR_RETURN(const double t, TimePrefillMs(*runner, prompt, table));
      if (run > 0) ms.push_back(t);
    }
    const double ttft_s = Median(ms) * 1e-3;
    const double flops = PrefillFlops(c, tokens);
    const double floor_s = flops / rate;
    const std::string name = absl::StrCat(prefix, "prompt", tokens);
    reporter.Add({kScenario, name, "ttft", ttft_s, "s", {}});
    reporter.Add(
        {kScenario, name, "prefill_tok_per_s", tokens / ttft_s, "tok/s", tokens / floor_s});
    reporter.Add({kScenario, name, "matrix_rate", flops / ttft_s / 1e12, "TFLOP/s", rate / 1e12});
  }
  return absl::OkStatus();
}

absl::Status RunPrefill(const BenchOptions&, BenchReporter& reporter) {
  ASSIGN_OR_RETURN(const Ceilings ceil, MeasureCeilings());
  RETURN_IF_ERROR(RunModel(ceil, "llama3-8b", "bf16", "", reporter));
  RETURN_IF_ERROR(RunModel(ceil, "llama3-70b", "int4", "70b-int4-", reporter));
  RETURN_IF_ERROR(RunModel(ceil, "llama3-8b", "fp8", "8b-fp8-", reporter));
  return RunModel(ceil, "llama3-70b", "fp8", "70b-fp8-", reporter);
}

const bool kRegistered = RegisterScenario(
    {kScenario,
     "CUDA: llama3-8b bf16, llama3-70b int4, llama3-8b/70b fp8 TTFT of 512/2048/8192-token "
     "prompts vs the matrix rate",
     &RunPrefill});

}  // namespace
}  // namespace onecard::bench
