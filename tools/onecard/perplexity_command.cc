// onecard perplexity (see perplexity_command.h).
#include "tools/onecard/perplexity_command.h"

#include <algorithm>
#include <chrono>
#include <ostream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/common/progress.h"
#include "engine/common/regular_file.h"
#include "engine/common/status_macros.h"
#include "engine/model/checkpoint.h"
#include "nlohmann/json.hpp"

namespace onecard::tools {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

absl::Status CheckPerplexityOptions(const PerplexityCommandOptions& o) {
  if (o.model_path.empty()) return absl::InvalidArgumentError("perplexity: --model is required");
  if (o.text_path.empty()) return absl::InvalidArgumentError("perplexity: --text is required");
  if (o.backend != "cpu" && o.backend != "cuda") {
    return absl::InvalidArgumentError(
        absl::StrCat("--backend: \"", o.backend, "\" is not one of cpu, cuda"));
  }
  if (o.windows.window < 2) {
    return absl::InvalidArgumentError(absl::StrCat("--window: ", o.windows.window, " < 2"));
  }
  if (o.windows.stride < 1 || o.windows.stride > o.windows.window) {
    return absl::InvalidArgumentError(
        absl::StrCat("--stride: ", o.windows.stride, " is not in [1, --window]"));
  }
  if (o.text_tokens < 0 || o.text_tokens == 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--text-tokens: ", o.text_tokens, " (0 = all, else at least 2)"));
  }
  if (o.num_threads < 0) return absl::InvalidArgumentError("--threads: must not be negative");
  RETURN_IF_ERROR(engine::ParseKvCacheDtype(o.kv_cache_dtype, "--kv-cache-dtype").status());
  RETURN_IF_ERROR(engine::ParseCpuWeightFormat(o.cpu_weights, "--cpu-weights").status());
  return engine::ParseFp8Compute(o.fp8_compute, "--fp8-compute").status();
}

absl::Status RunPerplexityWith(const PerplexityCommandOptions& options,
                               const engine::Tokenizer& tokenizer, engine::ModelRunner& runner,
                               double load_seconds, std::ostream& out) {
  ASSIGN_OR_RETURN(const std::string text, ReadRegularFile(options.text_path));
  std::vector<int32_t> tokens = tokenizer.Encode(text, /*add_special_tokens=*/false);
  if (options.text_tokens > 0 && static_cast<int64_t>(tokens.size()) > options.text_tokens) {
    tokens.resize(options.text_tokens);
  }
  const auto start = std::chrono::steady_clock::now();
  Progress progress(
      absl::StrCat("perplexity of ", options.text_path),
      static_cast<int64_t>(engine::PerplexityWindows(tokens.size(), options.windows).size()),
      "windows");
  ASSIGN_OR_RETURN(const engine::PerplexityResult result,
                   engine::ComputePerplexity(runner, tokens, options.windows,
                                             [&](int32_t, int32_t) { progress.Add(); }));
  progress.Done();
  const double seconds = SecondsSince(start);
  const nlohmann::json summary = {
      {"model", options.model_path},
      {"backend", runner.name()},
      {"kv_cache_dtype", options.kv_cache_dtype},
      {"cpu_weights", options.cpu_weights},
      {"fp8_compute", options.fp8_compute},
      {"text", options.text_path},
      {"text_bytes", text.size()},
      {"tokens", result.num_tokens},
      {"window", options.windows.window},
      {"stride", options.windows.stride},
      {"windows", result.windows},
      {"scored_tokens", result.scored_tokens},
      {"nll_mean", result.MeanNll()},
      {"perplexity", result.Perplexity()},
      {"seconds", seconds},
      {"tokens_per_second", seconds > 0 ? result.num_tokens / seconds : 0.0},
      {"load_seconds", load_seconds}};
  out << summary.dump() << "\n";
  return absl::OkStatus();
}

absl::Status RunPerplexity(const PerplexityCommandOptions& options, std::ostream& out) {
  RETURN_IF_ERROR(CheckPerplexityOptions(options));
  const auto start = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(const engine::Checkpoint checkpoint, engine::OpenCheckpoint(options.model_path));
  ASSIGN_OR_RETURN(std::unique_ptr<engine::Tokenizer> tokenizer, engine::OpenTokenizer(checkpoint));
  const int32_t window = options.windows.window;
  if (window > checkpoint.config.max_position_embeddings) {
    return absl::InvalidArgumentError(absl::StrCat("--window: ", window,
                                                   " tokens is over the model's context of ",
                                                   checkpoint.config.max_position_embeddings));
  }
  engine::EngineOptions e;
  e.model_path = options.model_path;
  e.backend = options.backend;
  e.num_threads = options.num_threads;
  ASSIGN_OR_RETURN(e.kv_cache_dtype,
                   engine::ParseKvCacheDtype(options.kv_cache_dtype, "--kv-cache-dtype"));
  ASSIGN_OR_RETURN(e.cpu_weight_format,
                   engine::ParseCpuWeightFormat(options.cpu_weights, "--cpu-weights"));
  ASSIGN_OR_RETURN(e.fp8_compute, engine::ParseFp8Compute(options.fp8_compute, "--fp8-compute"));
  // One sequence of one window at a time: its blocks, and a step as long as
  // the window.
  e.num_kv_blocks = (window + e.kv_block_size - 1) / e.kv_block_size;
  e.max_num_seqs = 1;
  e.max_batched_tokens = window;
  e.max_context = std::max<int32_t>(window, 16);
  e.tune_gemms = false;
  ASSIGN_OR_RETURN(std::unique_ptr<engine::ModelRunner> runner,
                   engine::CreateModelRunner(checkpoint, e));
  return RunPerplexityWith(options, *tokenizer, *runner, SecondsSince(start), out);
}

}  // namespace onecard::tools
