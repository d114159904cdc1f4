// Tiny decoder checkpoints for tests (see tiny_model.h).
#include "tests/engine/model/tiny_model.h"

#include <random>

#include "absl/strings/str_cat.h"

namespace onecard::testing {
namespace {

// HF name suffix -> GGUF name suffix, per layer.
const std::pair<const char*, const char*> kLayerNames[] = {
    {"input_layernorm.weight", "attn_norm.weight"},
    {"self_attn.q_proj.weight", "attn_q.weight"},
    {"self_attn.k_proj.weight", "attn_k.weight"},
    {"self_attn.v_proj.weight", "attn_v.weight"},
    {"self_attn.o_proj.weight", "attn_output.weight"},
    {"post_attention_layernorm.weight", "ffn_norm.weight"},
    {"mlp.gate_proj.weight", "ffn_gate.weight"},
    {"mlp.up_proj.weight", "ffn_up.weight"},
    {"mlp.down_proj.weight", "ffn_down.weight"},
    {"self_attn.q_proj.bias", "attn_q.bias"},
    {"self_attn.k_proj.bias", "attn_k.bias"},
    {"self_attn.v_proj.bias", "attn_v.bias"},
};

std::string GgufName(const std::string& hf) {
  if (hf == "model.embed_tokens.weight") return "token_embd.weight";
  if (hf == "model.norm.weight") return "output_norm.weight";
  if (hf == "lm_head.weight") return "output.weight";
  size_t dot = hf.find('.', 13);  // after "model.layers."
  std::string layer = hf.substr(13, dot - 13);
  std::string suffix = hf.substr(dot + 1);
  for (const auto& [h, g] : kLayerNames) {
    if (suffix == h) return absl::StrCat("blk.", layer, ".", g);
  }
  return hf;
}

}  // namespace

TinyModel MakeTinyModel(const TinySpec& spec) {
  TinyModel m{spec, {}};
  std::mt19937 rng(spec.seed);
  std::normal_distribution<float> normal(0.0f, 0.5f);
  auto add = [&](const std::string& name, std::vector<int64_t> shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> values(n);
    for (float& v : values) v = normal(rng);
    m.hf[name] = F32Tensor{name, std::move(shape), std::move(values)};
  };
  int64_t q = spec.heads * m.head_dim(), kv = spec.kv_heads * m.head_dim();
  add("model.embed_tokens.weight", {spec.vocab, spec.hidden});
  for (int64_t l = 0; l < spec.layers; ++l) {
    std::string p = absl::StrCat("model.layers.", l, ".");
    add(p + "input_layernorm.weight", {spec.hidden});
    add(p + "self_attn.q_proj.weight", {q, spec.hidden});
    add(p + "self_attn.k_proj.weight", {kv, spec.hidden});
    add(p + "self_attn.v_proj.weight", {kv, spec.hidden});
    add(p + "self_attn.o_proj.weight", {spec.hidden, q});
    add(p + "post_attention_layernorm.weight", {spec.hidden});
    add(p + "mlp.gate_proj.weight", {spec.intermediate, spec.hidden});
    add(p + "mlp.up_proj.weight", {spec.intermediate, spec.hidden});
    add(p + "mlp.down_proj.weight", {spec.hidden, spec.intermediate});
    if (spec.arch == "qwen2") {
      add(p + "self_attn.q_proj.bias", {q});
      add(p + "self_attn.k_proj.bias", {kv});
      add(p + "self_attn.v_proj.bias", {kv});
    }
  }
  add("model.norm.weight", {spec.hidden});
  if (!spec.tied) add("lm_head.weight", {spec.vocab, spec.hidden});
  return m;
}

std::vector<float> LlamaCppPermute(const std::vector<float>& w, int64_t rows, int64_t heads) {
  int64_t cols = static_cast<int64_t>(w.size()) / rows, half = rows / heads / 2;
  std::vector<float> out(w.size());
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t j = 0; j < 2; ++j) {
      for (int64_t i = 0; i < half; ++i) {
        int64_t from = h * 2 * half + j * half + i;  // [heads, 2, half]
        int64_t to = h * 2 * half + i * 2 + j;       // [heads, half, 2]
        std::copy_n(w.begin() + from * cols, cols, out.begin() + to * cols);
      }
    }
  }
  return out;
}

GgufTestWriter TinyGgufWriter(const TinyModel& m, const std::string& skip) {
  const TinySpec& s = m.spec;
  GgufTestWriter w;
  const std::string& a = s.arch;
  w.AddString("general.architecture", a);
  w.AddString("general.name", "tiny " + a);
  w.AddInt(a + ".context_length", kMetaU32, 64);
  w.AddInt(a + ".embedding_length", kMetaU32, s.hidden);
  w.AddInt(a + ".block_count", kMetaU32, s.layers);
  w.AddInt(a + ".feed_forward_length", kMetaU32, s.intermediate);
  w.AddInt(a + ".attention.head_count", kMetaU32, s.heads);
  w.AddInt(a + ".attention.head_count_kv", kMetaU32, s.kv_heads);
  w.AddF32(a + ".rope.freq_base", 500000.0f);
  w.AddF32(a + ".attention.layer_norm_rms_epsilon", 1e-6f);
  std::vector<std::string> tokens;
  for (int64_t i = 0; i < s.vocab; ++i) tokens.push_back(absl::StrCat("t", i));
  w.AddStringArray("tokenizer.ggml.tokens", tokens);
  w.AddInt("tokenizer.ggml.bos_token_id", kMetaU32, 1);
  w.AddInt("tokenizer.ggml.eos_token_id", kMetaU32, 2);
  for (const auto& [name, t] : m.hf) {
    std::string gguf = GgufName(name);
    if (gguf == skip) continue;
    std::vector<float> values = t.values;
    bool query = gguf.find(".attn_q.") != std::string::npos;
    bool key = gguf.find(".attn_k.") != std::string::npos;
    if (a == "llama" && (query || key)) {
      values = LlamaCppPermute(values, t.shape[0], query ? s.heads : s.kv_heads);
    }
    w.AddF32Tensor(gguf, t.shape, values);
  }
  return w;
}

std::string WriteTinyHfFolder(const TinyModel& m, const ScratchDir& dir, const std::string& name) {
  const TinySpec& s = m.spec;
  nlohmann::json config = {
      {"architectures", {s.arch == "qwen2" ? "Qwen2ForCausalLM" : "LlamaForCausalLM"}},
      {"vocab_size", s.vocab},
      {"hidden_size", s.hidden},
      {"intermediate_size", s.intermediate},
      {"num_hidden_layers", s.layers},
      {"num_attention_heads", s.heads},
      {"num_key_value_heads", s.kv_heads},
      {"max_position_embeddings", 64},
      {"rms_norm_eps", 1e-6},
      {"rope_theta", 500000.0},
      {"tie_word_embeddings", s.tied},
      {"bos_token_id", 1},
      {"eos_token_id", 2},
      {"hidden_act", "silu"}};
  dir.Write(name + "/config.json", config.dump(2));
  std::vector<F32Tensor> tensors;
  for (const auto& [n, t] : m.hf) tensors.push_back(t);
  dir.Write(name + "/model.safetensors", SafetensorsF32(tensors));
  return dir.path() + "/" + name;
}

const std::vector<float>* LoadedTensor(const engine::ModelWeightsF32& w,
                                       const std::string& hf_name) {
  using engine::LayerWeightsF32;
  if (hf_name == "model.embed_tokens.weight") return &w.embedding;
  if (hf_name == "model.norm.weight") return &w.final_norm;
  if (hf_name == "lm_head.weight") return &w.output_weight();
  static const std::pair<const char*, std::vector<float> LayerWeightsF32::*> kFields[] = {
      {"input_layernorm.weight", &LayerWeightsF32::attn_norm},
      {"self_attn.q_proj.weight", &LayerWeightsF32::wq},
      {"self_attn.k_proj.weight", &LayerWeightsF32::wk},
      {"self_attn.v_proj.weight", &LayerWeightsF32::wv},
      {"self_attn.o_proj.weight", &LayerWeightsF32::wo},
      {"post_attention_layernorm.weight", &LayerWeightsF32::ffn_norm},
      {"mlp.gate_proj.weight", &LayerWeightsF32::w_gate},
      {"mlp.up_proj.weight", &LayerWeightsF32::w_up},
      {"mlp.down_proj.weight", &LayerWeightsF32::w_down},
      {"self_attn.q_proj.bias", &LayerWeightsF32::bq},
      {"self_attn.k_proj.bias", &LayerWeightsF32::bk},
      {"self_attn.v_proj.bias", &LayerWeightsF32::bv},
  };
  if (hf_name.rfind("model.layers.", 0) != 0) return nullptr;
  size_t dot = hf_name.find('.', 13);
  size_t layer = std::stoul(hf_name.substr(13, dot - 13));
  if (layer >= w.layers.size()) return nullptr;
  for (const auto& [suffix, field] : kFields) {
    if (hf_name.substr(dot + 1) == suffix) return &(w.layers[layer].*field);
  }
  return nullptr;
}

}  // namespace onecard::testing
