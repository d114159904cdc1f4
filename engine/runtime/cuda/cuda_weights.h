// The CUDA backend's BF16 weights in device memory, with the projections
// fused as the kernels want them: wqkv = [Wq; Wk; Wv] (and the Qwen2 biases
// [bq; bk; bv]), w_gate_up = [Wgate; Wup]. Tensors are carved in a fixed
// order from one arena of Bf16WeightBytes(config) bytes (memory_plan.h).
// Two sources: a checkpoint's fp32 weights (converted on the host, round to
// nearest even), or seeded random values generated on the device
// (synthetic_weights.cu): uniform in +-sqrt(3 / fan_in) for projections,
// 1 +- 0.05 for norms, +-1 for embeddings, never zero.
// Tested through tests/gpu/cuda_model_runner_test.cc.
#ifndef ONECARD_ENGINE_RUNTIME_CUDA_CUDA_WEIGHTS_H_
#define ONECARD_ENGINE_RUNTIME_CUDA_CUDA_WEIGHTS_H_

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/model_config.h"
#include "engine/model/model_weights.h"
#include "engine/runtime/cuda/device_context.h"

namespace onecard::engine {

struct CudaLayerWeights {
  void* attn_norm = nullptr;  // [hidden]
  void* wqkv = nullptr;       // [(heads + 2 kv_heads) head_dim, hidden]
  void* bqkv = nullptr;       // [(heads + 2 kv_heads) head_dim] or null
  void* wo = nullptr;         // [hidden, heads head_dim]
  void* ffn_norm = nullptr;   // [hidden]
  void* w_gate_up = nullptr;  // [2 intermediate, hidden]
  void* w_down = nullptr;     // [hidden, intermediate]
};

struct CudaWeights {
  void* embedding = nullptr;   // [vocab, hidden]
  void* final_norm = nullptr;  // [hidden]
  void* lm_head = nullptr;     // [vocab, hidden]; the embedding when tied
  std::vector<CudaLayerWeights> layers;
};

absl::StatusOr<CudaWeights> UploadWeights(const ModelConfig& config, const ModelWeightsF32& weights,
                                          DeviceArena* arena);

absl::StatusOr<CudaWeights> RandomWeights(const ModelConfig& config, uint64_t seed,
                                          DeviceArena* arena, cudaStream_t stream);

// Device kernel (synthetic_weights.cu): n BF16 values center + half_width * u,
// u uniform in [-1, 1) from a counter-based hash of (seed, index); a value
// that rounds to zero becomes center + half_width.
absl::Status FillUniformBf16(void* data, int64_t n, uint64_t seed, float center, float half_width,
                             cudaStream_t stream);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_RUNTIME_CUDA_CUDA_WEIGHTS_H_
