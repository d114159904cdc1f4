// GatherRowsBf16 and GatherKvRowsBf16 (see runner_kernels.h): one block per
// row, 16 bytes a thread; FillPendingTokens: a thread a token.
// Tested through tests/gpu/cuda_model_runner_test.cc.
#include "engine/kernels/cuda_check.h"
#include "engine/kernels/cuda_common.cuh"
#include "engine/kernels/cuda_ptx.cuh"
#include "engine/runtime/cuda/runner_kernels.h"

namespace onecard::engine {
namespace {

__global__ void GatherRowsKernel(const uint4* __restrict__ src, const int32_t* __restrict__ rows,
                                 uint4* __restrict__ dst, int64_t vecs) {
  cuda::GridDependencyWait();
  cuda::LaunchDependents();
  const int64_t r = blockIdx.x;
  const uint4* s = src + static_cast<int64_t>(rows[r]) * vecs;
  for (int64_t i = threadIdx.x; i < vecs; i += blockDim.x) dst[r * vecs + i] = s[i];
}

__global__ void GatherKvRowsKernel(const uint4* __restrict__ k, const uint4* __restrict__ v,
                                   const int32_t* __restrict__ slots, uint4* __restrict__ dst,
                                   int64_t vecs) {
  cuda::GridDependencyWait();
  cuda::LaunchDependents();
  const int64_t t = blockIdx.x;
  const int64_t slot = slots[t];
  for (int64_t i = threadIdx.x; i < 2 * vecs; i += blockDim.x) {
    const uint4* src = i < vecs ? k + slot * vecs + i : v + slot * vecs + (i - vecs);
    dst[t * 2 * vecs + i] = slot < 0 ? make_uint4(0, 0, 0, 0) : *src;
  }
}

// Launched plainly (not PDL) and never triggering its dependents early: the
// step's first kernel reads the tokens only after this one has ended.
__global__ void FillPendingKernel(int32_t* __restrict__ tokens, int32_t num_tokens,
                                  const int32_t* __restrict__ previous) {
  const int32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= num_tokens) return;
  const int32_t v = tokens[i];
  if (v < 0) tokens[i] = previous[-v - 1];
}

}  // namespace

absl::Status FillPendingTokens(int32_t* tokens, int32_t num_tokens, const int32_t* previous,
                               cudaStream_t stream) {
  if (num_tokens <= 0) return absl::OkStatus();
  constexpr int kThreads = 256;
  FillPendingKernel<<<(num_tokens + kThreads - 1) / kThreads, kThreads, 0, stream>>>(
      tokens, num_tokens, previous);
  CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

absl::Status GatherKvRowsBf16(const void* k_pool, const void* v_pool, const int32_t* slots,
                              void* dst, int32_t num_tokens, int64_t kv_dim, cudaStream_t stream) {
  if (num_tokens <= 0) return absl::OkStatus();
  if (kv_dim % 8 != 0) {
    return absl::UnimplementedError("GatherKvRowsBf16: kv_dim must be a multiple of 8");
  }
  CUDA_RETURN_IF_ERROR(cuda::LaunchPdl(
      GatherKvRowsKernel, dim3(num_tokens), dim3(128), 0, stream, static_cast<const uint4*>(k_pool),
      static_cast<const uint4*>(v_pool), slots, static_cast<uint4*>(dst), kv_dim / 8));
  return absl::OkStatus();
}

absl::Status GatherRowsBf16(const void* src, const int32_t* rows, void* dst, int32_t num_rows,
                            int64_t hidden, cudaStream_t stream) {
  if (num_rows <= 0) return absl::OkStatus();
  if (hidden % 8 != 0) {
    return absl::UnimplementedError("GatherRowsBf16: hidden must be a multiple of 8");
  }
  CUDA_RETURN_IF_ERROR(cuda::LaunchPdl(GatherRowsKernel, dim3(num_rows), dim3(128), 0, stream,
                                       static_cast<const uint4*>(src), rows,
                                       static_cast<uint4*>(dst), hidden / 8));
  return absl::OkStatus();
}

}  // namespace onecard::engine
