// Embedding: the CUDA embedding gather (see embedding.h). One block per token
// copies its table row, 16 bytes a thread when rows are 16-byte multiples.
// Tested by tests/gpu/elementwise_test.cc against EmbeddingRef.
#include "engine/kernels/cuda_check.h"
#include "engine/kernels/cuda_common.cuh"
#include "engine/kernels/cuda_ptx.cuh"
#include "engine/kernels/embedding.h"

namespace onecard::engine {
namespace {

template <typename V>
__global__ void EmbeddingKernel(const int32_t* __restrict__ token_ids, const V* __restrict__ table,
                                V* __restrict__ out, int64_t vocab_size, int64_t row_vectors) {
  cuda::GridDependencyWait();
  cuda::LaunchDependents();
  const int64_t t = blockIdx.x;
  const int32_t id = token_ids[t];
  if (id < 0 || id >= vocab_size) return;  // the runner validates ids first
  const V* src = table + static_cast<int64_t>(id) * row_vectors;
  V* dst = out + t * row_vectors;
  for (int64_t i = threadIdx.x; i < row_vectors; i += blockDim.x) dst[i] = src[i];
}

template <typename V>
cudaError_t Launch(const EmbeddingParams& p, int64_t row_vectors, cudaStream_t stream) {
  return cuda::LaunchPdl(EmbeddingKernel<V>, dim3(p.num_tokens), dim3(256), 0, stream, p.token_ids,
                         static_cast<const V*>(p.table), static_cast<V*>(p.out), p.vocab_size,
                         row_vectors);
}

}  // namespace

absl::Status Embedding(const EmbeddingParams& p, cudaStream_t stream) {
  constexpr char kOp[] = "Embedding";
  if (p.num_tokens < 0 || p.hidden <= 0 || p.vocab_size <= 0) {
    return absl::InvalidArgumentError(cuda::Cat(kOp, ": bad sizes num_tokens=", p.num_tokens,
                                                " hidden=", p.hidden,
                                                " vocab_size=", p.vocab_size));
  }
  if (p.num_tokens == 0) return absl::OkStatus();
  return cuda::DispatchFloatDType(kOp, p.dtype, [&]<typename T>() -> absl::Status {
    const int64_t row_bytes = p.hidden * static_cast<int64_t>(sizeof(T));
    if (row_bytes % 16 == 0) {
      CUDA_RETURN_IF_ERROR(Launch<uint4>(p, row_bytes / 16, stream));
    } else {
      CUDA_RETURN_IF_ERROR(Launch<T>(p, p.hidden, stream));
    }
    return absl::OkStatus();
  });
}

}  // namespace onecard::engine
