// HF config.json -> ModelConfig for LlamaForCausalLM, Qwen2ForCausalLM and
// MistralForCausalLM: sizes, GQA, head_dim, tied embeddings, rope_theta (also
// from transformers v5 "rope_parameters"), llama3 rope scaling, rms eps, Qwen2
// q/k/v bias, bos/eos ids (an eos list gives its first id). Mistral / Qwen2
// sliding windows cap the served context at the window, where they change
// nothing. Errors name the file and the field. Tested by
// tests/engine/model/hf_config_test.cc.
#ifndef ONECARD_ENGINE_MODEL_HF_CONFIG_H_
#define ONECARD_ENGINE_MODEL_HF_CONFIG_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "engine/model/model_config.h"

namespace onecard::engine {

// `source` names the text in errors (usually the config.json path); the
// model's name falls back to the folder holding it.
absl::StatusOr<ModelConfig> ParseHfConfig(std::string_view json_text, const std::string& source);

absl::StatusOr<ModelConfig> LoadHfConfig(const std::string& config_json_path);

// The config.json (pretty-printed JSON) that ParseHfConfig reads back as
// `config`: the architecture's class and model_type, the sizes, rope_theta
// and llama3 rope_scaling, rms_norm_eps, tied embeddings, bos/eos ids (null
// when -1), max_position_embeddings, no sliding window, "torch_dtype"
// float16, and "_name_or_path" the name. Floats are written in their
// shortest decimal form that reads back as the same float.
std::string HfConfigJson(const ModelConfig& config);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_MODEL_HF_CONFIG_H_
