// ModelConfig: the one description of a decoder model that every loader
// (HF config.json, GGUF metadata, synthetic shapes) produces and every backend
// consumes. Tested by tests/engine/model/model_config_test.cc.
#ifndef ONECARD_ENGINE_MODEL_MODEL_CONFIG_H_
#define ONECARD_ENGINE_MODEL_MODEL_CONFIG_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace onecard::engine {

enum class Architecture { kLlama, kQwen2, kMistral };

// Llama-3 style RoPE frequency scaling ("rope_type": "llama3").
struct RopeScaling {
  bool enabled = false;
  float factor = 1.0f;
  float low_freq_factor = 1.0f;
  float high_freq_factor = 4.0f;
  int64_t original_max_position_embeddings = 8192;
};

struct ModelConfig {
  Architecture architecture = Architecture::kLlama;
  std::string name;  // free text, e.g. "SmolLM2-135M-Instruct"
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;  // GQA: num_heads % num_kv_heads == 0
  int64_t head_dim = 0;      // usually hidden_size / num_heads
  int64_t max_position_embeddings = 2048;  // the context length served
  float rms_norm_eps = 1e-5f;
  float rope_theta = 10000.0f;
  RopeScaling rope_scaling;
  bool attention_bias = false;  // Qwen2: bias on q, k, v projections
  bool tie_word_embeddings = false;
  int32_t bos_token_id = -1;
  int32_t eos_token_id = -1;

  // Checks every field for consistency; the error names the field.
  absl::Status Validate() const;
};

std::string ArchitectureName(Architecture arch);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_MODEL_MODEL_CONFIG_H_
