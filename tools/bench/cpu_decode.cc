// Scenario cpu-decode (../shared/benchmarks.md): decode tokens per second of
// a GGUF file (--model, SmolLM2's by default) on the cpu backend of this
// machine, at the batch sizes of --batches (1 and 8 by default), with the
// weights in --cpu-weights' format;
// cases are named after the file, the batch and the format
// ("SmolLM2-135M-Instruct.Q4_1-batch1-native"). Each request has a prompt of
// --prompt-tokens synthetic ids and generates --new-tokens greedily
// (ignore_eos). All prompts prefill in the first step, so every later step is
// pure decode; the rate counts the tokens after each request's first over the
// time from the last first token to the last token. Then the process's
// resident bytes and their ratio to the file's size. No floor applies on the
// CPU (floor null). Run by hand: `onecard-bench cpu-decode`.
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <string>
#include <system_error>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "engine/common/progress.h"
#include "engine/common/status_macros.h"
#include "engine/runtime/engine.h"
#include "tools/bench/bench_registry.h"
#include "tools/bench/bench_report.h"
#include "tools/bench/process_memory.h"

namespace onecard::bench {
namespace {

using engine::Engine;

struct DecodeResult {
  double decode_tokens_per_second = 0;
  double prefill_seconds = 0;
  int64_t tokens = 0;
};

// Deterministic ids spread over the vocabulary, distinct per request.
std::vector<int32_t> SyntheticPrompt(int32_t num_tokens, int32_t index, int64_t vocab_size) {
  std::vector<int32_t> ids;
  uint64_t x = 0x9e3779b97f4a7c15ull * (index + 1);
  for (int32_t i = 0; i < num_tokens; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    ids.push_back(static_cast<int32_t>((x >> 33) % static_cast<uint64_t>(vocab_size)));
  }
  return ids;
}

absl::StatusOr<DecodeResult> MeasureDecode(Engine& engine, int32_t batch, int32_t prompt_tokens,
                                           int32_t new_tokens) {
  std::vector<absl::Time> first(batch, absl::InfinitePast());
  std::vector<absl::Time> last(batch, absl::InfinitePast());
  int64_t tokens = 0;
  absl::Status error;
  // A bar on a terminal, a line every few seconds in a log (progress.h).
  Progress progress(absl::StrCat("cpu-decode batch", batch), int64_t{batch} * new_tokens, "tokens");
  for (int32_t i = 0; i < batch; ++i) {
    engine::GenerationRequest r;
    r.prompt_token_ids = SyntheticPrompt(prompt_tokens, i, engine.config().vocab_size);
    r.sampling.temperature = 0.0f;
    r.stopping.max_tokens = new_tokens;
    r.stopping.ignore_eos = true;
    r.on_output = [&, i](const engine::StreamOutput& out) {
      const absl::Time now = absl::Now();
      if (first[i] == absl::InfinitePast()) first[i] = now;
      last[i] = now;
      tokens += static_cast<int64_t>(out.token_ids.size());
      progress.Add(static_cast<int64_t>(out.token_ids.size()));
      if (out.finish_reason == engine::FinishReason::kError) error = out.error;
    };
    RETURN_IF_ERROR(engine.Submit(std::move(r)).status());
  }
  const absl::Time start = absl::Now();
  while (true) {
    ASSIGN_OR_RETURN(bool ran, engine.Step());
    if (!ran) break;
  }
  progress.Done();
  RETURN_IF_ERROR(error);
  const absl::Time decode_start = *std::max_element(first.begin(), first.end());
  const absl::Time end = *std::max_element(last.begin(), last.end());
  const double seconds = absl::ToDoubleSeconds(end - decode_start);
  return DecodeResult{.decode_tokens_per_second = seconds > 0 ? (tokens - batch) / seconds : 0.0,
                      .prefill_seconds = absl::ToDoubleSeconds(decode_start - start),
                      .tokens = tokens};
}

absl::Status RunCpuDecode(const BenchOptions& options, BenchReporter& reporter) {
  if (options.batches.empty()) return absl::InvalidArgumentError("--batches: no batch size");
  const int32_t max_batch = *std::max_element(options.batches.begin(), options.batches.end());
  // Cases are named after the file and the weights' format:
  // "SmolLM2-135M-Instruct.Q4_1-batch1-native".
  const std::string model = std::filesystem::path(options.model_path).stem().string();
  std::error_code error;
  const auto file_bytes = std::filesystem::file_size(options.model_path, error);
  engine::EngineOptions engine_options;
  engine_options.model_path = options.model_path;
  engine_options.backend = "cpu";
  engine_options.num_threads = options.num_threads;
  ASSIGN_OR_RETURN(engine_options.cpu_weight_format,
                   engine::ParseCpuWeightFormat(options.cpu_weights, "--cpu-weights"));
  engine_options.max_num_seqs = max_batch;
  engine_options.max_batched_tokens = max_batch * options.prompt_tokens;
  engine_options.enable_prefix_caching = false;
  engine_options.start_thread = false;
  ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Create(engine_options));
  const int64_t rss_loaded = ResidentBytes();
  RETURN_IF_ERROR(MeasureDecode(*engine, 1, 8, 4).status());  // warm-up
  for (int32_t batch : options.batches) {
    ASSIGN_OR_RETURN(DecodeResult r,
                     MeasureDecode(*engine, batch, options.prompt_tokens, options.new_tokens));
    std::cerr << absl::StrFormat("cpu-decode batch%d: %d tokens, prefill %.2f s, %.2f tok/s\n",
                                 batch, r.tokens, r.prefill_seconds, r.decode_tokens_per_second);
    reporter.Add({.scenario = "cpu-decode",
                  .case_name = absl::StrCat(model, "-batch", batch, "-", options.cpu_weights),
                  .metric = "decode_tokens_per_second",
                  .value = r.decode_tokens_per_second,
                  .unit = "tok/s"});
  }
  // What the process holds once loaded (the weights, the tokenizer, the
  // libraries; the KV pool's pages become resident only as blocks are used)
  // and after both runs (plus the KV blocks they touched and the activations
  // of the largest step).
  const int64_t rss_run = ResidentBytes();
  for (auto [when, rss] : {std::pair{"loaded", rss_loaded}, {"after-runs", rss_run}}) {
    if (rss <= 0) continue;  // no VmRSS line (not Linux)
    const std::string rss_case = absl::StrCat(model, "-", options.cpu_weights, "-", when);
    reporter.Add({.scenario = "cpu-decode",
                  .case_name = rss_case,
                  .metric = "resident_bytes",
                  .value = static_cast<double>(rss),
                  .unit = "bytes"});
    if (!error && file_bytes > 0) {
      reporter.Add({.scenario = "cpu-decode",
                    .case_name = rss_case,
                    .metric = "resident_over_file",
                    .value = static_cast<double>(rss) / static_cast<double>(file_bytes),
                    .unit = "ratio"});
    }
  }
  return absl::OkStatus();
}

const bool kRegistered = RegisterScenario(
    {"cpu-decode",
     "decode tokens/s of a GGUF file on the cpu backend, batch 1 and 8 (--batches), and the RSS",
     &RunCpuDecode});

}  // namespace
}  // namespace onecard::bench
