// RopeKvWrite: the attention block's step between the QKV projection and the
// attention, fused into one pass over the packed qkv activation:
//   1. qkv += bias (Qwen2's q/k/v bias; skipped when bias is null), rounded to
//      the storage type;
//   2. RoPE on the q and k heads, in place (rope.h semantics);
//   3. the (rotated) k and the v heads written to their slots of the paged
//      pools (kv_cache_write.h semantics; a negative slot skips the token).
// Its reference, RopeKvWriteRef, is the composition of the three references
// (the add, RopeRef, KvCacheWriteRef). CUDA: RopeKvWrite (rope_kv_write.cu).
// Tested by tests/engine/kernels/rope_kv_write_ref_test.cc (the reference,
// FP8 pools too) and tests/gpu/rope_kv_test.cc.
#ifndef ONECARD_ENGINE_KERNELS_ROPE_KV_WRITE_H_
#define ONECARD_ENGINE_KERNELS_ROPE_KV_WRITE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "engine/common/dtype.h"
#include "engine/kernels/stream.h"
#include "engine/kv_cache/kv_layout.h"

namespace onecard::engine {

struct RopeKvWriteParams {
  DType dtype = DType::kBF16;  // of qkv, bias and the pools unless fp8 (F32, BF16)
  void* qkv = nullptr;         // [num_tokens, (num_heads + 2 * num_kv_heads) * head_dim],
                               // per token q heads, then k heads, then v heads; in place
  const void* bias = nullptr;  // [(num_heads + 2 * num_kv_heads) * head_dim] or null
  void* k_cache = nullptr;     // [num_blocks, block_size, num_kv_heads, head_dim]
  void* v_cache = nullptr;     // [num_blocks, block_size, num_kv_heads, head_dim]
  KvLayout layout;             // num_kv_heads and head_dim (even) of the model
  int32_t num_heads = 0;
  const int32_t* positions = nullptr;     // [num_tokens], >= 0
  const int32_t* slot_mapping = nullptr;  // [num_tokens]; < 0 skips the cache write
  const float* inv_freq = nullptr;        // [head_dim / 2], from RopeInvFreq
  int32_t num_tokens = 0;
  // Set: the pools are FP8 E4M3 codes with these scales; step 3 writes
  // E4m3CodeOf(x, scale) of the rotated k (rounded to `dtype` first) and
  // of v (kv_layout.h).
  KvFp8Scales fp8;
};

absl::Status RopeKvWriteRef(const RopeKvWriteParams& params);
absl::Status RopeKvWrite(const RopeKvWriteParams& params, cudaStream_t stream);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_KERNELS_ROPE_KV_WRITE_H_
