// KvAmax: the largest |value| of each kv head's K and of its V over a step's
// packed qkv rows (after RopeKvWrite: rotated k, biased v), folded into
// running maxima:
//   k_amax[h] = max(k_amax[h], max over tokens t, dims d of |k[t, h, d]|)
//   v_amax[h] likewise
// Tokens whose slot is negative (padding) are skipped. The FP8 KV cache's
// calibration (engine/runtime/kv_scales.h) sets a layer's scales from it.
// Reference: KvAmaxRef (kv_amax_ref.cc, F32 and BF16). CUDA: KvAmax
// (kv_amax.cu). Tested by tests/gpu/paged_attention_fp8_test.cc.
#ifndef ONECARD_ENGINE_KERNELS_KV_AMAX_H_
#define ONECARD_ENGINE_KERNELS_KV_AMAX_H_

#include <cstdint>

#include "absl/status/status.h"
#include "engine/common/dtype.h"
#include "engine/kernels/stream.h"
#include "engine/kv_cache/kv_layout.h"

namespace onecard::engine {

struct KvAmaxParams {
  DType dtype = DType::kBF16;  // of qkv (F32, BF16)
  const void* qkv = nullptr;   // [num_tokens, (num_heads + 2 num_kv_heads) head_dim]
  KvLayout layout;             // num_kv_heads and head_dim
  int32_t num_heads = 0;
  const int32_t* slot_mapping = nullptr;  // [num_tokens]; < 0 skips the token
  int32_t num_tokens = 0;
  float* k_amax = nullptr;  // [num_kv_heads], >= 0 on entry: running maxima
  float* v_amax = nullptr;  // [num_kv_heads]
};

absl::Status KvAmaxRef(const KvAmaxParams& params);
absl::Status KvAmax(const KvAmaxParams& params, cudaStream_t stream);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_KERNELS_KV_AMAX_H_
