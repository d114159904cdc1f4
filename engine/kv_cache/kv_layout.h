// The paged KV-cache layout, defined once for the CPU reference and the CUDA
// kernels (the index math is host/device inline).
//
// Per layer, K and V are each one pool of blocks:
//   k_cache, v_cache: [num_blocks, block_size, num_kv_heads, head_dim]
// A sequence's token at position p lives in block block_table[p / block_size],
// slot p % block_size. Block ids come from BlockManager.
#ifndef ONECARD_ENGINE_KV_CACHE_KV_LAYOUT_H_
#define ONECARD_ENGINE_KV_CACHE_KV_LAYOUT_H_

#include <cstdint>

#include "engine/common/host_device.h"

namespace onecard::engine {

struct KvLayout {
  int32_t num_blocks = 0;
  int32_t block_size = 16;  // tokens per block
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;

  // Elements of one block of K (or V) for one layer.
  ONECARD_HOST_DEVICE int64_t BlockStride() const {
    return static_cast<int64_t>(block_size) * num_kv_heads * head_dim;
  }
  // Element offset of (block, slot, kv_head, 0) in a layer's K (or V) pool.
  ONECARD_HOST_DEVICE int64_t Offset(int32_t block, int32_t slot, int32_t kv_head) const {
    return static_cast<int64_t>(block) * BlockStride() +
           (static_cast<int64_t>(slot) * num_kv_heads + kv_head) * head_dim;
  }
  ONECARD_HOST_DEVICE int64_t PoolElements() const {
    return static_cast<int64_t>(num_blocks) * BlockStride();
  }
};

// The scales of one layer's FP8 E4M3 KV cache (engine/common/fp8.h): one
// fp32 a kv head for K and one for V. A pool element is a code, read as
//   E4m3ToFloat(code) * scale[kv_head]
// and written as E4m3CodeOf(x, scale[kv_head]) (fp8.h: x times the
// reciprocal of the scale, then round to nearest even,
// saturating at +-448 * scale). Null pointers: the pools are not FP8 (they
// hold the op's dtype). Host memory for the references, device memory for
// the CUDA kernels.
struct KvFp8Scales {
  const float* k = nullptr;  // [num_kv_heads]
  const float* v = nullptr;  // [num_kv_heads]
  ONECARD_HOST_DEVICE bool enabled() const { return k != nullptr; }
};

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_KV_CACHE_KV_LAYOUT_H_
