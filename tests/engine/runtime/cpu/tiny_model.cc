// Tiny decoder configs, random weights, the dense double-precision forward
// pass and the block-quantized GGUF file of tests/engine/runtime/cpu (see
// tiny_model.h).
#include "tests/engine/runtime/cpu/tiny_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "engine/common/fp16.h"
#include "engine/kernels/rope.h"
#include "engine/model/quant_blocks.h"

namespace onecard::engine::testing {
namespace {

using Matrix = std::vector<double>;  // row-major

std::vector<float> Random(int64_t n, std::mt19937& rng, float lo, float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// y [rows, out] = x [rows, in] W^T (+ b).
Matrix Linear(const Matrix& x, const std::vector<float>& w, const std::vector<float>& b, int64_t in,
              int64_t out) {
  const int64_t rows = static_cast<int64_t>(x.size()) / in;
  Matrix y(rows * out);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < out; ++o) {
      double acc = b.empty() ? 0.0 : b[o];
      for (int64_t k = 0; k < in; ++k) acc += x[r * in + k] * w[o * in + k];
      y[r * out + o] = acc;
    }
  }
  return y;
}

Matrix RmsNorm(const Matrix& x, const std::vector<float>& w, double eps) {
  const int64_t hidden = static_cast<int64_t>(w.size());
  Matrix y(x.size());
  for (size_t r = 0; r < x.size() / hidden; ++r) {
    double sum_sq = 0;
    for (int64_t i = 0; i < hidden; ++i) sum_sq += x[r * hidden + i] * x[r * hidden + i];
    const double inv = 1.0 / std::sqrt(sum_sq / hidden + eps);
    for (int64_t i = 0; i < hidden; ++i) y[r * hidden + i] = x[r * hidden + i] * inv * w[i];
  }
  return y;
}

// rotate_half RoPE on each head of x [n, heads * head_dim]; token t at
// positions[t], or at position t when positions is empty.
void Rope(Matrix& x, int64_t heads, int64_t head_dim, const std::vector<float>& inv_freq,
          const std::vector<int32_t>& positions = {}) {
  const int64_t half = head_dim / 2, n = static_cast<int64_t>(x.size()) / (heads * head_dim);
  for (int64_t t = 0; t < n; ++t) {
    const double position = positions.empty() ? double(t) : double(positions[t]);
    for (int64_t h = 0; h < heads; ++h) {
      double* v = &x[(t * heads + h) * head_dim];
      for (int64_t i = 0; i < half; ++i) {
        const double a = position * inv_freq[i], c = std::cos(a), s = std::sin(a);
        const double x1 = v[i], x2 = v[i + half];
        v[i] = x1 * c - x2 * s;
        v[i + half] = x2 * c + x1 * s;
      }
    }
  }
}

// Causal GQA attention of q [n, H*D] over k, v [n, KV*D].
Matrix Attention(const ModelConfig& c, const Matrix& q, const Matrix& k, const Matrix& v) {
  const int64_t d = c.head_dim, n = static_cast<int64_t>(q.size()) / (c.num_heads * d);
  const int64_t group = c.num_heads / c.num_kv_heads;
  Matrix out(q.size());
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t h = 0; h < c.num_heads; ++h) {
      const double* qh = &q[(t * c.num_heads + h) * d];
      const int64_t kvh = h / group;
      std::vector<double> w(t + 1);
      for (int64_t j = 0; j <= t; ++j) {
        for (int64_t i = 0; i < d; ++i) w[j] += qh[i] * k[(j * c.num_kv_heads + kvh) * d + i];
        w[j] /= std::sqrt(double(d));
      }
      const double m = *std::max_element(w.begin(), w.end());
      double sum = 0;
      for (double& x : w) sum += (x = std::exp(x - m));
      for (int64_t j = 0; j <= t; ++j) {
        for (int64_t i = 0; i < d; ++i) {
          out[(t * c.num_heads + h) * d + i] += w[j] / sum * v[(j * c.num_kv_heads + kvh) * d + i];
        }
      }
    }
  }
  return out;
}

Matrix Mlp(const ModelConfig& c, const LayerWeightsF32& w, const Matrix& h) {
  const Matrix gate = Linear(h, w.w_gate, {}, c.hidden_size, c.intermediate_size);
  Matrix act = Linear(h, w.w_up, {}, c.hidden_size, c.intermediate_size);
  for (size_t i = 0; i < act.size(); ++i) act[i] *= gate[i] / (1.0 + std::exp(-gate[i]));
  return Linear(act, w.w_down, {}, c.intermediate_size, c.hidden_size);
}

void AddTo(Matrix& x, const Matrix& y) {
  for (size_t i = 0; i < x.size(); ++i) x[i] += y[i];
}

// `count` blocks of random bytes whose scales (d, and dmin or m) make values
// of about `amp` (the mean |code - centre| times the mean scale); Q4_1's min
// and the k-quants' dmin centre the codes.
template <typename Block>
std::string RandomBlocks(int64_t count, float amp, std::mt19937& rng) {
  std::vector<Block> blocks(count);
  for (Block& b : blocks) {
    auto* bytes = reinterpret_cast<uint8_t*>(&b);
    for (size_t i = 0; i < sizeof(Block); ++i) bytes[i] = static_cast<uint8_t>(rng());
    if constexpr (std::is_same_v<Block, BlockQ8_0>) {
      b.d = FloatToHalf(amp / 64);
    } else if constexpr (std::is_same_v<Block, BlockQ4_0>) {
      b.d = FloatToHalf(amp / 4);
    } else if constexpr (std::is_same_v<Block, BlockQ4_1>) {
      b.d = FloatToHalf(amp / 4);
      b.m = FloatToHalf(-7.5f * amp / 4);
    } else if constexpr (std::is_same_v<Block, BlockQ4_K>) {
      b.d = FloatToHalf(amp / 128);  // sc about 32, |q - 7.5| about 4
      b.dmin = FloatToHalf(7.5f * amp / 128);
    } else if constexpr (std::is_same_v<Block, BlockQ5_K>) {
      b.d = FloatToHalf(amp / 256);  // sc about 32, |q - 15.5| about 8
      b.dmin = FloatToHalf(15.5f * amp / 256);
    } else {
      static_assert(std::is_same_v<Block, BlockQ6_K>);
      b.d = FloatToHalf(amp / 1024);  // |scale| about 64, |q - 32| about 16
    }
  }
  std::string out(count * sizeof(Block), '\0');
  std::memcpy(out.data(), blocks.data(), out.size());
  return out;
}

// [rows, cols] of a block type as GGUF tensor data.
template <typename Block>
std::string Blocks(int64_t rows, int64_t cols, float amp, std::mt19937& rng) {
  return RandomBlocks<Block>(rows * cols / Block::kElements, amp, rng);
}

std::string F16Values(int64_t n, float amp, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-amp, amp);
  std::string out;
  for (int64_t i = 0; i < n; ++i) {
    const uint16_t h = FloatToHalf(dist(rng));
    out.append(reinterpret_cast<const char*>(&h), sizeof(h));
  }
  return out;
}

}  // namespace

ModelConfig TinyConfig(Architecture arch) {
  ModelConfig c;
  c.architecture = arch;
  c.max_position_embeddings = 256;
  if (arch == Architecture::kQwen2) {
    c.name = "tiny-qwen2";
    c.vocab_size = 97, c.hidden_size = 72, c.intermediate_size = 100, c.num_layers = 3;
    c.num_heads = 6, c.num_kv_heads = 2, c.head_dim = 12;
    c.rms_norm_eps = 1e-6f, c.rope_theta = 1e6f;
    c.attention_bias = true, c.tie_word_embeddings = true;
    return c;
  }
  c.name = "tiny-llama";
  c.vocab_size = 101, c.hidden_size = 64, c.intermediate_size = 96, c.num_layers = 2;
  c.num_heads = 4, c.num_kv_heads = 2, c.head_dim = 16;
  c.rms_norm_eps = 1e-5f, c.rope_theta = 500000.0f;
  c.rope_scaling = {true, 8.0f, 1.0f, 4.0f, 32};
  return c;
}

ModelWeightsF32 RandomWeights(const ModelConfig& c, uint32_t seed) {
  std::mt19937 rng(seed);
  const int64_t hd = c.hidden_size, q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim;
  const float sh = 1.0f / std::sqrt(float(hd)), si = 1.0f / std::sqrt(float(c.intermediate_size));
  ModelWeightsF32 w;
  w.embedding = Random(c.vocab_size * hd, rng, -1.0f, 1.0f);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    LayerWeightsF32 layer;
    layer.attn_norm = Random(hd, rng, 0.5f, 1.5f);
    layer.wq = Random(q * hd, rng, -sh, sh);
    layer.wk = Random(kv * hd, rng, -sh, sh);
    layer.wv = Random(kv * hd, rng, -sh, sh);
    if (c.attention_bias) {
      layer.bq = Random(q, rng, -0.5f, 0.5f);
      layer.bk = Random(kv, rng, -0.5f, 0.5f);
      layer.bv = Random(kv, rng, -0.5f, 0.5f);
    }
    layer.wo = Random(hd * q, rng, -sh, sh);
    layer.ffn_norm = Random(hd, rng, 0.5f, 1.5f);
    layer.w_gate = Random(c.intermediate_size * hd, rng, -sh, sh);
    layer.w_up = Random(c.intermediate_size * hd, rng, -sh, sh);
    layer.w_down = Random(hd * c.intermediate_size, rng, -si, si);
    w.layers.push_back(std::move(layer));
  }
  w.final_norm = Random(hd, rng, 0.5f, 1.5f);
  if (!c.tie_word_embeddings) w.lm_head = Random(c.vocab_size * hd, rng, -1.0f, 1.0f);
  return w;
}

std::vector<float> DenseForward(const ModelConfig& c, const ModelWeightsF32& w,
                                const std::vector<int32_t>& tokens, const KvRound& round_kv) {
  const int64_t hd = c.hidden_size, q_dim = c.num_heads * c.head_dim;
  const int64_t kv_dim = c.num_kv_heads * c.head_dim;
  const std::vector<float> inv_freq =
      RopeInvFreq(static_cast<int32_t>(c.head_dim), c.rope_theta, c.rope_scaling);
  Matrix x;
  for (int32_t t : tokens) x.insert(x.end(), &w.embedding[t * hd], &w.embedding[(t + 1) * hd]);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const LayerWeightsF32& layer = w.layers[l];
    const Matrix h = RmsNorm(x, layer.attn_norm, c.rms_norm_eps);
    Matrix q = Linear(h, layer.wq, layer.bq, hd, q_dim);
    Matrix k = Linear(h, layer.wk, layer.bk, hd, kv_dim);
    Matrix v = Linear(h, layer.wv, layer.bv, hd, kv_dim);
    Rope(q, c.num_heads, c.head_dim, inv_freq);
    Rope(k, c.num_kv_heads, c.head_dim, inv_freq);
    if (round_kv != nullptr) {
      for (size_t i = 0; i < k.size(); ++i) {
        const int64_t kv_head = static_cast<int64_t>(i) / c.head_dim % c.num_kv_heads;
        k[i] = round_kv(l, kv_head, false, static_cast<float>(k[i]));
        v[i] = round_kv(l, kv_head, true, static_cast<float>(v[i]));
      }
    }
    AddTo(x, Linear(Attention(c, q, k, v), layer.wo, {}, q_dim, hd));
    AddTo(x, Mlp(c, layer, RmsNorm(x, layer.ffn_norm, c.rms_norm_eps)));
  }
  const Matrix logits =
      Linear(RmsNorm(x, w.final_norm, c.rms_norm_eps), w.output_weight(), {}, hd, c.vocab_size);
  return std::vector<float>(logits.begin(), logits.end());
}

void DenseKv(const ModelConfig& c, const ModelWeightsF32& w, int64_t layer,
             std::span<const float> x, const std::vector<int32_t>& positions,
             std::vector<double>* k, std::vector<double>* v) {
  const int64_t kv_dim = c.num_kv_heads * c.head_dim;
  const LayerWeightsF32& l = w.layers[layer];
  const Matrix rows(x.begin(), x.end());
  *k = Linear(rows, l.wk, l.bk, c.hidden_size, kv_dim);
  *v = Linear(rows, l.wv, l.bv, c.hidden_size, kv_dim);
  Rope(*k, c.num_kv_heads, c.head_dim,
       RopeInvFreq(static_cast<int32_t>(c.head_dim), c.rope_theta, c.rope_scaling), positions);
}

std::string WriteBlockGguf(Architecture arch, const ::onecard::testing::ScratchDir& dir) {
  using namespace ::onecard::testing;  // NOLINT: the GGUF writer's type ids
  constexpr int64_t kVocab = 96, kHidden = 256, kInter = 512, kLayers = 2;
  constexpr int64_t kHeads = 4, kKvHeads = 2, kHeadDim = 64;
  constexpr int64_t kQ = kHeads * kHeadDim, kKv = kKvHeads * kHeadDim;
  const bool llama = arch == Architecture::kLlama;
  const std::string a = llama ? "llama" : "qwen2";
  GgufTestWriter w;
  w.AddString("general.architecture", a);
  w.AddString("general.name", "tiny blocks " + a);
  w.AddInt(a + ".context_length", kMetaU32, 64);
  w.AddInt(a + ".embedding_length", kMetaU32, kHidden);
  w.AddInt(a + ".block_count", kMetaU32, kLayers);
  w.AddInt(a + ".feed_forward_length", kMetaU32, kInter);
  w.AddInt(a + ".attention.head_count", kMetaU32, kHeads);
  w.AddInt(a + ".attention.head_count_kv", kMetaU32, kKvHeads);
  w.AddF32(a + ".rope.freq_base", 10000.0f);
  w.AddF32(a + ".attention.layer_norm_rms_epsilon", 1e-5f);
  std::vector<std::string> tokens;
  for (int64_t i = 0; i < kVocab; ++i) tokens.push_back(absl::StrCat("t", i));
  w.AddStringArray("tokenizer.ggml.tokens", tokens);
  w.AddInt("tokenizer.ggml.bos_token_id", kMetaU32, 1);
  w.AddInt("tokenizer.ggml.eos_token_id", kMetaU32, 2);
  std::mt19937 rng(llama ? 11 : 12);
  const float sh = 1.0f / std::sqrt(static_cast<float>(kHidden)),
              si = 1.0f / std::sqrt(static_cast<float>(kInter));
  const auto norm = [&](const std::string& name) {
    w.AddF32Tensor(name, {kHidden}, Random(kHidden, rng, 0.5f, 1.5f));
  };
  w.AddTensor("token_embd.weight", kGgmlQ8_0, {kVocab, kHidden},
              Blocks<BlockQ8_0>(kVocab, kHidden, 1.0f, rng));
  for (int64_t l = 0; l < kLayers; ++l) {
    const std::string p = absl::StrCat("blk.", l, ".");
    norm(p + "attn_norm.weight");
    w.AddTensor(p + "attn_q.weight", kGgmlQ4_K, {kQ, kHidden},
                Blocks<BlockQ4_K>(kQ, kHidden, sh, rng));
    w.AddTensor(p + "attn_k.weight", kGgmlQ4_0, {kKv, kHidden},
                Blocks<BlockQ4_0>(kKv, kHidden, sh, rng));
    w.AddTensor(p + "attn_v.weight", kGgmlQ6_K, {kKv, kHidden},
                Blocks<BlockQ6_K>(kKv, kHidden, sh, rng));
    if (!llama) {
      w.AddF32Tensor(p + "attn_q.bias", {kQ}, Random(kQ, rng, -0.5f, 0.5f));
      w.AddF32Tensor(p + "attn_k.bias", {kKv}, Random(kKv, rng, -0.5f, 0.5f));
      w.AddF32Tensor(p + "attn_v.bias", {kKv}, Random(kKv, rng, -0.5f, 0.5f));
    }
    if (l == 0) {
      w.AddTensor(p + "attn_output.weight", kGgmlQ4_1, {kHidden, kQ},
                  Blocks<BlockQ4_1>(kHidden, kQ, sh, rng));
    } else {
      w.AddTensor(p + "attn_output.weight", kGgmlF16, {kHidden, kQ},
                  F16Values(kHidden * kQ, sh, rng));
    }
    norm(p + "ffn_norm.weight");
    w.AddTensor(p + "ffn_gate.weight", kGgmlQ5_K, {kInter, kHidden},
                Blocks<BlockQ5_K>(kInter, kHidden, sh, rng));
    w.AddTensor(p + "ffn_up.weight", kGgmlQ8_0, {kInter, kHidden},
                Blocks<BlockQ8_0>(kInter, kHidden, sh, rng));
    w.AddTensor(p + "ffn_down.weight", kGgmlQ4_K, {kHidden, kInter},
                Blocks<BlockQ4_K>(kHidden, kInter, si, rng));
  }
  norm("output_norm.weight");
  if (llama) {
    w.AddTensor("output.weight", kGgmlQ6_K, {kVocab, kHidden},
                Blocks<BlockQ6_K>(kVocab, kHidden, 1.0f, rng));
  }
  return dir.Write("tiny_blocks_" + a + ".gguf", w.Build().bytes);
}

}  // namespace onecard::engine::testing
