// ModelConfigFromGguf: reads the llama.cpp metadata keys of one architecture.
// Llama-3.1-style GGUFs that store RoPE scaling as per-frequency factors
// (a rope_freqs.weight tensor) are refused with a clear error: ModelConfig
// describes llama3 scaling by its parameters. Tested by
// tests/engine/model/gguf_config_test.cc.
#include "engine/model/gguf_config.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"

namespace onecard::engine {
namespace {

// An integer key that may be absent.
absl::StatusOr<std::optional<int64_t>> OptionalInt(const GgufFile& g, const std::string& key) {
  if (g.FindMetadata(key) == nullptr) return std::optional<int64_t>();
  ASSIGN_OR_RETURN(int64_t v, g.GetInt(key));
  return std::optional<int64_t>(v);
}

absl::StatusOr<float> FloatOr(const GgufFile& g, const std::string& key, float fallback) {
  if (g.FindMetadata(key) == nullptr) return fallback;
  ASSIGN_OR_RETURN(double v, g.GetFloat(key));
  return static_cast<float>(v);
}

absl::Status KeyError(const GgufFile& g, const std::string& key, absl::string_view what,
                      bool unsupported = false) {
  std::string message = absl::StrCat(g.path(), ": metadata key '", key, "' ", what);
  return unsupported ? absl::UnimplementedError(message) : absl::InvalidArgumentError(message);
}

absl::StatusOr<Architecture> ReadArchitecture(const GgufFile& g, std::string* arch) {
  ASSIGN_OR_RETURN(*arch, g.GetString("general.architecture"));
  if (*arch == "llama") return Architecture::kLlama;
  if (*arch == "qwen2") return Architecture::kQwen2;
  return KeyError(g, "general.architecture",
                  absl::StrCat("is \"", *arch, "\"; supported: llama, qwen2"), true);
}

absl::Status ReadSizes(const GgufFile& g, const std::string& a, ModelConfig* c) {
  ASSIGN_OR_RETURN(c->max_position_embeddings, g.GetInt(a + ".context_length"));
  ASSIGN_OR_RETURN(c->hidden_size, g.GetInt(a + ".embedding_length"));
  ASSIGN_OR_RETURN(c->num_layers, g.GetInt(a + ".block_count"));
  ASSIGN_OR_RETURN(c->intermediate_size, g.GetInt(a + ".feed_forward_length"));
  ASSIGN_OR_RETURN(c->num_heads, g.GetInt(a + ".attention.head_count"));
  if (c->num_heads <= 0) return KeyError(g, a + ".attention.head_count", "must be positive");
  ASSIGN_OR_RETURN(auto kv_heads, OptionalInt(g, a + ".attention.head_count_kv"));
  c->num_kv_heads = kv_heads.value_or(c->num_heads);
  ASSIGN_OR_RETURN(auto key_length, OptionalInt(g, a + ".attention.key_length"));
  c->head_dim = key_length.value_or(c->hidden_size / c->num_heads);
  ASSIGN_OR_RETURN(auto rope_dims, OptionalInt(g, a + ".rope.dimension_count"));
  if (rope_dims.has_value() && *rope_dims != c->head_dim) {
    return KeyError(g, a + ".rope.dimension_count",
                    absl::StrCat("is ", *rope_dims, ", not head_dim ", c->head_dim,
                                 " (partial rotary embeddings are not supported)"),
                    true);
  }
  ASSIGN_OR_RETURN(c->rms_norm_eps, FloatOr(g, a + ".attention.layer_norm_rms_epsilon", 1e-5f));
  ASSIGN_OR_RETURN(c->rope_theta, FloatOr(g, a + ".rope.freq_base", 10000.0f));
  return absl::OkStatus();
}

absl::Status ReadRopeScaling(const GgufFile& g, const std::string& a) {
  std::string key = a + ".rope.scaling.type";
  if (g.FindMetadata(key) != nullptr) {
    ASSIGN_OR_RETURN(std::string type, g.GetString(key));
    if (type != "none") {
      return KeyError(g, key, absl::StrCat("is \"", type, "\"; supported: none"), true);
    }
  }
  if (g.Find("rope_freqs.weight") != nullptr) {
    return absl::UnimplementedError(
        absl::StrCat(g.path(),
                     ": tensor 'rope_freqs.weight' (per-frequency RoPE factors) is not supported; "
                     "load the HF checkpoint, whose config.json gives llama3 rope_scaling"));
  }
  return absl::OkStatus();
}

absl::Status ReadTokens(const GgufFile& g, const std::string& a, ModelConfig* c) {
  const GgufValue* tokens = g.FindMetadata("tokenizer.ggml.tokens");
  if (tokens != nullptr) {
    const auto* array = std::get_if<GgufValue::Array>(&tokens->value);
    const auto* strings = array ? std::get_if<std::vector<std::string>>(array) : nullptr;
    if (strings == nullptr) return KeyError(g, "tokenizer.ggml.tokens", "is not a string array");
    c->vocab_size = static_cast<int64_t>(strings->size());
  } else {
    ASSIGN_OR_RETURN(c->vocab_size, g.GetInt(a + ".vocab_size"));
  }
  for (auto [key, id] : {std::pair{"tokenizer.ggml.bos_token_id", &c->bos_token_id},
                         std::pair{"tokenizer.ggml.eos_token_id", &c->eos_token_id}}) {
    ASSIGN_OR_RETURN(auto value, OptionalInt(g, key));
    if (value.has_value() && (*value < 0 || *value >= c->vocab_size)) {
      return KeyError(g, key,
                      absl::StrCat("is ", *value, ", outside the vocabulary of ", c->vocab_size));
    }
    *id = static_cast<int32_t>(value.value_or(-1));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ModelConfig> ModelConfigFromGguf(const GgufFile& gguf) {
  ModelConfig c;
  std::string arch;
  ASSIGN_OR_RETURN(c.architecture, ReadArchitecture(gguf, &arch));
  RETURN_IF_ERROR(ReadSizes(gguf, arch, &c));
  RETURN_IF_ERROR(ReadRopeScaling(gguf, arch));
  RETURN_IF_ERROR(ReadTokens(gguf, arch, &c));
  c.attention_bias = c.architecture == Architecture::kQwen2;
  c.tie_word_embeddings = gguf.Find("output.weight") == nullptr;
  if (gguf.FindMetadata("general.name") != nullptr) {
    ASSIGN_OR_RETURN(c.name, gguf.GetString("general.name"));
  }
  absl::Status valid = c.Validate();
  if (!valid.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(gguf.path(), ": ", valid.message()));
  }
  return c;
}

}  // namespace onecard::engine
