// Fp8DequantizeBf16 on CUDA (see fp8_dequant.h): a thread 16 codes of one
// row (one 16-byte load; 16 divides the 128-column blocks, so one scale),
// converted two at a time by the hardware (cvt.rn.f16x2.e4m3x2: exact, as
// every E4M3 value is a half), widened to fp32, times the scale, rounded to
// BF16, stored as two 16-byte vectors. Tested by tests/gpu/fp8_gemm_test.cc
// (Fp8DequantTest).
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "engine/kernels/cuda_check.h"
#include "engine/kernels/cuda_common.cuh"
#include "engine/kernels/cuda_ptx.cuh"
#include "engine/kernels/fp8_dequant.h"

namespace onecard::engine {
namespace {

constexpr int kThreads = 256;

// The values of the two codes in the low 16 bits of `pair` (first code
// lowest), times `scale`, as two BF16 in one word.
__device__ __forceinline__ uint32_t DequantPair(uint32_t pair, float scale) {
  const __half2_raw raw =
      __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(pair & 0xffffu), __NV_E4M3);
  const float2 v = __half22float2(__half2(raw));
  return cuda::PackBf16x2(__fmul_rn(v.x, scale), __fmul_rn(v.y, scale));
}

__global__ void Fp8DequantKernel(Fp8DequantParams p, int64_t chunks) {
  const int64_t chunks_a_row = p.w.k / 16;
  for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < chunks;
       i += int64_t{gridDim.x} * kThreads) {
    const int64_t r = i / chunks_a_row, c = (i % chunks_a_row) * 16;
    const uint4 v = cuda::LoadStreaming(static_cast<const uint4*>(p.w.codes) + i);
    const float scale = p.w.scales[Fp8ScaleIndex(r, c, p.w.k, p.w.scales_kind)];
    const uint32_t words[4] = {v.x, v.y, v.z, v.w};
    uint32_t out[8];
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      out[2 * w] = DequantPair(words[w], scale);
      out[2 * w + 1] = DequantPair(words[w] >> 16, scale);
    }
    uint4* dst = static_cast<uint4*>(p.out) + 2 * i;
    dst[0] = make_uint4(out[0], out[1], out[2], out[3]);
    dst[1] = make_uint4(out[4], out[5], out[6], out[7]);
  }
}

}  // namespace

absl::Status Fp8DequantizeBf16(const Fp8DequantParams& p, cudaStream_t stream) {
  RETURN_IF_ERROR(CheckFp8DequantParams(p, "Fp8DequantizeBf16"));
  if (reinterpret_cast<uintptr_t>(p.w.codes) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(p.out) % 16 != 0) {
    return absl::InvalidArgumentError("Fp8DequantizeBf16: w.codes and out must be 16-byte aligned");
  }
  const int64_t chunks = p.w.n * (p.w.k / 16);
  const int64_t blocks = std::min<int64_t>(cuda::CeilDiv(chunks, kThreads), int64_t{1} << 20);
  Fp8DequantKernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(p, chunks);
  CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

}  // namespace onecard::engine
