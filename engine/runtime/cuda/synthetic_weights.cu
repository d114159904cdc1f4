// FillUniformBf16, FillRandomWords, FillInt4Scales, FillFp8 (see cuda_weights.h):
// splitmix64 of (seed, index), 24 bits to a uniform in [-1, 1), one thread
// per value in a grid-stride loop.
// Tested through tests/gpu/cuda_model_runner_test.cc (synthetic runners).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "engine/common/fp8.h"
#include "engine/kernels/cuda_check.h"
#include "engine/runtime/cuda/cuda_weights.h"

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

__device__ __forceinline__ float Uniform(uint64_t seed, uint64_t i) {
  const uint64_t h = SplitMix64(seed ^ SplitMix64(i));
  return static_cast<float>(h >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

__global__ void FillWordsKernel(uint32_t* out, int64_t n, uint64_t seed) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] = static_cast<uint32_t>(SplitMix64(seed ^ SplitMix64(static_cast<uint64_t>(i))));
  }
}

__global__ void FillInt4ScalesKernel(uint32_t* scales, uint32_t* offsets, int64_t n, uint64_t seed,
                                     float scale, Int4Offsets kind) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    uint32_t s_word = 0, o_word = 0;
    for (int half = 0; half < 2; ++half) {
      const uint64_t j = 4 * static_cast<uint64_t>(i) + 2 * half;
      const float s = scale * (1.0f + 0.5f * Uniform(seed, j));
      const __half sh = __float2half_rn(s);
      s_word |= static_cast<uint32_t>(__half_as_ushort(sh)) << (16 * half);
      const float u = Uniform(seed, j + 1);
      const uint32_t o =
          kind == Int4Offsets::kZero
              ? static_cast<uint32_t>(min(15, static_cast<int>(8.0f + 8.0f * u)))
              : __half_as_ushort(__float2half_rn(-__half2float(sh) * (8.0f + 2.0f * u)));
      o_word |= o << (16 * half);
    }
    scales[i] = s_word;
    if (offsets != nullptr) offsets[i] = o_word;
  }
}

__global__ void FillFp8CodesKernel(uint32_t* out, int64_t n, uint64_t seed) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    uint32_t word = 0;
    for (int b = 0; b < 4; ++b) {
      word |= static_cast<uint32_t>(FloatToE4m3(kE4m3Max * Uniform(seed, 4 * i + b))) << (8 * b);
    }
    out[i] = word;
  }
}

__global__ void FillScalesKernel(float* out, int64_t n, uint64_t seed, float scale) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    out[i] = scale * (1.0f + 0.5f * Uniform(seed, i));
  }
}

int GridFor(int64_t n) { return static_cast<int>(std::min<int64_t>((n + 255) / 256, 132 * 32)); }

}  // namespace

absl::Status FillRandomWords(void* data, int64_t n, uint64_t seed, cudaStream_t stream) {
  if (n <= 0) return absl::OkStatus();
  FillWordsKernel<<<GridFor(n), 256, 0, stream>>>(static_cast<uint32_t*>(data), n, seed);
  CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

absl::Status FillInt4Scales(void* scales, void* offsets, int64_t n, uint64_t seed, float scale,
                            Int4Offsets kind, cudaStream_t stream) {
  if (n <= 0) return absl::OkStatus();
  FillInt4ScalesKernel<<<GridFor(n), 256, 0, stream>>>(
      static_cast<uint32_t*>(scales), static_cast<uint32_t*>(offsets), n, seed, scale, kind);
  CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

absl::Status FillFp8(void* codes, int64_t num_codes, float* scales, int64_t num_scales,
                     uint64_t seed, float scale, cudaStream_t stream) {
  if (num_codes % 4 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("FillFp8: ", num_codes, " codes, not whole words"));
  }
  if (num_codes > 0) {
    FillFp8CodesKernel<<<GridFor(num_codes / 4), 256, 0, stream>>>(static_cast<uint32_t*>(codes),
                                                                   num_codes / 4, seed);
    CUDA_RETURN_IF_ERROR(cudaGetLastError());
  }
  if (num_scales > 0) {
    FillScalesKernel<<<GridFor(num_scales), 256, 0, stream>>>(scales, num_scales, ~seed, scale);
    CUDA_RETURN_IF_ERROR(cudaGetLastError());
  }
  return absl::OkStatus();
}

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
