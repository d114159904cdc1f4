// LoadRoutingModel (see model_loader.h). Tested by
// tests/router/model_loader_test.cc.
#include "router/model_loader.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/model/checkpoint.h"

namespace onecard::router {

std::string ModelNameFromPath(const std::string& path) {
  std::filesystem::path p(path);
  if (!p.has_filename()) p = p.parent_path();  // "dir/" -> "dir"
  if (p.extension() == ".gguf") return p.stem().string();
  return p.filename().string();
}

absl::StatusOr<RoutingModel> LoadRoutingModel(const std::string& path, const std::string& name) {
  absl::StatusOr<engine::Checkpoint> checkpoint = engine::OpenCheckpoint(path);
  if (!checkpoint.ok()) {
    return absl::Status(checkpoint.status().code(),
                        absl::StrCat("model_path ", path, ": ", checkpoint.status().message()));
  }
  std::unique_ptr<engine::Tokenizer> tokenizer;
  if (const engine::GgufFile* gguf = checkpoint->gguf()) {
    ASSIGN_OR_RETURN(tokenizer, engine::Tokenizer::FromGguf(*gguf));
  } else {
    ASSIGN_OR_RETURN(tokenizer, engine::Tokenizer::FromHfJson(checkpoint->tokenizer_json_path,
                                                              checkpoint->tokenizer_config_path));
  }
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
