// RopeKvWrite on CUDA (see rope_kv_write.h): a few blocks per token add the
// bias, rotates the q and k pairs (sincosf, as Rope does) and writes k and v
// to the token's slot; the bias-added, rounded values are what RoPE reads,
// as in the composed reference.
// Tested by tests/gpu/rope_kv_test.cc against RopeKvWriteRef.
#include <algorithm>

#include "engine/kernels/cuda_common.cuh"
#include "engine/kernels/cuda_ptx.cuh"
#include "engine/kernels/rope_kv_write.h"
#include "engine/runtime/cuda_check.h"

namespace onecard::engine {
namespace {

template <typename T>
__device__ __forceinline__ float LoadBiased(const T* x, const T* bias, int64_t i) {
  const float v = cuda::ToFloat(x[i]);
  return bias == nullptr ? v : cuda::RoundTo<T>(v + cuda::ToFloat(bias[i]));
}

template <typename T>
__global__ void RopeKvWriteKernel(RopeKvWriteParams p) {
  cuda::GridDependencyWait();
  cuda::LaunchDependents();
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
  T* k_dst = static_cast<T*>(p.k_cache) + static_cast<int64_t>(slot) * kv_elems;
  T* v_dst = static_cast<T*>(p.v_cache) + static_cast<int64_t>(slot) * kv_elems;
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
      k_dst[a - q_elems] = y1;
      k_dst[a - q_elems + half] = y2;
    }
  }
  for (int64_t i = first; i < kv_elems; i += stride) {
    const int64_t a = q_elems + kv_elems + i;
    const T v = cuda::FromFloat<T>(LoadBiased(x, bias, a));
    x[a] = v;
    if (slot >= 0) v_dst[i] = v;
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
  if (p.num_tokens == 0) return absl::OkStatus();
  return cuda::DispatchFloatDType(kOp, p.dtype, [&]<typename T>() -> absl::Status {
    // Several blocks a token (a decode step has few tokens): one pair a thread.
    const int64_t pairs =
        static_cast<int64_t>(p.num_heads + p.layout.num_kv_heads) * (p.layout.head_dim / 2);
    const unsigned per_token =
        static_cast<unsigned>(std::min<int64_t>(cuda::CeilDiv(pairs, 128), 16));
    CUDA_RETURN_IF_ERROR(cuda::LaunchPdl(RopeKvWriteKernel<T>, dim3(p.num_tokens, per_token),
                                         dim3(128), 0, stream, p));
    return absl::OkStatus();
  });
}

}  // namespace onecard::engine
