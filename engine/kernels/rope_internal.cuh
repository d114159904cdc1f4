// Internal to engine/kernels: the BF16 arithmetic of RopeKvWrite
// (rope_kv_write.h), shared by its kernel (rope_kv_write.cu) and by the
// flash decode kernel that does the same step for a decode batch
// (paged_attention_decode.cu), so that both write the same bits: the bias
// added to a pair of adjacent elements and rounded to BF16, then two
// rotations of the pairs (i, i + half) and (i + 1, i + 1 + half) in fp32.
// Tested through tests/gpu/rope_kv_test.cc and tests/gpu/paged_attention_test.cc.
#ifndef ONECARD_ENGINE_KERNELS_ROPE_INTERNAL_CUH_
#define ONECARD_ENGINE_KERNELS_ROPE_INTERNAL_CUH_

#include <cuda_bf16.h>

#include <cstdint>

#include "engine/kernels/cuda_common.cuh"

namespace onecard::engine::rope {

// Elements i and i + 1 of x (+ bias, rounded to BF16 as stored; bias may be null).
__device__ __forceinline__ float2 LoadBiased2(const cuda::bf16* x, const cuda::bf16* bias,
                                              int64_t i) {
  const float2 v = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(x + i));
  if (bias == nullptr) return v;
  const float2 b = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(bias + i));
  return make_float2(cuda::RoundTo<cuda::bf16>(v.x + b.x), cuda::RoundTo<cuda::bf16>(v.y + b.y));
}

// The angles of dims i0 and i0 + 1 at `position`.
struct Angles2 {
  float s0, c0, s1, c1;
};

__device__ __forceinline__ Angles2 AnglesAt(float position, const float* inv_freq, int i0) {
  Angles2 r;
  sincosf(position * inv_freq[i0], &r.s0, &r.c0);
  sincosf(position * inv_freq[i0 + 1], &r.s1, &r.c1);
  return r;
}

// Rotates the head at `x` (bias at `bias`, null for none) in dims i0, i0 + 1
// and their partners i0 + half, i0 + 1 + half: *lo and *hi get the BF16
// results for (i0, i0 + 1) and (i0 + half, i0 + 1 + half).
__device__ __forceinline__ void Rotate2(const cuda::bf16* x, const cuda::bf16* bias, int64_t i0,
                                        int half, const Angles2& an, __nv_bfloat162* lo,
                                        __nv_bfloat162* hi) {
  const float2 x1 = LoadBiased2(x, bias, i0);
  const float2 x2 = LoadBiased2(x, bias, i0 + half);
  *lo = __floats2bfloat162_rn(x1.x * an.c0 - x2.x * an.s0, x1.y * an.c1 - x2.y * an.s1);
  *hi = __floats2bfloat162_rn(x2.x * an.c0 + x1.x * an.s0, x2.y * an.c1 + x1.y * an.s1);
}

// Eight elements of x at i (+ bias, added in fp32 and rounded once), packed.
__device__ __forceinline__ uint4 LoadBiased8(const cuda::bf16* x, const cuda::bf16* bias,
                                             int64_t i) {
  const uint4 raw = *reinterpret_cast<const uint4*>(x + i);
  if (bias == nullptr) return raw;
  float v[8], b[8];
  cuda::Unpack8(raw, v);
  cuda::Unpack8(*reinterpret_cast<const uint4*>(bias + i), b);
#pragma unroll
  for (int k = 0; k < 8; ++k) v[k] += b[k];
  return cuda::Pack8(v);
}

}  // namespace onecard::engine::rope

#endif  // ONECARD_ENGINE_KERNELS_ROPE_INTERNAL_CUH_
