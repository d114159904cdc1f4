// LoadRoutingModel: what the router needs of a model — its tokenizer, chat
// template, context length and vocabulary — read from the model file (a
// .gguf or an HF directory) without loading any weights (the checkpoint is
// only mapped), or from an HF folder holding only config.json and the
// tokenizer files (the Helm chart's router.tokenizer mount), or a synthetic
// model path ("synthetic:llama3-8b": its shape and synthetic tokenizer).
// Tested by tests/router/model_loader_test.cc on SmolLM2.
#ifndef ONECARD_ROUTER_MODEL_LOADER_H_
#define ONECARD_ROUTER_MODEL_LOADER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/tokenizer/tokenizer.h"
#include "router/request_prep.h"

namespace onecard::router {

struct RoutingModel {
  std::unique_ptr<engine::Tokenizer> tokenizer;
  engine::ChatTemplate chat_template;
  ModelSpec spec;
};

// `name` is what clients put in `model`; empty: the file's stem (as the
// worker does). Errors name the path.
absl::StatusOr<RoutingModel> LoadRoutingModel(const std::string& path, const std::string& name);

// "models/SmolLM2-135M-Instruct.Q4_1.gguf" -> "SmolLM2-135M-Instruct.Q4_1";
// a directory -> its last component.
std::string ModelNameFromPath(const std::string& path);

}  // namespace onecard::router

#endif  // ONECARD_ROUTER_MODEL_LOADER_H_
