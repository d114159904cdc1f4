// LoadRoutingModel (see model_loader.h). Tested by
// tests/router/model_loader_test.cc.
#include "router/model_loader.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/model/checkpoint.h"
#include "engine/model/hf_config.h"

namespace onecard::router {

std::string ModelNameFromPath(const std::string& path) {
  std::filesystem::path p(path);
  if (!p.has_filename()) p = p.parent_path();  // "dir/" -> "dir"
  if (p.extension() == ".gguf") return p.stem().string();
  return p.filename().string();
}

namespace {

// An HF folder holding the router's files only (config.json, tokenizer.json,
// tokenizer_config.json; no weights), as the Helm chart's tokenizer-only
// mount gives it: the checkpoint as OpenCheckpoint would give it, without
// the safetensors it would open.
absl::StatusOr<engine::Checkpoint> OpenTokenizerFolder(const std::string& dir) {
  engine::Checkpoint checkpoint;
  checkpoint.path = dir;
  checkpoint.format = engine::CheckpointFormat::kSafetensors;
  ASSIGN_OR_RETURN(checkpoint.config, engine::LoadHfConfig(dir + "/config.json"));
  checkpoint.tokenizer_json_path = dir + "/tokenizer.json";
  if (std::filesystem::is_regular_file(dir + "/tokenizer_config.json")) {
    checkpoint.tokenizer_config_path = dir + "/tokenizer_config.json";
  }
  return checkpoint;
}

bool IsTokenizerFolder(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_directory(path, ec) ||
      !std::filesystem::is_regular_file(path + "/tokenizer.json", ec)) {
    return false;
  }
  for (const auto& entry : std::filesystem::directory_iterator(path, ec)) {
    if (entry.path().extension() == ".safetensors") return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<RoutingModel> LoadRoutingModel(const std::string& path, const std::string& name) {
  absl::StatusOr<engine::Checkpoint> checkpoint =
      IsTokenizerFolder(path) ? OpenTokenizerFolder(path) : engine::OpenCheckpoint(path);
  if (!checkpoint.ok()) {
    return absl::Status(checkpoint.status().code(),
                        absl::StrCat("model_path ", path, ": ", checkpoint.status().message()));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<engine::Tokenizer> tokenizer,
                   engine::OpenTokenizer(*checkpoint));
  ASSIGN_OR_RETURN(engine::ChatTemplate chat_template,
                   engine::ChatTemplate::ForTokenizer(*tokenizer));
  const engine::ModelConfig& config = checkpoint->config;
  ModelSpec spec;
  spec.name = name.empty() ? ModelNameFromPath(path) : name;
  spec.architecture = engine::ArchitectureName(config.architecture);
  spec.context_length = static_cast<int32_t>(config.max_position_embeddings);
  // The embedding's rows: ids the model accepts (the tokenizer may know fewer).
  spec.vocab_size =
      static_cast<int32_t>(config.vocab_size > 0 ? config.vocab_size : tokenizer->vocab_size());
  spec.eos_token_id = tokenizer->eos_id();
  return RoutingModel{std::move(tokenizer), std::move(chat_template), std::move(spec)};
}

}  // namespace onecard::router
