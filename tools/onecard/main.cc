// onecard: the command-line tool.
//   onecard generate --model PATH --prompt TEXT [--max-tokens N] [--temperature T]
//                    [--top-p P] [--top-k K] [--seed S] [--threads N] [--json]
//   onecard chat --model PATH [--prompt TEXT] [--system TEXT] [same sampling flags]
//   onecard generate|chat --target HOST:PORT [--api-key KEY] [--priority CLASS] ...
//                    (a worker or router over gRPC instead of a local engine)
//   onecard inspect MODEL
// Flags are absl flags, parsed here only; "--max-tokens" and "--max_tokens"
// are the same flag. The subcommands live in generate_command.cc and
// inspect_command.cc; --target goes through remote_command.cc. Tested
// through tests/tools/onecard/ (the subcommands).
#include <cstdint>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "engine/runtime/engine.h"
#include "services/common/flag_names.h"
#include "tools/onecard/generate_command.h"
#include "tools/onecard/inspect_command.h"
#include "tools/onecard/remote_command.h"

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
ABSL_FLAG(int32_t, max_context, 0, "context length served; 0 = the model's");
ABSL_FLAG(std::string, target, "", "host:port of a worker or router; empty = a local engine");
ABSL_FLAG(std::string, api_key, "", "--target: the API key (router)");
ABSL_FLAG(std::string, priority, "", "--target: interactive, standard or batch");
ABSL_FLAG(bool, json, false, "print one JSON object (text, tokens, usage, timings)");

namespace {

constexpr char kUsage[] =
    "onecard generate|chat --model PATH [--prompt TEXT] [flags]\n"
    "onecard generate|chat --target HOST:PORT [--api-key KEY] [--prompt TEXT] [flags]\n"
    "onecard inspect MODEL";

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

int RunRemoteCommand(const std::string& command) {
  const onecard::tools::RemoteTarget target{.address = absl::GetFlag(FLAGS_target),
                                            .api_key = absl::GetFlag(FLAGS_api_key),
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
  if (!absl::GetFlag(FLAGS_target).empty()) return RunRemoteCommand(command);
  onecard::engine::EngineOptions options;
  options.model_path = absl::GetFlag(FLAGS_model);
  options.backend = absl::GetFlag(FLAGS_backend);
  options.num_threads = absl::GetFlag(FLAGS_threads);
  options.max_context = absl::GetFlag(FLAGS_max_context);
  if (options.model_path.empty()) return Fail(absl::InvalidArgumentError("--model: required"));
  auto engine = onecard::engine::Engine::Create(options);
  if (!engine.ok()) return Fail(engine.status());
  const onecard::tools::GenerateOptions generate = GenerateOptionsFromFlags();
  const absl::Status status =
      command == "generate"
          ? onecard::tools::RunGenerate(**engine, generate, std::cout, std::cerr)
          : onecard::tools::RunChat(**engine, generate, std::cin, std::cout, std::cerr);
  return status.ok() ? 0 : Fail(status);
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(kUsage);
  const std::vector<std::string> args = onecard::services::ParseFlags(argc, argv);
  const std::string command = args.size() >= 2 ? args[1] : "";
  if (command == "generate" || command == "chat") return RunEngineCommand(command);
  if (command == "inspect") {
    const std::string path = args.size() >= 3 ? args[2] : absl::GetFlag(FLAGS_model);
    if (path.empty()) return Fail(absl::InvalidArgumentError("inspect: MODEL path required"));
    const absl::Status status = onecard::tools::RunInspect(path, std::cout);
    return status.ok() ? 0 : Fail(status);
  }
  std::cerr << "usage:\n" << kUsage << "\n";
  return 2;
}
