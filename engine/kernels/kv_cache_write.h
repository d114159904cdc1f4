// KV-cache write: copies each token's K and V heads into its slot of the paged
// pools (layout in engine/kv_cache/kv_layout.h). A token's slot is
//   slot_mapping[t] = block_table[position / block_size] * block_size
//                     + position % block_size
// (KvSlot below computes it); a negative slot skips the
// token (padding). k and v may be views into a packed qkv activation.
// With fp8 set the pools hold E4M3 codes, E4m3CodeOf(x, scale[kv_head]).
// Reference: KvCacheWriteRef (kv_cache_write_ref.cc, F32 and BF16 inputs,
// pools of that dtype or FP8; slots outside the pool, fp8.k without fp8.v
// or the reverse, and scales that are not finite and > 0 are an
// InvalidArgument naming the token or the field). CUDA:
// KvCacheWrite (kv_cache_write.cu; assumes validated slots).
// Tested by tests/engine/kernels/kv_cache_write_ref_test.cc.
#ifndef ONECARD_ENGINE_KERNELS_KV_CACHE_WRITE_H_
#define ONECARD_ENGINE_KERNELS_KV_CACHE_WRITE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "engine/common/dtype.h"
#include "engine/kernels/stream.h"
#include "engine/kv_cache/kv_layout.h"

namespace onecard::engine {

struct KvCacheWriteParams {
  DType dtype = DType::kF32;   // of k, v and the pools (unless fp8)
  const void* k = nullptr;     // [num_tokens, num_kv_heads, head_dim]
  const void* v = nullptr;     // [num_tokens, num_kv_heads, head_dim]
  int64_t k_token_stride = 0;  // elements between tokens; >= num_kv_heads * head_dim
  int64_t v_token_stride = 0;
  void* k_cache = nullptr;  // [num_blocks, block_size, num_kv_heads, head_dim]
  void* v_cache = nullptr;  // [num_blocks, block_size, num_kv_heads, head_dim]
  KvLayout layout;
  const int32_t* slot_mapping = nullptr;  // [num_tokens]; < 0 skips the token
  int32_t num_tokens = 0;
  // Set: the pools are FP8 E4M3 codes (uint8) with these scales, written as
  // E4m3CodeOf(x, scale) from k and v of `dtype` (kv_layout.h).
  KvFp8Scales fp8;
};

// The slot of position `position` of a sequence whose blocks are block_table.
ONECARD_HOST_DEVICE inline int32_t KvSlot(const KvLayout& layout, const int32_t* block_table,
                                          int32_t position) {
  return block_table[position / layout.block_size] * layout.block_size +
         position % layout.block_size;
}

absl::Status KvCacheWriteRef(const KvCacheWriteParams& params);
absl::Status KvCacheWrite(const KvCacheWriteParams& params, cudaStream_t stream);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_KERNELS_KV_CACHE_WRITE_H_
