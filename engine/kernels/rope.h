// Rotary position embedding, applied in place to q and k, in the HF
// "rotate_half" convention (Llama / Qwen2 / Mistral checkpoints as HF stores
// them): for each head and i < head_dim / 2, with a = position * inv_freq[i],
//   x[i]              <- x[i] * cos(a) - x[i + head_dim/2] * sin(a)
//   x[i + head_dim/2] <- x[i + head_dim/2] * cos(a) + x[i] * sin(a)
// i.e. the pair (x[i], x[i + head_dim/2]) read as a complex number is
// multiplied by e^{ia}. Positions are per token (chunks of different
// sequences sit side by side). inv_freq comes from RopeInvFreq, which applies
// llama3 frequency scaling when the config asks for it; the CUDA side copies
// the same table to the device once.
// q and k may be views into a packed qkv activation: each has a token stride.
// Reference: RopeRef (rope_ref.cc, F32 and BF16). CUDA: Rope (rope.cu).
// Tested by tests/engine/kernels/rope_ref_test.cc.
#ifndef ONECARD_ENGINE_KERNELS_ROPE_H_
#define ONECARD_ENGINE_KERNELS_ROPE_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "engine/common/dtype.h"
#include "engine/kernels/stream.h"
#include "engine/model/model_config.h"

namespace onecard::engine {

struct RopeParams {
  DType dtype = DType::kF32;           // of q and k
  void* q = nullptr;                   // [num_tokens, num_heads, head_dim], in place
  void* k = nullptr;                   // [num_tokens, num_kv_heads, head_dim], in place
  int64_t q_token_stride = 0;          // elements between tokens; >= num_heads * head_dim
  int64_t k_token_stride = 0;          // elements between tokens; >= num_kv_heads * head_dim
  const int32_t* positions = nullptr;  // [num_tokens], >= 0
  const float* inv_freq = nullptr;     // [head_dim / 2], from RopeInvFreq
  int32_t num_tokens = 0;
  int32_t num_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;  // even
};

// inv_freq[i] = 1 / theta^(2i / head_dim), i < head_dim / 2, in fp32 as HF
// computes it; with scaling.enabled, llama3 scaling: wavelengths 2*pi/inv_freq
// shorter than original_max_position_embeddings / high_freq_factor are kept,
// longer than original_max_position_embeddings / low_freq_factor are divided
// by factor, and those between are interpolated smoothly.
std::vector<float> RopeInvFreq(int32_t head_dim, float theta, const RopeScaling& scaling);

absl::Status RopeRef(const RopeParams& params);
absl::Status Rope(const RopeParams& params, cudaStream_t stream);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_KERNELS_ROPE_H_
