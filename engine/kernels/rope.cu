// Rope on CUDA (see rope.h): one block per token rotates every (x[i],
// x[i + head_dim/2]) pair of its q and k heads in place, with sincosf of
// float(position) * inv_freq[i] (full-precision sincosf, no fast math), as
// RopeRef does with std::cos / std::sin.
// Tested by tests/gpu/rope_kv_test.cc against RopeRef.
#include "engine/kernels/cuda_check.h"
#include "engine/kernels/cuda_common.cuh"
#include "engine/kernels/rope.h"

namespace onecard::engine {
namespace {

template <typename T>
__global__ void RopeKernel(RopeParams p) {
  const int64_t t = blockIdx.x;
  const int32_t half = p.head_dim / 2;
  const float position = static_cast<float>(p.positions[t]);
  T* q = static_cast<T*>(p.q) + t * p.q_token_stride;
  T* k = static_cast<T*>(p.k) + t * p.k_token_stride;
  const int32_t pairs = (p.num_heads + p.num_kv_heads) * half;
  for (int32_t idx = threadIdx.x; idx < pairs; idx += blockDim.x) {
    const int32_t head = idx / half;
    const int32_t i = idx - head * half;
    T* x = head < p.num_heads ? q + head * p.head_dim : k + (head - p.num_heads) * p.head_dim;
    float s, c;
    sincosf(position * p.inv_freq[i], &s, &c);
    const float x1 = cuda::ToFloat(x[i]);
    const float x2 = cuda::ToFloat(x[i + half]);
    x[i] = cuda::FromFloat<T>(x1 * c - x2 * s);
    x[i + half] = cuda::FromFloat<T>(x2 * c + x1 * s);
  }
}

}  // namespace

absl::Status Rope(const RopeParams& p, cudaStream_t stream) {
  constexpr char kOp[] = "Rope";
  if (p.num_tokens < 0 || p.head_dim <= 0 || p.head_dim % 2 != 0 || p.num_heads <= 0 ||
      p.num_kv_heads <= 0) {
    return absl::InvalidArgumentError(
        cuda::Cat(kOp, ": bad sizes num_tokens=", p.num_tokens, " head_dim=", p.head_dim,
                  " num_heads=", p.num_heads, " num_kv_heads=", p.num_kv_heads));
  }
  if (p.num_tokens == 0) return absl::OkStatus();
  return cuda::DispatchFloatDType(kOp, p.dtype, [&]<typename T>() -> absl::Status {
    RopeKernel<T><<<p.num_tokens, 128, 0, stream>>>(p);
    CUDA_RETURN_IF_ERROR(cudaGetLastError());
    return absl::OkStatus();
  });
}

}  // namespace onecard::engine
