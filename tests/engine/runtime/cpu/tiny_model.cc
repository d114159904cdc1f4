// Tiny decoder configs, random weights and the dense double-precision forward
// pass of tests/engine/runtime/cpu (see tiny_model.h).
#include "tests/engine/runtime/cpu/tiny_model.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "engine/kernels/rope.h"

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

// rotate_half RoPE on each head of x [n, heads * head_dim]; token t at position t.
void Rope(Matrix& x, int64_t heads, int64_t head_dim, const std::vector<float>& inv_freq) {
  const int64_t half = head_dim / 2, n = static_cast<int64_t>(x.size()) / (heads * head_dim);
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t h = 0; h < heads; ++h) {
      double* v = &x[(t * heads + h) * head_dim];
      for (int64_t i = 0; i < half; ++i) {
        const double a = double(t) * inv_freq[i], c = std::cos(a), s = std::sin(a);
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
                                const std::vector<int32_t>& tokens,
                                const std::function<float(float)>& round_kv) {
  const int64_t hd = c.hidden_size, q_dim = c.num_heads * c.head_dim;
  const int64_t kv_dim = c.num_kv_heads * c.head_dim;
  const std::vector<float> inv_freq =
      RopeInvFreq(static_cast<int32_t>(c.head_dim), c.rope_theta, c.rope_scaling);
  Matrix x;
  for (int32_t t : tokens) x.insert(x.end(), &w.embedding[t * hd], &w.embedding[(t + 1) * hd]);
  for (const LayerWeightsF32& layer : w.layers) {
    const Matrix h = RmsNorm(x, layer.attn_norm, c.rms_norm_eps);
    Matrix q = Linear(h, layer.wq, layer.bq, hd, q_dim);
    Matrix k = Linear(h, layer.wk, layer.bk, hd, kv_dim);
    Matrix v = Linear(h, layer.wv, layer.bv, hd, kv_dim);
    Rope(q, c.num_heads, c.head_dim, inv_freq);
    Rope(k, c.num_kv_heads, c.head_dim, inv_freq);
    if (round_kv != nullptr) {
      for (auto& e : k) e = round_kv(static_cast<float>(e));
      for (auto& e : v) e = round_kv(static_cast<float>(e));
    }
    AddTo(x, Linear(Attention(c, q, k, v), layer.wo, {}, q_dim, hd));
    AddTo(x, Mlp(c, layer, RmsNorm(x, layer.ffn_norm, c.rms_norm_eps)));
  }
  const Matrix logits =
      Linear(RmsNorm(x, w.final_norm, c.rms_norm_eps), w.output_weight(), {}, hd, c.vocab_size);
  return std::vector<float>(logits.begin(), logits.end());
}

}  // namespace onecard::engine::testing
