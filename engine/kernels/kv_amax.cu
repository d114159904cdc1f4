// KvAmax on CUDA (see kv_amax.h): block (token, kv head), one thread an
// element of the head's K and V; a block reduces its maxima (warp, then
// shared memory) and folds them in with one atomicMax each on the float's
// bits (non-negative floats order as their bits do).
#include "engine/kernels/cuda_check.h"
#include "engine/kernels/cuda_common.cuh"
#include "engine/kernels/kv_amax.h"

namespace onecard::engine {
namespace {

template <typename T>
__global__ void KvAmaxKernel(KvAmaxParams p) {
  const int64_t t = blockIdx.x;
  const int h = blockIdx.y;
  if (p.slot_mapping[t] < 0) return;
  const int64_t d = p.layout.head_dim;
  const int64_t nkv = p.layout.num_kv_heads;
  const int64_t q_elems = static_cast<int64_t>(p.num_heads) * d;
  const T* k = static_cast<const T*>(p.qkv) + t * (q_elems + 2 * nkv * d) + q_elems + h * d;
  const T* v = k + nkv * d;
  float km = 0.0f, vm = 0.0f;
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
    km = fmaxf(km, fabsf(cuda::ToFloat(k[i])));
    vm = fmaxf(vm, fabsf(cuda::ToFloat(v[i])));
  }
  km = cuda::WarpMax(km);
  vm = cuda::WarpMax(vm);
  __shared__ float red[2][32];
  const int warp = threadIdx.x >> 5;
  if ((threadIdx.x & 31) == 0) {
    red[0][warp] = km;
    red[1][warp] = vm;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < static_cast<int>(blockDim.x >> 5); ++w) {
      km = fmaxf(km, red[0][w]);
      vm = fmaxf(vm, red[1][w]);
    }
    atomicMax(reinterpret_cast<unsigned int*>(p.k_amax + h), __float_as_uint(km));
    atomicMax(reinterpret_cast<unsigned int*>(p.v_amax + h), __float_as_uint(vm));
  }
}

}  // namespace

absl::Status KvAmax(const KvAmaxParams& p, cudaStream_t stream) {
  constexpr char kOp[] = "KvAmax";
  if (p.num_tokens < 0 || p.num_heads <= 0 || p.layout.num_kv_heads <= 0 ||
      p.layout.head_dim <= 0) {
    return absl::InvalidArgumentError(
        cuda::Cat(kOp, ": bad sizes num_tokens=", p.num_tokens, " num_heads=", p.num_heads,
                  " num_kv_heads=", p.layout.num_kv_heads, " head_dim=", p.layout.head_dim));
  }
  if (p.num_tokens == 0) return absl::OkStatus();
  return cuda::DispatchFloatDType(kOp, p.dtype, [&]<typename T>() -> absl::Status {
    KvAmaxKernel<T><<<dim3(p.num_tokens, p.layout.num_kv_heads), 128, 0, stream>>>(p);
    CUDA_RETURN_IF_ERROR(cudaGetLastError());
    return absl::OkStatus();
  });
}

}  // namespace onecard::engine
