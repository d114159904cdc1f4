// CheckCpuConfig and PackCpuWeights (see cpu_weights.h).
// Tested by tests/engine/runtime/cpu/cpu_weights_test.cc.
#include "engine/runtime/cpu/cpu_weights.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"

namespace onecard::engine {
namespace {

// InvalidArgument unless `v` has rows * cols elements.
absl::Status CheckSize(const std::string& where, const char* part, const std::vector<float>& v,
                       int64_t rows, int64_t cols = 1) {
  if (static_cast<int64_t>(v.size()) == rows * cols) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(where, part, " has ", v.size(),
                                                 " elements; the config needs [", rows, ", ", cols,
                                                 "] = ", rows * cols));
}

// Rows of `parts` stacked into one matrix; the parts are freed.
std::vector<float> Stack(std::initializer_list<std::vector<float>*> parts) {
  size_t total = 0;
  for (const std::vector<float>* p : parts) total += p->size();
  std::vector<float> out;
  out.reserve(total);
  for (std::vector<float>* p : parts) {
    out.insert(out.end(), p->begin(), p->end());
    std::vector<float>().swap(*p);
  }
  return out;
}

absl::StatusOr<CpuLayerWeights> PackLayer(const ModelConfig& c, int64_t index, LayerWeightsF32& w) {
  const std::string where = absl::StrCat("layer ", index, " ");
  const int64_t q_dim = c.num_heads * c.head_dim, kv_dim = c.num_kv_heads * c.head_dim;
  RETURN_IF_ERROR(CheckSize(where, "attn_norm", w.attn_norm, c.hidden_size));
  RETURN_IF_ERROR(CheckSize(where, "wq", w.wq, q_dim, c.hidden_size));
  RETURN_IF_ERROR(CheckSize(where, "wk", w.wk, kv_dim, c.hidden_size));
  RETURN_IF_ERROR(CheckSize(where, "wv", w.wv, kv_dim, c.hidden_size));
  RETURN_IF_ERROR(CheckSize(where, "wo", w.wo, c.hidden_size, q_dim));
  RETURN_IF_ERROR(CheckSize(where, "ffn_norm", w.ffn_norm, c.hidden_size));
  RETURN_IF_ERROR(CheckSize(where, "w_gate", w.w_gate, c.intermediate_size, c.hidden_size));
  RETURN_IF_ERROR(CheckSize(where, "w_up", w.w_up, c.intermediate_size, c.hidden_size));
  RETURN_IF_ERROR(CheckSize(where, "w_down", w.w_down, c.hidden_size, c.intermediate_size));
  const bool has_bias = !w.bq.empty() || !w.bk.empty() || !w.bv.empty();
  if (has_bias || c.attention_bias) {
    RETURN_IF_ERROR(CheckSize(where, "bq", w.bq, q_dim));
    RETURN_IF_ERROR(CheckSize(where, "bk", w.bk, kv_dim));
    RETURN_IF_ERROR(CheckSize(where, "bv", w.bv, kv_dim));
  }
  CpuLayerWeights out;
  out.attn_norm = std::move(w.attn_norm);
  out.wqkv = Stack({&w.wq, &w.wk, &w.wv});
  if (has_bias) out.bqkv = Stack({&w.bq, &w.bk, &w.bv});
  out.wo = std::move(w.wo);
  out.ffn_norm = std::move(w.ffn_norm);
  out.w_gate_up = Stack({&w.w_gate, &w.w_up});
  out.w_down = std::move(w.w_down);
  return out;
}

absl::Status ConfigError(const char* field, int64_t value, const char* need) {
  return absl::InvalidArgumentError(
      absl::StrCat("model config: ", field, " = ", value, "; the cpu backend needs ", need));
}

}  // namespace

absl::Status CheckCpuConfig(const ModelConfig& c) {
  for (auto [field, value] : {std::pair<const char*, int64_t>{"vocab_size", c.vocab_size},
                              {"hidden_size", c.hidden_size},
                              {"intermediate_size", c.intermediate_size},
                              {"num_layers", c.num_layers},
                              {"num_heads", c.num_heads},
                              {"num_kv_heads", c.num_kv_heads},
                              {"head_dim", c.head_dim},
                              {"max_position_embeddings", c.max_position_embeddings}}) {
    if (value <= 0) return ConfigError(field, value, "> 0");
  }
  if (c.num_heads % c.num_kv_heads != 0) {
    return ConfigError("num_heads", c.num_heads, "a multiple of num_kv_heads");
  }
  if (c.head_dim % 2 != 0) return ConfigError("head_dim", c.head_dim, "an even value (RoPE)");
  if (!(c.rms_norm_eps > 0.0f)) return ConfigError("rms_norm_eps", 0, "> 0");
  if (!(c.rope_theta > 0.0f)) return ConfigError("rope_theta", 0, "> 0");
  return absl::OkStatus();
}

absl::StatusOr<CpuWeights> PackCpuWeights(const ModelConfig& c, ModelWeightsF32 weights) {
  RETURN_IF_ERROR(CheckCpuConfig(c));
  CpuWeights out;
  RETURN_IF_ERROR(CheckSize("", "embedding", weights.embedding, c.vocab_size, c.hidden_size));
  RETURN_IF_ERROR(CheckSize("", "final_norm", weights.final_norm, c.hidden_size));
  if (!weights.lm_head.empty()) {
    RETURN_IF_ERROR(CheckSize("", "lm_head", weights.lm_head, c.vocab_size, c.hidden_size));
  }
  if (static_cast<int64_t>(weights.layers.size()) != c.num_layers) {
    return absl::InvalidArgumentError(absl::StrCat("the weights have ", weights.layers.size(),
                                                   " layers; the config says ", c.num_layers));
  }
  for (int64_t i = 0; i < c.num_layers; ++i) {
    ASSIGN_OR_RETURN(CpuLayerWeights layer, PackLayer(c, i, weights.layers[i]));
    out.layers.push_back(std::move(layer));
  }
  out.embedding = std::move(weights.embedding);
  out.final_norm = std::move(weights.final_norm);
  out.lm_head = std::move(weights.lm_head);
  return out;
}

}  // namespace onecard::engine
