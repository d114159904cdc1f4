// Device helpers of the FP8 E4M3 KV cache (KvFp8Scales, kv_layout.h), shared
// by the KV writes (kv_cache_write.cu, rope_kv_write.cu) and the attention
// kernels (paged_attention*.cu):
// - a value is stored as E4m3CodeOf(x, scale) (engine/common/fp8.h: x times
//   the scale's reciprocal, round
//   to nearest even, saturating), the references' arithmetic exactly;
// - the attention kernels widen codes to f16 (exact: E4M3's values are all
//   f16 values) for f16 tensor-core products, and apply the scales outside
//   the products: a kv head's K scale multiplies its scores, its V scale its
//   output.
// Tested through tests/gpu/rope_kv_test.cc and paged_attention_test.cc.
#ifndef ONECARD_ENGINE_KERNELS_KV_FP8_CUH_
#define ONECARD_ENGINE_KERNELS_KV_FP8_CUH_

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "engine/common/fp8.h"
#include "engine/kernels/cuda_common.cuh"

namespace onecard::engine::kvfp8 {

__device__ __forceinline__ uint8_t Encode(float x, float scale) { return E4m3CodeOf(x, scale); }

// Two codes (low byte first) for a BF16 pair.
__device__ __forceinline__ uint16_t Encode2(__nv_bfloat162 x, float scale) {
  const float2 f = __bfloat1622float2(x);
  return static_cast<uint16_t>(Encode(f.x, scale) | (Encode(f.y, scale) << 8));
}

// Eight codes for eight packed BF16 values.
__device__ __forceinline__ uint2 Encode8(const uint4& x, float scale) {
  float v[8];
  cuda::Unpack8(x, v);
  uint32_t w[2] = {0u, 0u};
#pragma unroll
  for (int i = 0; i < 8; ++i)
    w[i / 4] |= static_cast<uint32_t>(Encode(v[i], scale)) << (8 * (i % 4));
  return make_uint2(w[0], w[1]);
}

// Two codes (low byte first) widened to an f16 pair, exactly.
__device__ __forceinline__ uint32_t WidenF16x2(uint32_t two_codes) {
  const __half2_raw h =
      __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(two_codes & 0xffffu), __NV_E4M3);
  return static_cast<uint32_t>(h.x) | (static_cast<uint32_t>(h.y) << 16);
}

// Sixteen codes widened to sixteen f16 values (two 16-byte rows' worth).
__device__ __forceinline__ void Widen16(const uint4& codes, uint4* lo, uint4* hi) {
  *lo = make_uint4(WidenF16x2(codes.x), WidenF16x2(codes.x >> 16), WidenF16x2(codes.y),
                   WidenF16x2(codes.y >> 16));
  *hi = make_uint4(WidenF16x2(codes.z), WidenF16x2(codes.z >> 16), WidenF16x2(codes.w),
                   WidenF16x2(codes.w >> 16));
}

// A BF16 pair as an f16 pair (saturating: no infinity from a finite input).
__device__ __forceinline__ uint32_t Bf16x2ToF16x2(uint32_t x) {
  const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&x));
  const __half2 h = __floats2half2_rn(fminf(fmaxf(f.x, -65504.0f), 65504.0f),
                                      fminf(fmaxf(f.y, -65504.0f), 65504.0f));
  return *reinterpret_cast<const uint32_t*>(&h);
}

__device__ __forceinline__ uint32_t PackF16x2(float lo, float hi) {
  const __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&h);
}

}  // namespace onecard::engine::kvfp8

#endif  // ONECARD_ENGINE_KERNELS_KV_FP8_CUH_
