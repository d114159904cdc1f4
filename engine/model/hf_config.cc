// ParseHfConfig: config.json fields -> ModelConfig, with HF's defaults for
// absent fields (LlamaConfig, Qwen2Config, MistralConfig). JSON via nlohmann
// without exceptions; null counts as absent. Tested by
// tests/engine/model/hf_config_test.cc.
#include "engine/model/hf_config.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "engine/common/log.h"
#include "engine/common/regular_file.h"
#include "engine/common/status_macros.h"
#include "engine/model/json_fields.h"
#include "nlohmann/json.hpp"

namespace onecard::engine {
namespace {

using Json = nlohmann::json;

constexpr char kSupportedArchitectures[] = "LlamaForCausalLM, Qwen2ForCausalLM, MistralForCausalLM";

absl::StatusOr<Architecture> ParseArchitecture(const JsonFields& f) {
  const Json* list = f.Find("architectures");
  if (list == nullptr || !list->is_array() || list->empty()) {
    return f.Error("architectures", "must be a non-empty list of model class names");
  }
  static const std::pair<const char*, Architecture> kClasses[] = {
      {"LlamaForCausalLM", Architecture::kLlama},
      {"Qwen2ForCausalLM", Architecture::kQwen2},
      {"MistralForCausalLM", Architecture::kMistral}};
  for (const Json& name : *list) {
    for (const auto& [cls, arch] : kClasses) {
      if (name.is_string() && name.get<std::string>() == cls) return arch;
    }
  }
  return f.Unsupported("architectures",
                       absl::StrCat(list->dump(), " names no supported architecture (supported: ",
                                    kSupportedArchitectures, ")"));
}

absl::Status ParseSizes(const JsonFields& f, ModelConfig* c) {
  ASSIGN_OR_RETURN(c->vocab_size, f.Int("vocab_size"));
  ASSIGN_OR_RETURN(c->hidden_size, f.Int("hidden_size"));
  ASSIGN_OR_RETURN(c->intermediate_size, f.Int("intermediate_size"));
  ASSIGN_OR_RETURN(c->num_layers, f.Int("num_hidden_layers"));
  ASSIGN_OR_RETURN(c->num_heads, f.Int("num_attention_heads"));
  if (c->num_heads <= 0) return f.Error("num_attention_heads", "must be positive");
  ASSIGN_OR_RETURN(c->num_kv_heads, f.Int("num_key_value_heads", c->num_heads));
  ASSIGN_OR_RETURN(std::optional<int64_t> head_dim, f.OptionalInt("head_dim"));
  if (!head_dim.has_value() && c->hidden_size % c->num_heads != 0) {
    return f.Error("head_dim", "is missing and num_attention_heads does not divide hidden_size");
  }
  c->head_dim = head_dim.value_or(c->hidden_size / c->num_heads);
  int64_t default_context = c->architecture == Architecture::kLlama   ? 2048
                            : c->architecture == Architecture::kQwen2 ? 32768
                                                                      : 4096 * 32;
  ASSIGN_OR_RETURN(c->max_position_embeddings, f.Int("max_position_embeddings", default_context));
  ASSIGN_OR_RETURN(c->rms_norm_eps, f.Float("rms_norm_eps", 1e-6f));
  ASSIGN_OR_RETURN(c->tie_word_embeddings, f.Bool("tie_word_embeddings", false));
  return absl::OkStatus();
}

absl::Status ParseLlama3Scaling(const JsonFields& s, RopeScaling* r) {
  r->enabled = true;
  ASSIGN_OR_RETURN(r->factor, s.Float("factor"));
  ASSIGN_OR_RETURN(r->low_freq_factor, s.Float("low_freq_factor"));
  ASSIGN_OR_RETURN(r->high_freq_factor, s.Float("high_freq_factor"));
  ASSIGN_OR_RETURN(r->original_max_position_embeddings, s.Int("original_max_position_embeddings"));
  return absl::OkStatus();
}

// rope_theta and rope_scaling, or transformers v5's rope_parameters.
absl::Status ParseRope(const JsonFields& f, const std::string& source, ModelConfig* c) {
  const char* scaling_field =
      f.Find("rope_scaling") != nullptr ? "rope_scaling" : "rope_parameters";
  const Json* scaling = f.Find(scaling_field);
  if (scaling != nullptr && !scaling->is_object()) {
    return f.Error(scaling_field, absl::StrCat("is not an object: ", scaling->dump()));
  }
  float theta_default = 10000.0f;
  if (scaling != nullptr) {
    JsonFields s(*scaling, source, absl::StrCat(scaling_field, "."));
    ASSIGN_OR_RETURN(theta_default, s.Float("rope_theta", theta_default));
    ASSIGN_OR_RETURN(std::string type, s.String("rope_type", ""));
    if (type.empty()) {
      ASSIGN_OR_RETURN(type, s.String("type", "default"));
    }
    if (type == "llama3") {
      RETURN_IF_ERROR(ParseLlama3Scaling(s, &c->rope_scaling));
    } else if (type != "default") {
      return s.Unsupported("rope_type",
                           absl::StrCat("is \"", type, "\"; supported: default, llama3"));
    }
  }
  ASSIGN_OR_RETURN(c->rope_theta, f.Float("rope_theta", theta_default));
  return absl::OkStatus();
}

// Features the decoder does not have, and sliding windows.
absl::Status CheckFeatures(const JsonFields& f, ModelConfig* c) {
  ASSIGN_OR_RETURN(std::string act, f.String("hidden_act", "silu"));
  if (act != "silu") {
    return f.Unsupported("hidden_act", absl::StrCat("is \"", act, "\"; supported: silu"));
  }
  ASSIGN_OR_RETURN(bool mlp_bias, f.Bool("mlp_bias", false));
  ASSIGN_OR_RETURN(bool attention_bias, f.Bool("attention_bias", false));
  if (mlp_bias || (attention_bias && c->architecture != Architecture::kQwen2)) {
    return f.Unsupported(mlp_bias ? "mlp_bias" : "attention_bias", "= true is not supported");
  }
  c->attention_bias = c->architecture == Architecture::kQwen2;  // Qwen2: q/k/v bias always
  bool windowed = c->architecture == Architecture::kMistral;
  if (c->architecture == Architecture::kQwen2) {
    ASSIGN_OR_RETURN(windowed, f.Bool("use_sliding_window", false));
  }
  ASSIGN_OR_RETURN(std::optional<int64_t> window, f.OptionalInt("sliding_window"));
  if (windowed && window.has_value() && *window > 0 && *window < c->max_position_embeddings) {
    Log(LogLevel::kInfo, "model", "sliding_window %d: serving contexts up to %d tokens", *window,
        *window);
    c->max_position_embeddings = *window;
  }
  return absl::OkStatus();
}

std::string FolderName(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos || slash == 0) return path;
  size_t start = path.rfind('/', slash - 1);
  return path.substr(start == std::string::npos ? 0 : start + 1,
                     slash - (start == std::string::npos ? 0 : start + 1));
}

}  // namespace

absl::StatusOr<ModelConfig> ParseHfConfig(std::string_view json_text, const std::string& source) {
  Json j = Json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": not a JSON object"));
  }
  JsonFields f(j, source);
  ModelConfig c;
  ASSIGN_OR_RETURN(c.architecture, ParseArchitecture(f));
  RETURN_IF_ERROR(ParseSizes(f, &c));
  RETURN_IF_ERROR(ParseRope(f, source, &c));
  RETURN_IF_ERROR(CheckFeatures(f, &c));
  ASSIGN_OR_RETURN(c.bos_token_id, f.TokenId("bos_token_id"));
  ASSIGN_OR_RETURN(c.eos_token_id, f.TokenId("eos_token_id"));
  ASSIGN_OR_RETURN(c.name, f.String("_name_or_path", ""));
  if (c.name.empty()) c.name = FolderName(source);
  absl::Status valid = c.Validate();
  if (!valid.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", valid.message()));
  }
  return c;
}

absl::StatusOr<ModelConfig> LoadHfConfig(const std::string& config_json_path) {
  absl::StatusOr<std::string> text = ReadRegularFile(config_json_path);
  if (!text.ok()) return text.status();
  return ParseHfConfig(*text, config_json_path);
}

namespace {

// The shortest decimal that reads back as `f`, as a JSON number.
double ShortestDouble(float f) {
  char buffer[32];
  const std::to_chars_result r = std::to_chars(buffer, buffer + sizeof(buffer), f);
  return std::strtod(std::string(buffer, r.ptr).c_str(), nullptr);
}

nlohmann::ordered_json TokenIdOrNull(int32_t id) {
  return id < 0 ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(id);
}

}  // namespace

std::string HfConfigJson(const ModelConfig& c) {
  const char* model_type = "llama";
  const char* cls = "LlamaForCausalLM";
  if (c.architecture == Architecture::kQwen2) {
    model_type = "qwen2";
    cls = "Qwen2ForCausalLM";
  } else if (c.architecture == Architecture::kMistral) {
    model_type = "mistral";
    cls = "MistralForCausalLM";
  }
  nlohmann::ordered_json j;
  j["_name_or_path"] = c.name;
  j["architectures"] = {cls};
  j["model_type"] = model_type;
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.hidden_size;
  j["intermediate_size"] = c.intermediate_size;
  j["num_hidden_layers"] = c.num_layers;
  j["num_attention_heads"] = c.num_heads;
  j["num_key_value_heads"] = c.num_kv_heads;
  j["head_dim"] = c.head_dim;
  j["hidden_act"] = "silu";
  j["max_position_embeddings"] = c.max_position_embeddings;
  j["rms_norm_eps"] = ShortestDouble(c.rms_norm_eps);
  j["rope_theta"] = ShortestDouble(c.rope_theta);
  if (c.rope_scaling.enabled) {
    j["rope_scaling"] = {
        {"rope_type", "llama3"},
        {"factor", ShortestDouble(c.rope_scaling.factor)},
        {"low_freq_factor", ShortestDouble(c.rope_scaling.low_freq_factor)},
        {"high_freq_factor", ShortestDouble(c.rope_scaling.high_freq_factor)},
        {"original_max_position_embeddings", c.rope_scaling.original_max_position_embeddings}};
  } else {
    j["rope_scaling"] = nullptr;
  }
  if (c.architecture == Architecture::kQwen2) {
    j["use_sliding_window"] = false;
  } else {
    j["attention_bias"] = false;
    j["mlp_bias"] = false;
  }
  if (c.architecture != Architecture::kLlama) j["sliding_window"] = nullptr;
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  j["bos_token_id"] = TokenIdOrNull(c.bos_token_id);
  j["eos_token_id"] = TokenIdOrNull(c.eos_token_id);
  j["torch_dtype"] = "float16";
  return j.dump(2) + "\n";
}

}  // namespace onecard::engine
