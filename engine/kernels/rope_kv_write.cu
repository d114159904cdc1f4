// RopeKvWrite on CUDA (see rope_kv_write.h): a few blocks per token add the
// bias, rotates the q and k pairs (sincosf, as Rope does) and writes k and v
// to the token's slot; the bias-added, rounded values are what RoPE reads,
// as in the composed reference. BF16 with head_dim % 8 == 0 (head_dim / 4
// dividing 256) takes a vectorized kernel, one pass a thread. With an FP8
// cache (params.fp8) both write the codes of the rounded values / the kv
// head's scale (kv_fp8.cuh) instead of the values.
// Tested by tests/gpu/rope_kv_test.cc against RopeKvWriteRef.
#include <algorithm>

#include "engine/kernels/cuda_check.h"
#include "engine/kernels/cuda_common.cuh"
#include "engine/kernels/cuda_ptx.cuh"
#include "engine/kernels/kv_fp8.cuh"
#include "engine/kernels/launch_settings.h"
#include "engine/kernels/rope_internal.cuh"
#include "engine/kernels/rope_kv_write.h"

namespace onecard::engine {
namespace {

template <typename T>
__device__ __forceinline__ float LoadBiased(const T* x, const T* bias, int64_t i) {
  const float v = cuda::ToFloat(x[i]);
  return bias == nullptr ? v : cuda::RoundTo<T>(v + cuda::ToFloat(bias[i]));
}

// kFp8: the pools hold codes (p.fp8); a separate instantiation, so the BF16
// and F32 kernels carry no FP8 code.
template <typename T, bool kFp8>
__global__ void RopeKvWriteKernel(RopeKvWriteParams p, bool early) {
  cuda::PdlEnter(early);
  const int64_t t = blockIdx.x;
  const int32_t d = p.layout.head_dim;
  const int32_t half = d / 2;
  const int32_t nkv = p.layout.num_kv_heads;
  const int64_t q_elems = static_cast<int64_t>(p.num_heads) * d;
  const int64_t kv_elems = static_cast<int64_t>(nkv) * d;
  const int64_t row = q_elems + 2 * kv_elems;
  T* x = static_cast<T*>(p.qkv) + t * row;
  const T* bias = static_cast<const T*>(p.bias);
  const int32_t slot = p.slot_mapping[t];
  const int64_t kv_at = static_cast<int64_t>(slot) * kv_elems;
  T* k_dst = static_cast<T*>(p.k_cache) + kv_at;
  T* v_dst = static_cast<T*>(p.v_cache) + kv_at;
  uint8_t* k_codes = static_cast<uint8_t*>(p.k_cache) + kv_at;  // kFp8
  uint8_t* v_codes = static_cast<uint8_t*>(p.v_cache) + kv_at;
  const float position = static_cast<float>(p.positions[t]);
  const int32_t pairs = (p.num_heads + nkv) * half;
  const int32_t first = blockIdx.y * blockDim.x + threadIdx.x;
  const int32_t stride = gridDim.y * blockDim.x;
  for (int32_t idx = first; idx < pairs; idx += stride) {
    const int32_t head = idx / half;
    const int32_t i = idx - head * half;
    const int64_t a = static_cast<int64_t>(head) * d + i;  // q heads then k heads
    float s, c;
    sincosf(position * p.inv_freq[i], &s, &c);
    const float x1 = LoadBiased(x, bias, a);
    const float x2 = LoadBiased(x, bias, a + half);
    const T y1 = cuda::FromFloat<T>(x1 * c - x2 * s);
    const T y2 = cuda::FromFloat<T>(x2 * c + x1 * s);
    x[a] = y1;
    x[a + half] = y2;
    if (head >= p.num_heads && slot >= 0) {
      if constexpr (kFp8) {
        const float scale = p.fp8.k[head - p.num_heads];
        k_codes[a - q_elems] = kvfp8::Encode(cuda::ToFloat(y1), scale);
        k_codes[a - q_elems + half] = kvfp8::Encode(cuda::ToFloat(y2), scale);
      } else {
        k_dst[a - q_elems] = y1;
        k_dst[a - q_elems + half] = y2;
      }
    }
  }
  for (int64_t i = first; i < kv_elems; i += stride) {
    const int64_t a = q_elems + kv_elems + i;
    const T v = cuda::FromFloat<T>(LoadBiased(x, bias, a));
    x[a] = v;
    if (slot >= 0) {
      if constexpr (kFp8) {
        v_codes[i] = kvfp8::Encode(cuda::ToFloat(v), p.fp8.v[i / d]);
      } else {
        v_dst[i] = v;
      }
    }
  }
}

// BF16, head_dim % 8 == 0 and (head_dim / 4) dividing the block: block
// (token, y) takes 256 / (head_dim / 4) heads, thread j of each group of
// head_dim / 4 threads the pairs (2j, 2j + 1) of a head (4-byte loads), so a
// thread computes its two angles once; v moves 16 bytes a thread, spread
// over the token's blocks.
constexpr int kTokenThreads = 256;

template <bool kFp8>
__global__ void __launch_bounds__(kTokenThreads)
    RopeKvWriteBf16Kernel(RopeKvWriteParams p, bool early) {
  using cuda::bf16;
  cuda::PdlEnter(early);
  const int64_t t = blockIdx.x;
  const int32_t d = p.layout.head_dim;
  const int32_t half = d / 2;
  const int32_t group = half / 2;  // threads a head
  const int32_t heads_per_block = kTokenThreads / group;
  const int32_t nkv = p.layout.num_kv_heads;
  const int64_t q_elems = static_cast<int64_t>(p.num_heads) * d;
  const int64_t kv_elems = static_cast<int64_t>(nkv) * d;
  bf16* x = static_cast<bf16*>(p.qkv) + t * (q_elems + 2 * kv_elems);
  const bf16* bias = static_cast<const bf16*>(p.bias);
  const int32_t slot = p.slot_mapping[t];
  const int64_t kv_at = static_cast<int64_t>(slot) * kv_elems;
  bf16* k_dst = static_cast<bf16*>(p.k_cache) + kv_at;
  bf16* v_dst = static_cast<bf16*>(p.v_cache) + kv_at;
  uint8_t* k_codes = static_cast<uint8_t*>(p.k_cache) + kv_at;  // kFp8
  uint8_t* v_codes = static_cast<uint8_t*>(p.v_cache) + kv_at;
  const float position = static_cast<float>(p.positions[t]);
  const int32_t i0 = 2 * (threadIdx.x % group);
  const rope::Angles2 angles = rope::AnglesAt(position, p.inv_freq, i0);
  for (int32_t head = blockIdx.y * heads_per_block + threadIdx.x / group;
       head < min(p.num_heads + nkv, (blockIdx.y + 1) * heads_per_block); head += heads_per_block) {
    const int64_t a = static_cast<int64_t>(head) * d + i0;  // q heads then k heads
    __nv_bfloat162 lo, hi;
    rope::Rotate2(x, bias, a, half, angles, &lo, &hi);
    *reinterpret_cast<__nv_bfloat162*>(x + a) = lo;
    *reinterpret_cast<__nv_bfloat162*>(x + a + half) = hi;
    if (head >= p.num_heads && slot >= 0) {
      if constexpr (kFp8) {
        const float scale = p.fp8.k[head - p.num_heads];
        *reinterpret_cast<uint16_t*>(k_codes + a - q_elems) = kvfp8::Encode2(lo, scale);
        *reinterpret_cast<uint16_t*>(k_codes + a - q_elems + half) = kvfp8::Encode2(hi, scale);
      } else {
        *reinterpret_cast<__nv_bfloat162*>(k_dst + a - q_elems) = lo;
        *reinterpret_cast<__nv_bfloat162*>(k_dst + a - q_elems + half) = hi;
      }
    }
  }
  for (int64_t i = blockIdx.y * kTokenThreads + threadIdx.x; i < kv_elems / 8;
       i += static_cast<int64_t>(gridDim.y) * kTokenThreads) {
    const int64_t a = q_elems + kv_elems + 8 * i;
    const uint4 packed = rope::LoadBiased8(x, bias, a);
    *reinterpret_cast<uint4*>(x + a) = packed;
    if (slot >= 0) {
      if constexpr (kFp8) {
        *reinterpret_cast<uint2*>(v_codes + 8 * i) = kvfp8::Encode8(packed, p.fp8.v[8 * i / d]);
      } else {
        *reinterpret_cast<uint4*>(v_dst + 8 * i) = packed;
      }
    }
  }
}

}  // namespace

absl::Status RopeKvWrite(const RopeKvWriteParams& p, cudaStream_t stream) {
  constexpr char kOp[] = "RopeKvWrite";
  if (p.num_tokens < 0 || p.num_heads <= 0 || p.layout.num_kv_heads <= 0 ||
      p.layout.head_dim <= 0 || p.layout.head_dim % 2 != 0) {
    return absl::InvalidArgumentError(
        cuda::Cat(kOp, ": bad sizes num_tokens=", p.num_tokens, " num_heads=", p.num_heads,
                  " num_kv_heads=", p.layout.num_kv_heads, " head_dim=", p.layout.head_dim));
  }
  if ((p.fp8.k == nullptr) != (p.fp8.v == nullptr)) {
    return absl::InvalidArgumentError(cuda::Cat(kOp, ": fp8.k and fp8.v must both be set or null"));
  }
  if (p.num_tokens == 0) return absl::OkStatus();
  const int32_t d = p.layout.head_dim;
  if (p.dtype == DType::kBF16 && d % 8 == 0 && kTokenThreads % (d / 4) == 0) {
    const int32_t heads_per_block = kTokenThreads / (d / 4);
    const unsigned blocks =
        static_cast<unsigned>(cuda::CeilDiv(p.num_heads + p.layout.num_kv_heads, heads_per_block));
    const auto kernel =
        p.fp8.enabled() ? RopeKvWriteBf16Kernel<true> : RopeKvWriteBf16Kernel<false>;
    CUDA_RETURN_IF_ERROR(cuda::LaunchPdl(kernel, dim3(p.num_tokens, blocks), dim3(kTokenThreads), 0,
                                         stream, p, GetLaunchSettings().early_dependents));
    return absl::OkStatus();
  }
  return cuda::DispatchFloatDType(kOp, p.dtype, [&]<typename T>() -> absl::Status {
    // Several blocks a token (a decode step has few tokens): one pair a thread.
    const int64_t pairs =
        static_cast<int64_t>(p.num_heads + p.layout.num_kv_heads) * (p.layout.head_dim / 2);
    const unsigned per_token =
        static_cast<unsigned>(std::min<int64_t>(cuda::CeilDiv(pairs, 128), 16));
    const auto kernel = p.fp8.enabled() ? RopeKvWriteKernel<T, true> : RopeKvWriteKernel<T, false>;
    CUDA_RETURN_IF_ERROR(cuda::LaunchPdl(kernel, dim3(p.num_tokens, per_token), dim3(128), 0,
                                         stream, p, GetLaunchSettings().early_dependents));
    return absl::OkStatus();
  });
}

}  // namespace onecard::engine
