// KvCacheWrite on CUDA (see kv_cache_write.h): one block per token copies its
// K and V rows ([num_kv_heads * head_dim], contiguous in a slot of the paged
// pools) into slot slot_mapping[t]; a negative slot skips the token. Rows
// whose byte size and addresses are 16-byte aligned go 16 bytes a thread.
// An FP8 cache (params.fp8) takes E4m3CodeOf(x, scale) of the element's kv
// head (kv_fp8.cuh), one element a thread.
// Tested by tests/gpu/rope_kv_test.cc against KvCacheWriteRef.
#include "engine/kernels/cuda_check.h"
#include "engine/kernels/cuda_common.cuh"
#include "engine/kernels/kv_cache_write.h"
#include "engine/kernels/kv_fp8.cuh"

namespace onecard::engine {
namespace {

// Strides and row lengths are in units of V.
template <typename V>
__global__ void KvCacheWriteKernel(const V* __restrict__ k, const V* __restrict__ v,
                                   int64_t k_stride, int64_t v_stride, V* __restrict__ k_cache,
                                   V* __restrict__ v_cache, const int32_t* __restrict__ slots,
                                   int64_t row) {
  const int64_t t = blockIdx.x;
  const int32_t slot = slots[t];
  if (slot < 0) return;
  const int64_t dst = static_cast<int64_t>(slot) * row;
  for (int64_t i = threadIdx.x; i < row; i += blockDim.x) {
    k_cache[dst + i] = k[t * k_stride + i];
    v_cache[dst + i] = v[t * v_stride + i];
  }
}

template <typename T>
__global__ void KvCacheWriteFp8Kernel(const T* __restrict__ k, const T* __restrict__ v,
                                      int64_t k_stride, int64_t v_stride,
                                      uint8_t* __restrict__ k_cache, uint8_t* __restrict__ v_cache,
                                      const int32_t* __restrict__ slots, KvFp8Scales scales,
                                      int32_t head_dim, int64_t row) {
  const int64_t t = blockIdx.x;
  const int32_t slot = slots[t];
  if (slot < 0) return;
  const int64_t dst = static_cast<int64_t>(slot) * row;
  for (int64_t i = threadIdx.x; i < row; i += blockDim.x) {
    const int64_t kvh = i / head_dim;
    k_cache[dst + i] = kvfp8::Encode(cuda::ToFloat(k[t * k_stride + i]), scales.k[kvh]);
    v_cache[dst + i] = kvfp8::Encode(cuda::ToFloat(v[t * v_stride + i]), scales.v[kvh]);
  }
}

bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

absl::Status KvCacheWrite(const KvCacheWriteParams& p, cudaStream_t stream) {
  constexpr char kOp[] = "KvCacheWrite";
  const int64_t row = static_cast<int64_t>(p.layout.num_kv_heads) * p.layout.head_dim;
  if (p.num_tokens < 0 || row <= 0 || p.k_token_stride < row || p.v_token_stride < row) {
    return absl::InvalidArgumentError(cuda::Cat(kOp, ": bad sizes num_tokens=", p.num_tokens,
                                                " row=", row, " strides=", p.k_token_stride, ",",
                                                p.v_token_stride));
  }
  if ((p.fp8.k == nullptr) != (p.fp8.v == nullptr)) {
    return absl::InvalidArgumentError(cuda::Cat(kOp, ": fp8.k and fp8.v must both be set or null"));
  }
  if (p.num_tokens == 0) return absl::OkStatus();
  if (p.fp8.enabled()) {
    return cuda::DispatchFloatDType(kOp, p.dtype, [&]<typename T>() -> absl::Status {
      KvCacheWriteFp8Kernel<T><<<p.num_tokens, 128, 0, stream>>>(
          static_cast<const T*>(p.k), static_cast<const T*>(p.v), p.k_token_stride,
          p.v_token_stride, static_cast<uint8_t*>(p.k_cache), static_cast<uint8_t*>(p.v_cache),
          p.slot_mapping, p.fp8, p.layout.head_dim, row);
      CUDA_RETURN_IF_ERROR(cudaGetLastError());
      return absl::OkStatus();
    });
  }
  return cuda::DispatchFloatDType(kOp, p.dtype, [&]<typename T>() -> absl::Status {
    const int64_t es = sizeof(T);
    const bool vec = (row * es) % 16 == 0 && (p.k_token_stride * es) % 16 == 0 &&
                     (p.v_token_stride * es) % 16 == 0 && Aligned16(p.k) && Aligned16(p.v) &&
                     Aligned16(p.k_cache) && Aligned16(p.v_cache);
    if (vec) {
      const int64_t w = 16 / es;
      KvCacheWriteKernel<uint4><<<p.num_tokens, 128, 0, stream>>>(
          static_cast<const uint4*>(p.k), static_cast<const uint4*>(p.v), p.k_token_stride / w,
          p.v_token_stride / w, static_cast<uint4*>(p.k_cache), static_cast<uint4*>(p.v_cache),
          p.slot_mapping, row / w);
    } else {
      KvCacheWriteKernel<T><<<p.num_tokens, 128, 0, stream>>>(
          static_cast<const T*>(p.k), static_cast<const T*>(p.v), p.k_token_stride,
          p.v_token_stride, static_cast<T*>(p.k_cache), static_cast<T*>(p.v_cache), p.slot_mapping,
          row);
    }
    CUDA_RETURN_IF_ERROR(cudaGetLastError());
    return absl::OkStatus();
  });
}

}  // namespace onecard::engine
