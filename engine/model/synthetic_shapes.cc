// The synthetic shapes (see synthetic_shapes.h), from the models' published
// config.json files, and synthetic model paths. Tested by
// tests/gpu/memory_plan_test.cc (SyntheticShapesTest) and
// tests/engine/model/checkpoint_test.cc (synthetic model paths).
#include "engine/model/synthetic_shapes.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "engine/common/status_macros.h"

namespace onecard::engine {
namespace {

ModelConfig Llama3(std::string name, int64_t hidden, int64_t inter, int64_t layers, int64_t heads) {
  ModelConfig c;
  c.architecture = Architecture::kLlama;
  c.name = std::move(name);
  c.vocab_size = 128256;
  c.hidden_size = hidden;
  c.intermediate_size = inter;
  c.num_layers = layers;
  c.num_heads = heads;
  c.num_kv_heads = 8;
  c.head_dim = 128;
  c.max_position_embeddings = 8192;
  c.rms_norm_eps = 1e-5f;
  c.rope_theta = 500000.0f;
  c.rope_scaling = RopeScaling{.enabled = true,
                               .factor = 8.0f,
                               .low_freq_factor = 1.0f,
                               .high_freq_factor = 4.0f,
                               .original_max_position_embeddings = 8192};
  c.bos_token_id = 128000;
  c.eos_token_id = 128001;
  return c;
}

ModelConfig Qwen2_72b() {
  ModelConfig c;
  c.architecture = Architecture::kQwen2;
  c.name = "qwen2-72b";
  c.vocab_size = 152064;
  c.hidden_size = 8192;
  c.intermediate_size = 29568;
  c.num_layers = 80;
  c.num_heads = 64;
  c.num_kv_heads = 8;
  c.head_dim = 128;
  c.max_position_embeddings = 32768;
  c.rms_norm_eps = 1e-6f;
  c.rope_theta = 1000000.0f;
  c.attention_bias = true;
  c.eos_token_id = 151643;
  return c;
}

ModelConfig MistralLarge() {
  ModelConfig c;
  c.architecture = Architecture::kMistral;
  c.name = "mistral-large-123b";
  c.vocab_size = 32768;
  c.hidden_size = 12288;
  c.intermediate_size = 28672;
  c.num_layers = 88;
  c.num_heads = 96;
  c.num_kv_heads = 8;
  c.head_dim = 128;
  c.max_position_embeddings = 32768;
  c.rms_norm_eps = 1e-5f;
  c.rope_theta = 1000000.0f;
  c.bos_token_id = 1;
  c.eos_token_id = 2;
  return c;
}

}  // namespace

std::vector<std::string> SyntheticModelNames() {
  return {"llama3-8b", "llama3-70b", "qwen2-72b", "mistral-large-123b"};
}

absl::StatusOr<ModelConfig> SyntheticModelConfig(std::string_view name) {
  if (name == "llama3-8b") return Llama3("llama3-8b", 4096, 14336, 32, 32);
  if (name == "llama3-70b") return Llama3("llama3-70b", 8192, 28672, 80, 64);
  if (name == "qwen2-72b") return Qwen2_72b();
  if (name == "mistral-large-123b") return MistralLarge();
  return absl::NotFoundError(
      absl::StrCat("unknown synthetic model '", std::string(name),
                   "'; known: ", absl::StrJoin(SyntheticModelNames(), ", ")));
}

bool IsSyntheticModelPath(std::string_view path) { return path.starts_with(kSyntheticPathPrefix); }

absl::StatusOr<SyntheticModelPath> ParseSyntheticModelPath(std::string_view path) {
  if (!IsSyntheticModelPath(path)) {
    return absl::InvalidArgumentError(
        absl::StrCat("model path \"", std::string(path), "\": not synthetic:<shape>[:<weights>]"));
  }
  const std::string rest(path.substr(kSyntheticPathPrefix.size()));
  const std::vector<std::string> parts = absl::StrSplit(rest, ':');
  if (parts.size() > 2 || parts[0].empty() || (parts.size() == 2 && parts[1].empty())) {
    return absl::InvalidArgumentError(
        absl::StrCat("model path \"", std::string(path),
                     "\": expected synthetic:<shape>[:<weights>], e.g. synthetic:llama3-8b or "
                     "synthetic:llama3-70b:int4"));
  }
  RETURN_IF_ERROR(SyntheticModelConfig(parts[0]).status());
  SyntheticModelPath out{.shape = parts[0]};
  if (parts.size() == 2) out.weights = parts[1];
  return out;
}

int64_t MatmulParameters(const ModelConfig& c) {
  const int64_t qkv = (c.num_heads + 2 * c.num_kv_heads) * c.head_dim * c.hidden_size;
  const int64_t o = c.hidden_size * c.num_heads * c.head_dim;
  const int64_t mlp = 3 * c.hidden_size * c.intermediate_size;
  return c.num_layers * (qkv + o + mlp) + c.vocab_size * c.hidden_size;
}

}  // namespace onecard::engine
