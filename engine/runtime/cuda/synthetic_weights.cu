// FillUniformBf16 (see cuda_weights.h): splitmix64 of (seed, index), 24 bits
// to a uniform in [-1, 1), one thread per value in a grid-stride loop.
// Tested through tests/gpu/cuda_model_runner_test.cc (synthetic runners).
#include <cuda_bf16.h>

#include "engine/runtime/cuda/cuda_weights.h"
#include "engine/runtime/cuda_check.h"

namespace onecard::engine {
namespace {

__device__ __forceinline__ uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

__global__ void FillUniformKernel(__nv_bfloat16* out, int64_t n, uint64_t seed, float center,
                                  float half_width) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint64_t h = SplitMix64(seed ^ SplitMix64(static_cast<uint64_t>(i)));
    const float u = static_cast<float>(h >> 40) * (2.0f / 16777216.0f) - 1.0f;
    __nv_bfloat16 v = __float2bfloat16_rn(center + half_width * u);
    if (__bfloat162float(v) == 0.0f) v = __float2bfloat16_rn(center + half_width);
    out[i] = v;
  }
}

}  // namespace

absl::Status FillUniformBf16(void* data, int64_t n, uint64_t seed, float center, float half_width,
                             cudaStream_t stream) {
  if (n <= 0) return absl::OkStatus();
  const int64_t blocks = std::min<int64_t>((n + 255) / 256, 132 * 32);
  FillUniformKernel<<<static_cast<int>(blocks), 256, 0, stream>>>(static_cast<__nv_bfloat16*>(data),
                                                                  n, seed, center, half_width);
  CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

}  // namespace onecard::engine
