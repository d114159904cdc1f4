// UploadWeights and RandomWeights (see cuda_weights.h).
// Tested through tests/gpu/cuda_model_runner_test.cc.
#include "engine/runtime/cuda/cuda_weights.h"

#include <cmath>
#include <functional>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/kernels/bf16.h"
#include "engine/runtime/cuda/memory_plan.h"
#include "engine/runtime/cuda_check.h"

namespace onecard::engine {
namespace {

// Carves every tensor from the arena, in the order Bf16WeightBytes counts.
absl::StatusOr<CudaWeights> Carve(const ModelConfig& c, DeviceArena* arena) {
  const int64_t qkv_rows = (c.num_heads + 2 * c.num_kv_heads) * c.head_dim;
  CudaWeights w;
  w.layers.resize(c.num_layers);
  for (CudaLayerWeights& l : w.layers) {
    ASSIGN_OR_RETURN(l.attn_norm, arena->Take(c.hidden_size * 2));
    ASSIGN_OR_RETURN(l.ffn_norm, arena->Take(c.hidden_size * 2));
    ASSIGN_OR_RETURN(l.wqkv, arena->Take(qkv_rows * c.hidden_size * 2));
    ASSIGN_OR_RETURN(l.wo, arena->Take(c.hidden_size * c.num_heads * c.head_dim * 2));
    ASSIGN_OR_RETURN(l.w_gate_up, arena->Take(2 * c.intermediate_size * c.hidden_size * 2));
    ASSIGN_OR_RETURN(l.w_down, arena->Take(c.hidden_size * c.intermediate_size * 2));
    if (c.attention_bias) {
      ASSIGN_OR_RETURN(l.bqkv, arena->Take(qkv_rows * 2));
    }
  }
  ASSIGN_OR_RETURN(w.embedding, arena->Take(c.vocab_size * c.hidden_size * 2));
  ASSIGN_OR_RETURN(w.final_norm, arena->Take(c.hidden_size * 2));
  if (c.tie_word_embeddings) {
    w.lm_head = w.embedding;
  } else {
    ASSIGN_OR_RETURN(w.lm_head, arena->Take(c.vocab_size * c.hidden_size * 2));
  }
  return w;
}

// Copies fp32 values to device BF16 at dst (+ offset elements).
absl::Status Put(void* dst, int64_t offset, const std::vector<float>& src, int64_t expected,
                 const char* name) {
  if (static_cast<int64_t>(src.size()) != expected) {
    return absl::InvalidArgumentError(
        absl::StrCat("weight ", name, " has ", src.size(), " values, expected ", expected));
  }
  std::vector<uint16_t> bf(src.size());
  for (size_t i = 0; i < src.size(); ++i) bf[i] = FloatToBf16(src[i]);
  CUDA_RETURN_IF_ERROR(cudaMemcpy(static_cast<uint16_t*>(dst) + offset, bf.data(), bf.size() * 2,
                                  cudaMemcpyHostToDevice));
  return absl::OkStatus();
}

absl::Status PutLayer(const ModelConfig& c, const LayerWeightsF32& s, CudaLayerWeights& d) {
  const int64_t h = c.hidden_size, q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim;
  const int64_t inter = c.intermediate_size;
  RETURN_IF_ERROR(Put(d.attn_norm, 0, s.attn_norm, h, "attn_norm"));
  RETURN_IF_ERROR(Put(d.ffn_norm, 0, s.ffn_norm, h, "ffn_norm"));
  RETURN_IF_ERROR(Put(d.wqkv, 0, s.wq, q * h, "wq"));
  RETURN_IF_ERROR(Put(d.wqkv, q * h, s.wk, kv * h, "wk"));
  RETURN_IF_ERROR(Put(d.wqkv, (q + kv) * h, s.wv, kv * h, "wv"));
  RETURN_IF_ERROR(Put(d.wo, 0, s.wo, h * q, "wo"));
  RETURN_IF_ERROR(Put(d.w_gate_up, 0, s.w_gate, inter * h, "w_gate"));
  RETURN_IF_ERROR(Put(d.w_gate_up, inter * h, s.w_up, inter * h, "w_up"));
  RETURN_IF_ERROR(Put(d.w_down, 0, s.w_down, h * inter, "w_down"));
  if (c.attention_bias) {
    RETURN_IF_ERROR(Put(d.bqkv, 0, s.bq, q, "bq"));
    RETURN_IF_ERROR(Put(d.bqkv, q, s.bk, kv, "bk"));
    RETURN_IF_ERROR(Put(d.bqkv, q + kv, s.bv, kv, "bv"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<CudaWeights> UploadWeights(const ModelConfig& c, const ModelWeightsF32& src,
                                          DeviceArena* arena) {
  if (static_cast<int64_t>(src.layers.size()) != c.num_layers) {
    return absl::InvalidArgumentError(
        absl::StrCat("weights have ", src.layers.size(), " layers, config ", c.num_layers));
  }
  ASSIGN_OR_RETURN(CudaWeights w, Carve(c, arena));
  for (int64_t i = 0; i < c.num_layers; ++i)
    RETURN_IF_ERROR(PutLayer(c, src.layers[i], w.layers[i]));
  const int64_t vh = c.vocab_size * c.hidden_size;
  RETURN_IF_ERROR(Put(w.embedding, 0, src.embedding, vh, "embedding"));
  RETURN_IF_ERROR(Put(w.final_norm, 0, src.final_norm, c.hidden_size, "final_norm"));
  if (!c.tie_word_embeddings)
    RETURN_IF_ERROR(Put(w.lm_head, 0, src.output_weight(), vh, "lm_head"));
  return w;
}

absl::StatusOr<CudaWeights> RandomWeights(const ModelConfig& c, uint64_t seed, DeviceArena* arena,
                                          cudaStream_t stream) {
  ASSIGN_OR_RETURN(CudaWeights w, Carve(c, arena));
  uint64_t tensor = 0;
  auto fill = [&](void* p, int64_t n, float center, float half_width) {
    return FillUniformBf16(p, n, seed * 0x100000001b3ull + (++tensor) * 0x9e3779b97f4a7c15ull,
                           center, half_width, stream);
  };
  const int64_t h = c.hidden_size, q = c.num_heads * c.head_dim;
  const int64_t qkv_rows = q + 2 * c.num_kv_heads * c.head_dim, inter = c.intermediate_size;
  auto proj = [](int64_t fan_in) { return std::sqrt(3.0f / static_cast<float>(fan_in)); };
  for (CudaLayerWeights& l : w.layers) {
    RETURN_IF_ERROR(fill(l.attn_norm, h, 1.0f, 0.05f));
    RETURN_IF_ERROR(fill(l.ffn_norm, h, 1.0f, 0.05f));
    RETURN_IF_ERROR(fill(l.wqkv, qkv_rows * h, 0.0f, proj(h)));
    RETURN_IF_ERROR(fill(l.wo, h * q, 0.0f, proj(q)));
    RETURN_IF_ERROR(fill(l.w_gate_up, 2 * inter * h, 0.0f, proj(h)));
    RETURN_IF_ERROR(fill(l.w_down, h * inter, 0.0f, proj(inter)));
    if (l.bqkv != nullptr) RETURN_IF_ERROR(fill(l.bqkv, qkv_rows, 0.0f, 0.1f));
  }
  RETURN_IF_ERROR(fill(w.embedding, c.vocab_size * h, 0.0f, 1.0f));
  RETURN_IF_ERROR(fill(w.final_norm, h, 1.0f, 0.05f));
  if (w.lm_head != w.embedding) RETURN_IF_ERROR(fill(w.lm_head, c.vocab_size * h, 0.0f, proj(h)));
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  return w;
}

}  // namespace onecard::engine
