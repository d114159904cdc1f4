// onecard: the command-line tool.
//   onecard generate --model PATH --prompt TEXT [--max-tokens N] [--temperature T]
//                    [--top-p P] [--top-k K] [--seed S] [--threads N] [--json]
//                    [--backend cpu|cuda] [--cpu-weights native|f32]
//                    [--kv-cache-dtype auto|bf16|fp8] [--fp8-compute w8a8|w8a16]
//   onecard chat --model PATH [--prompt TEXT] [--system TEXT] [same sampling and model flags]
//   onecard generate|chat --target HOST:PORT [--api-key KEY] [--priority CLASS] ...
//                    (a worker or router over gRPC instead of a local engine)
//   onecard inspect MODEL
//   onecard perplexity --model PATH --text FILE [--window N] [--stride N]
//                      [--text-tokens N] [same model flags]
//   onecard quantize --model HF_DIR|GGUF --out DIR [--format int4|fp8]
//                    [--method rtn|gptq] [--group-size 128]
//                    [--sym=true|false] [--calibration FILE] [--calibration-tokens N]
//                    [--damp 0.01] [--threads N] [--allow-requantize]
// Flags are absl flags, parsed here only (services/common/command_line.h:
// --help, "--max-tokens" = "--max_tokens", nearest-name hints). Arguments
// are checked before a model loads or a connection opens; exit 2 when they
// are wrong. The API key may come from $ONECARD_API_KEY. The subcommands
// live in generate_command.cc, inspect_command.cc, perplexity_command.cc and
// quantize_command.cc; --target goes through
// remote_command.cc. Tested through tests/tools/onecard/ (the subcommands)
// and tests/integration/cli_test.cc (this main: help, argument errors).
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/runtime/engine.h"
#include "engine/runtime/request_validation.h"
#include "services/common/command_line.h"
#include "tools/onecard/generate_command.h"
#include "tools/onecard/inspect_command.h"
#include "tools/onecard/perplexity_command.h"
#include "tools/onecard/quantize_command.h"
#include "tools/onecard/remote_command.h"
#include "tools/onecard/remote_generate.h"

ABSL_FLAG(std::string, model, "", "model: a .gguf file or an HF checkpoint directory");
ABSL_FLAG(std::string, prompt, "", "the prompt (chat: the user's message; empty = interactive)");
ABSL_FLAG(std::string, system, "", "chat: a system message");
ABSL_FLAG(int32_t, max_tokens, 256, "most tokens to generate");
ABSL_FLAG(double, temperature, 0.2, "sampling temperature; 0 = greedy");
ABSL_FLAG(double, top_p, 0.9, "nucleus sampling mass, (0, 1]");
ABSL_FLAG(int32_t, top_k, 0, "sample among the k most likely; 0 = off");
ABSL_FLAG(double, min_p, 0.0, "drop tokens below min_p times the most likely's probability");
ABSL_FLAG(double, repetition_penalty, 1.0, "HF repetition penalty; 1 = off");
ABSL_FLAG(int64_t, seed, -1, "sampling seed; -1 = random");
ABSL_FLAG(int32_t, threads, 0, "cpu backend threads; 0 = all cores");
ABSL_FLAG(std::string, backend, "cpu", "cpu or cuda");
ABSL_FLAG(std::string, cpu_weights, "native",
          "cpu backend: native (a GGUF file's quantized weights as stored, 8-bit activations) or "
          "f32 (every weight dequantized to fp32: the reference)");
ABSL_FLAG(std::string, kv_cache_dtype, "auto",
          "how the KV cache holds K and V: auto (the backend's own: cpu fp32, cuda BF16), bf16, "
          "or fp8 (E4M3, scales from the checkpoint or calibrated at load; cpu backend)");
ABSL_FLAG(std::string, fp8_compute, "w8a8",
          "cuda backend: how FP8 projections multiply in steps past the GEMV: w8a8 (activations "
          "in E4M3, FP8 tensor cores) or w8a16 (weights dequantized to BF16)");
ABSL_FLAG(int32_t, max_context, 0, "context length served; 0 = the model's");
ABSL_FLAG(std::string, target, "", "host:port of a worker or router; empty = a local engine");
ABSL_FLAG(std::string, api_key, "", "--target: the API key (router); default $ONECARD_API_KEY");
ABSL_FLAG(std::string, priority, "", "--target: interactive, standard or batch");
ABSL_FLAG(bool, json, false, "print one JSON object (text, tokens, usage, timings)");
ABSL_FLAG(std::string, text, "",
          "perplexity: the text file (UTF-8), encoded without special tokens");
ABSL_FLAG(int32_t, window, 1024, "perplexity: tokens a forward pass sees (HF's max_length)");
ABSL_FLAG(int32_t, stride, 512, "perplexity: tokens the window moves, [1, --window]");
ABSL_FLAG(int64_t, text_tokens, 0, "perplexity: score the text's first N tokens; 0 = all");
ABSL_FLAG(std::string, out, "", "quantize: the output folder (created; its files overwritten)");
ABSL_FLAG(onecard::tools::QuantizeFormat, format, onecard::tools::QuantizeFormat::kInt4,
          "quantize: int4 (4-bit GPTQ folder) or fp8 (per-channel E4M3, compressed-tensors "
          "float-quantized, dynamic per-token activations)");
ABSL_FLAG(std::string, method, "rtn",
          "quantize: rtn (round-to-nearest) or gptq (error-compensating, needs --calibration)");
ABSL_FLAG(int32_t, group_size, 128, "quantize: columns a scale covers; -1 = one group a row");
ABSL_FLAG(bool, sym, true, "quantize: symmetric (zero point 8) or not (--sym=false)");
ABSL_FLAG(std::string, calibration, "", "quantize --method gptq: the calibration text file");
ABSL_FLAG(int64_t, calibration_tokens, 2048, "quantize --method gptq: the text's first N tokens");
ABSL_FLAG(double, damp, 0.01, "quantize --method gptq: dampening, a fraction of mean(diag H)");
ABSL_FLAG(bool, allow_requantize, false,
          "quantize: also quantize projections a GGUF file stores in a quantized type "
          "(their values are rounded twice)");

namespace {

const onecard::services::CommandLineSpec kCommandLine = {
    .program = "onecard",
    .usage = {"generate --model PATH --prompt TEXT [flags]",
              "chat --model PATH [--prompt TEXT] [--system TEXT] [flags]",
              "generate|chat --target HOST:PORT [--api-key KEY] [flags]", "inspect MODEL",
              "perplexity --model PATH --text FILE [--window N] [--stride N] [--backend cuda]",
              "quantize --model HF_DIR|GGUF --out DIR [--method gptq --calibration FILE] [flags]",
              "help"},
    .description =
        "Runs a model on this machine (--model) or asks a running worker or router\n"
        "(--target) over gRPC. Text streams to stdout as it is generated.",
    .subcommands = {{"generate", "complete --prompt as raw text and stream the completion"},
                    {"chat", "chat with the model's template (no --prompt: one message a line)"},
                    {"inspect", "show a model file: architecture, tensors, formats, bytes"},
                    {"perplexity",
                     "a model's perplexity over a text file (sliding windows); JSON summary"},
                    {"quantize",
                     "an HF folder or GGUF file to a 4-bit GPTQ folder (rtn or gptq) or an FP8 one "
                     "(--format fp8); JSON summary"},
                    {"help", "print this help"}},
    .groups = {{"Model (local engine)",
                {"model", "backend", "threads", "cpu_weights", "kv_cache_dtype", "fp8_compute",
                 "max_context"}},
               {"Remote (a worker or router)", {"target", "api_key", "priority"}},
               {"Prompt", {"prompt", "system"}},
               {"Sampling",
                {"max_tokens", "temperature", "top_p", "top_k", "min_p", "repetition_penalty",
                 "seed"}},
               {"Output", {"json"}},
               {"Perplexity", {"text", "window", "stride", "text_tokens"}},
               {"Quantize",
                {"out", "format", "method", "group_size", "sym", "calibration",
                 "calibration_tokens", "damp", "allow_requantize"}}},
    .epilog =
        "Environment:\n"
        "  ONECARD_API_KEY  the API key for --target when --api-key is not given\n"
        "\n"
        "Examples:\n"
        "  onecard generate --model models/SmolLM2-135M-Instruct.Q4_1.gguf \\\n"
        "      --prompt \"The capital of France is\" --max-tokens 16\n"
        "  onecard chat --target 127.0.0.1:50050 --prompt \"Hello\"\n"
        "  onecard perplexity --model models/SmolLM2-135M-Instruct.Q4_1.gguf \\\n"
        "      --text tests/data/text/sqlite-docs.txt --window 1024 --stride 512\n"
        "  onecard quantize --model models/SmolLM2-135M-Instruct --out /tmp/smollm2-gptq \\\n"
        "      --group-size 64\n"
        "\n"
        "Exit status: 0 done, 1 failed, 2 bad arguments."};

onecard::tools::GenerateOptions GenerateOptionsFromFlags() {
  onecard::tools::GenerateOptions o;
  o.prompt = absl::GetFlag(FLAGS_prompt);
  o.system = absl::GetFlag(FLAGS_system);
  o.max_tokens = absl::GetFlag(FLAGS_max_tokens);
  o.json = absl::GetFlag(FLAGS_json);
  o.sampling.temperature = static_cast<float>(absl::GetFlag(FLAGS_temperature));
  o.sampling.top_p = static_cast<float>(absl::GetFlag(FLAGS_top_p));
  o.sampling.top_k = absl::GetFlag(FLAGS_top_k);
  o.sampling.min_p = static_cast<float>(absl::GetFlag(FLAGS_min_p));
  o.sampling.repetition_penalty = static_cast<float>(absl::GetFlag(FLAGS_repetition_penalty));
  const int64_t seed = absl::GetFlag(FLAGS_seed);
  o.sampling.seed = seed >= 0 ? static_cast<uint64_t>(seed) : std::random_device{}();
  return o;
}

int Fail(const absl::Status& status) {
  std::cerr << "onecard: " << status << "\n";
  return 1;
}

int UsageError(const absl::Status& status) {
  std::cerr << "onecard: " << status.message() << " (see onecard --help)\n";
  return 2;
}

std::string ApiKey() {
  const std::string flag = absl::GetFlag(FLAGS_api_key);
  if (!flag.empty()) return flag;
  const char* env = std::getenv("ONECARD_API_KEY");
  return env == nullptr ? "" : env;
}

// The local engine's options from the flags of generate and chat;
// InvalidArgument naming the flag.
absl::StatusOr<onecard::engine::EngineOptions> EngineOptionsFromFlags() {
  onecard::engine::EngineOptions options;
  options.model_path = absl::GetFlag(FLAGS_model);
  options.backend = absl::GetFlag(FLAGS_backend);
  options.num_threads = absl::GetFlag(FLAGS_threads);
  options.max_context = absl::GetFlag(FLAGS_max_context);
  if (options.backend != "cpu" && options.backend != "cuda") {
    return absl::InvalidArgumentError(
        absl::StrCat("--backend: \"", options.backend, "\" is not one of cpu, cuda"));
  }
  if (options.num_threads < 0 || options.max_context < 0) {
    return absl::InvalidArgumentError("--threads and --max-context: must not be negative");
  }
  ASSIGN_OR_RETURN(
      options.cpu_weight_format,
      onecard::engine::ParseCpuWeightFormat(absl::GetFlag(FLAGS_cpu_weights), "--cpu-weights"));
  ASSIGN_OR_RETURN(
      options.kv_cache_dtype,
      onecard::engine::ParseKvCacheDtype(absl::GetFlag(FLAGS_kv_cache_dtype), "--kv-cache-dtype"));
  ASSIGN_OR_RETURN(options.fp8_compute, onecard::engine::ParseFp8Compute(
                                            absl::GetFlag(FLAGS_fp8_compute), "--fp8-compute"));
  return options;
}

// What can be wrong with the flags of generate and chat, found before a
// model loads or a connection opens.
absl::Status CheckGenerateFlags(const std::string& command,
                                const onecard::tools::GenerateOptions& o) {
  const bool remote = !absl::GetFlag(FLAGS_target).empty();
  if (!remote && absl::GetFlag(FLAGS_model).empty()) {
    return absl::InvalidArgumentError("--model PATH or --target HOST:PORT: one is required");
  }
  if (command == "generate" && o.prompt.empty()) {
    return absl::InvalidArgumentError("generate: --prompt is required");
  }
  if (o.max_tokens < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--max-tokens: ", o.max_tokens, " < 1"));
  }
  if (absl::Status s = onecard::engine::ValidateSampling(o.sampling); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--", s.message().substr(9)));
  }
  if (absl::Status s = EngineOptionsFromFlags().status(); !s.ok()) return s;
  return onecard::tools::CheckPriorityName(absl::GetFlag(FLAGS_priority));
}

int RunRemoteCommand(const std::string& command) {
  const onecard::tools::RemoteTarget target{.address = absl::GetFlag(FLAGS_target),
                                            .api_key = ApiKey(),
                                            .priority = absl::GetFlag(FLAGS_priority),
                                            .random_seed = absl::GetFlag(FLAGS_seed) < 0};
  const onecard::tools::GenerateOptions generate = GenerateOptionsFromFlags();
  const absl::Status status =
      command == "generate"
          ? onecard::tools::RunRemoteGenerate(target, generate, std::cout, std::cerr)
          : onecard::tools::RunRemoteChat(target, generate, std::cin, std::cout, std::cerr);
  return status.ok() ? 0 : Fail(status);
}

int RunEngineCommand(const std::string& command) {
  const absl::Status flags = CheckGenerateFlags(command, GenerateOptionsFromFlags());
  if (!flags.ok()) return UsageError(flags);
  if (!absl::GetFlag(FLAGS_target).empty()) return RunRemoteCommand(command);
  const absl::StatusOr<onecard::engine::EngineOptions> options = EngineOptionsFromFlags();
  if (!options.ok()) return UsageError(options.status());  // checked by CheckGenerateFlags
  auto engine = onecard::engine::Engine::Create(*options);
  if (!engine.ok()) return Fail(engine.status());
  const onecard::tools::GenerateOptions generate = GenerateOptionsFromFlags();
  const absl::Status status =
      command == "generate"
          ? onecard::tools::RunGenerate(**engine, generate, std::cout, std::cerr)
          : onecard::tools::RunChat(**engine, generate, std::cin, std::cout, std::cerr);
  return status.ok() ? 0 : Fail(status);
}

int RunQuantizeCommand(const std::vector<std::string>& args) {
  const onecard::tools::QuantizeCommandOptions options = {
      .model_path = absl::GetFlag(FLAGS_model),
      .out_dir = absl::GetFlag(FLAGS_out),
      .format = absl::GetFlag(FLAGS_format),
      .method = absl::GetFlag(FLAGS_method),
      .group_size = absl::GetFlag(FLAGS_group_size),
      .sym = absl::GetFlag(FLAGS_sym),
      .calibration_path = absl::GetFlag(FLAGS_calibration),
      .calibration_tokens = absl::GetFlag(FLAGS_calibration_tokens),
      .damp = absl::GetFlag(FLAGS_damp),
      .num_threads = absl::GetFlag(FLAGS_threads),
      .allow_requantize = absl::GetFlag(FLAGS_allow_requantize)};
  if (args.size() > 2) {  // "--sym false" leaves "false" here: absl's bools take "="
    return UsageError(absl::InvalidArgumentError(absl::StrCat(
        "quantize: unexpected argument \"", args[2], "\" (a bool flag takes \"=\": --sym=false)")));
  }
  if (absl::Status s = onecard::tools::CheckQuantizeOptions(options); !s.ok()) {
    return UsageError(s);
  }
  const absl::Status status = onecard::tools::RunQuantize(options, std::cout);
  if (status.ok()) return 0;
  if (!onecard::tools::IsQuantizeUsageError(status)) return Fail(status);
  std::cerr << "onecard: " << status.message() << "\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  const onecard::services::CommandLine cli =
      onecard::services::ParseCommandLine(kCommandLine, argc, argv);
  if (cli.exit_code) return *cli.exit_code;
  const std::vector<std::string>& args = cli.args;
  const std::string command = args.size() >= 2 ? args[1] : "";
  if (command == "generate" || command == "chat") return RunEngineCommand(command);
  if (command == "inspect") {
    const std::string path = args.size() >= 3 ? args[2] : absl::GetFlag(FLAGS_model);
    if (path.empty()) return UsageError(absl::InvalidArgumentError("inspect: MODEL path required"));
    const absl::Status status = onecard::tools::RunInspect(path, std::cout);
    return status.ok() ? 0 : Fail(status);
  }
  if (command == "perplexity") {
    const onecard::tools::PerplexityCommandOptions options = {
        .model_path = absl::GetFlag(FLAGS_model),
        .text_path = absl::GetFlag(FLAGS_text),
        .backend = absl::GetFlag(FLAGS_backend),
        .num_threads = absl::GetFlag(FLAGS_threads),
        .windows = {.window = absl::GetFlag(FLAGS_window), .stride = absl::GetFlag(FLAGS_stride)},
        .text_tokens = absl::GetFlag(FLAGS_text_tokens),
        .kv_cache_dtype = absl::GetFlag(FLAGS_kv_cache_dtype),
        .cpu_weights = absl::GetFlag(FLAGS_cpu_weights),
        .fp8_compute = absl::GetFlag(FLAGS_fp8_compute)};
    if (absl::Status s = onecard::tools::CheckPerplexityOptions(options); !s.ok()) {
      return UsageError(s);
    }
    const absl::Status status = onecard::tools::RunPerplexity(options, std::cout);
    return status.ok() ? 0 : Fail(status);
  }
  if (command == "quantize") return RunQuantizeCommand(args);
  if (command.empty()) return UsageError(absl::InvalidArgumentError("a subcommand is required"));
  std::string message = absl::StrCat("unknown subcommand \"", command, "\"");
  std::vector<std::string> names;
  for (const onecard::services::Subcommand& c : kCommandLine.subcommands) names.push_back(c.name);
  if (std::optional<std::string> near = onecard::services::NearestName(command, names)) {
    absl::StrAppend(&message, "; did you mean ", *near, "?");
  }
  return UsageError(absl::InvalidArgumentError(message));
}
