// ModelConfigFromGguf: reads the llama.cpp metadata keys of one architecture.
// Llama-3.1-style GGUFs store llama3 RoPE scaling as per-frequency factors (a
// rope_freqs.weight tensor written by llama.cpp's converter); the parameters
// are recovered from them and checked to reproduce every factor. Tested by
// tests/engine/model/gguf_config_test.cc.
#include "engine/model/gguf_config.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <optional>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/model/model_weights.h"

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

// The factor by which llama3 scaling divides the frequency of RoPE pair i
// (transformers' _compute_llama3_parameters, llama.cpp's rope_freqs).
double Llama3Factor(const RopeScaling& r, double theta, int64_t head_dim, int64_t i) {
  double inv_freq = 1.0 / std::pow(theta, 2.0 * static_cast<double>(i) / head_dim);
  double wavelen = 2.0 * std::numbers::pi / inv_freq;
  double orig = static_cast<double>(r.original_max_position_embeddings);
  if (wavelen < orig / r.high_freq_factor) return 1.0;
  if (wavelen > orig / r.low_freq_factor) return r.factor;
  double smooth = (orig / wavelen - r.low_freq_factor) / (r.high_freq_factor - r.low_freq_factor);
  return 1.0 / ((1.0 - smooth) / r.factor + smooth);
}

// Fits low/high_freq_factor to the factors strictly between 1 and `factor`:
// there orig / wavelen = low + (high - low) * smooth, linear in smooth.
absl::Status FitLlama3(const std::vector<float>& f, double theta, int64_t head_dim,
                       RopeScaling* r) {
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] <= 1.0f + 1e-4f || f[i] >= r->factor * (1.0f - 1e-4f)) continue;
    double smooth = (1.0 / f[i] - 1.0 / r->factor) / (1.0 - 1.0 / r->factor);
    double wavelen =
        2.0 * std::numbers::pi * std::pow(theta, 2.0 * static_cast<double>(i) / head_dim);
    double x = r->original_max_position_embeddings / wavelen;
    n += 1, sx += smooth, sy += x, sxx += smooth * smooth, sxy += smooth * x;
  }
  double det = n * sxx - sx * sx;
  if (n < 2 || std::fabs(det) < 1e-12) {
    return absl::UnimplementedError("fewer than two factors in the transition band");
  }
  double slope = (n * sxy - sx * sy) / det, low = (sy - slope * sx) / n;
  auto snap = [](double v) {  // published values are simple fractions
    double snapped = std::round(v * 16.0) / 16.0;
    return static_cast<float>(std::fabs(v - snapped) < 1e-3 * std::fabs(snapped) ? snapped : v);
  };
  r->low_freq_factor = snap(low);
  r->high_freq_factor = snap(low + slope);
  return absl::OkStatus();
}

absl::Status RecoverLlama3Scaling(const GgufFile& g, const std::string& a, ModelConfig* c) {
  const TensorView* t = g.Find("rope_freqs.weight");
  if (t == nullptr) return absl::OkStatus();
  auto error = [&](absl::string_view what) {
    return absl::UnimplementedError(
        absl::StrCat(g.path(), ": tensor 'rope_freqs.weight' (per-frequency RoPE factors): ", what,
                     "; supported: llama3 scaling"));
  };
  ASSIGN_OR_RETURN(std::vector<float> f, DequantizeToF32(*t));
  if (static_cast<int64_t>(f.size()) != c->head_dim / 2) {
    return error(absl::StrCat(f.size(), " factors for head_dim ", c->head_dim));
  }
  RopeScaling r;
  r.enabled = true;
  ASSIGN_OR_RETURN(auto orig, OptionalInt(g, a + ".rope.scaling.original_context_length"));
  r.original_max_position_embeddings = orig.value_or(8192);
  r.factor = f.back();
  if (std::all_of(f.begin(), f.end(), [](float x) { return x == 1.0f; })) return absl::OkStatus();
  absl::Status fitted = FitLlama3(f, c->rope_theta, c->head_dim, &r);
  if (!fitted.ok()) return error(fitted.message());
  for (size_t i = 0; i < f.size(); ++i) {
    double want = Llama3Factor(r, c->rope_theta, c->head_dim, static_cast<int64_t>(i));
    if (!(std::fabs(f[i] - want) <= 1e-3 * want)) {
      return error(absl::StrCat("factor ", i, " is ", f[i], ", llama3 scaling gives ", want));
    }
  }
  c->rope_scaling = r;
  return absl::OkStatus();
}

absl::Status ReadRopeScaling(const GgufFile& g, const std::string& a, ModelConfig* c) {
  std::string key = a + ".rope.scaling.type";
  if (g.FindMetadata(key) != nullptr) {
    ASSIGN_OR_RETURN(std::string type, g.GetString(key));
    if (type != "none") {
      return KeyError(g, key, absl::StrCat("is \"", type, "\"; supported: none"), true);
    }
  }
  return RecoverLlama3Scaling(g, a, c);
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
  RETURN_IF_ERROR(ReadRopeScaling(gguf, arch, &c));
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
