// ModelWeightsF32: a checkpoint's tensors mapped to the decoder's parts and
// dequantized to fp32, in the HF layout ([out_features, in_features]) and the
// HF rotary convention (rotate_half). GGUF llama Q/K weights, which
// llama.cpp's converter permuted for its interleaved RoPE, are permuted back.
// Missing tensors give NotFound naming the tensor and the file; wrong shapes
// give InvalidArgument naming the tensor, the expected and the found shape.
// Tested by tests/engine/model/model_weights_test.cc.
#ifndef ONECARD_ENGINE_MODEL_MODEL_WEIGHTS_H_
#define ONECARD_ENGINE_MODEL_MODEL_WEIGHTS_H_

#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/checkpoint.h"
#include "engine/model/layer_tensors.h"
#include "engine/model/model_config.h"

namespace onecard::engine {

struct LayerWeightsF32 {
  std::vector<float> attn_norm;  // [hidden]
  std::vector<float> wq;         // [num_heads * head_dim, hidden]
  std::vector<float> wk;         // [num_kv_heads * head_dim, hidden]
  std::vector<float> wv;         // [num_kv_heads * head_dim, hidden]
  std::vector<float> bq;         // [num_heads * head_dim] or empty
  std::vector<float> bk;         // [num_kv_heads * head_dim] or empty
  std::vector<float> bv;         // [num_kv_heads * head_dim] or empty
  std::vector<float> wo;         // [hidden, num_heads * head_dim]
  std::vector<float> ffn_norm;   // [hidden]
  std::vector<float> w_gate;     // [intermediate, hidden]
  std::vector<float> w_up;       // [intermediate, hidden]
  std::vector<float> w_down;     // [hidden, intermediate]
};

struct ModelWeightsF32 {
  std::vector<float> embedding;  // [vocab, hidden]
  std::vector<LayerWeightsF32> layers;
  std::vector<float> final_norm;  // [hidden]
  std::vector<float> lm_head;     // [vocab, hidden]; empty when tied
  const std::vector<float>& output_weight() const { return lm_head.empty() ? embedding : lm_head; }
};

absl::StatusOr<ModelWeightsF32> LoadWeightsF32(const Checkpoint& checkpoint);

// The vector that holds `part` (of layer `layer` for the per-layer parts;
// w.layers must have it).
std::vector<float>* PartWeights(ModelWeightsF32& w, TensorPart part, int64_t layer);

// Dequantizes one tensor to fp32 (any supported dtype), row-major.
absl::StatusOr<std::vector<float>> DequantizeToF32(const TensorView& tensor);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_MODEL_MODEL_WEIGHTS_H_
