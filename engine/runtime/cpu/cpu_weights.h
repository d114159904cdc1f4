// CpuWeights: the fp32 weights (engine/model/model_weights.h) repacked for the
// cpu backend's forward pass: q, k and v projections fused into one [q; k; v]
// matrix (one pass over the normed activations; q, k and v are then views
// into each token's row) and gate and up fused into one [gate; up] matrix (the
// layout SiluMul in engine/kernels/silu_mul.h reads). Sizes are checked
// against the config; errors name the layer and the part.
// Tested by tests/engine/runtime/cpu/cpu_weights_test.cc.
#ifndef ONECARD_ENGINE_RUNTIME_CPU_CPU_WEIGHTS_H_
#define ONECARD_ENGINE_RUNTIME_CPU_CPU_WEIGHTS_H_

#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/model_config.h"
#include "engine/model/model_weights.h"

namespace onecard::engine {

struct CpuLayerWeights {
  std::vector<float> attn_norm;  // [hidden]
  std::vector<float> wqkv;       // [(num_heads + 2 * num_kv_heads) * head_dim, hidden]
  std::vector<float> bqkv;       // [(num_heads + 2 * num_kv_heads) * head_dim] or empty
  std::vector<float> wo;         // [hidden, num_heads * head_dim]
  std::vector<float> ffn_norm;   // [hidden]
  std::vector<float> w_gate_up;  // [2 * intermediate, hidden]
  std::vector<float> w_down;     // [hidden, intermediate]
};

struct CpuWeights {
  std::vector<float> embedding;  // [vocab, hidden]
  std::vector<CpuLayerWeights> layers;
  std::vector<float> final_norm;  // [hidden]
  std::vector<float> lm_head;     // [vocab, hidden]; empty when tied to the embedding
  const std::vector<float>& output_weight() const { return lm_head.empty() ? embedding : lm_head; }
};

// Checks the config's shape fields this backend relies on (InvalidArgument
// naming the field).
absl::Status CheckCpuConfig(const ModelConfig& config);

// Takes the weights (each layer's source tensors are freed as it is packed,
// so the peak is one layer above the model's size).
absl::StatusOr<CpuWeights> PackCpuWeights(const ModelConfig& config, ModelWeightsF32 weights);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_RUNTIME_CPU_CPU_WEIGHTS_H_
