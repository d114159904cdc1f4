// Int4DequantizeBf16 on CUDA (see int4_dequant.h): a warp a 16 x 64 tile; a
// lane reads its 16 bytes of codes (rows gr and gr + 8, 16 columns each) and
// the two rows' scale and offset, and writes 4 BF16 values (8 bytes) per row
// and k16 slice (act order: one value at a time, to its column). Tested by
// tests/gpu/int4_gemm_test.cc (Int4DequantTest).
#include <cuda_fp16.h>

#include "engine/kernels/cuda_check.h"
#include "engine/kernels/cuda_common.cuh"
#include "engine/kernels/cuda_ptx.cuh"
#include "engine/kernels/int4_dequant.h"

namespace onecard::engine {
namespace {

// fp32 value of code q with scale s and offset bits o (Int4Value).
__device__ __forceinline__ float Value(Int4Offsets kind, uint32_t q, float s, uint16_t o) {
  if (kind == Int4Offsets::kSymmetric) return s * static_cast<float>(static_cast<int>(q) - 8);
  if (kind == Int4Offsets::kZero) {
    return s * static_cast<float>(static_cast<int>(q) - static_cast<int16_t>(o));
  }
  return __fadd_rn(__fmul_rn(s, static_cast<float>(q)), __half2float(__ushort_as_half(o)));
}

__global__ void Int4DequantKernel(Int4DequantParams p, int64_t tiles) {
  const int64_t tile = blockIdx.x * 8LL + (threadIdx.x >> 5);
  if (tile >= tiles) return;
  const Int4WeightView& w = p.w;
  const int32_t num_groups = static_cast<int32_t>(w.k / w.group);
  const auto* scales = static_cast<const uint32_t*>(w.scales);
  const auto* offsets = static_cast<const uint32_t*>(w.offsets);
  auto* out_rows = static_cast<uint16_t*>(p.out);
  const int lane = threadIdx.x & 31, gr = lane >> 2, t4 = lane & 3;
  const int64_t k_tiles = w.k / kInt4TileCols, n_tiles = w.n / kInt4TileRows;
  const int64_t rt = tile / k_tiles, kt = tile % k_tiles;  // `tile` counts row tile first
  const uint4 v = cuda::LoadStreaming(static_cast<const uint4*>(w.codes) +
                                      Int4TileIndex(rt, kt, k_tiles, n_tiles) * 32 + lane);
  const uint32_t words[4] = {v.x, v.y, v.z, v.w};
  const int64_t rows[2] = {rt * 16 + gr, rt * 16 + gr + 8};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t col = kt * kInt4TileCols + 16 * i + 4 * t4;
    const int64_t word = Int4ScalePosition(rows[0], col / w.group, num_groups, w.n).word;
    const uint32_t sw = scales[word];
    const uint32_t ow = w.offset_kind == Int4Offsets::kSymmetric ? 0u : offsets[word];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const float s = __half2float(__ushort_as_half(static_cast<uint16_t>(sw >> (16 * half))));
      const uint16_t o = static_cast<uint16_t>(ow >> (16 * half));
      uint16_t out[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int nibble = 4 * (j & 1) + 2 * (j >> 1) + half;  // int4_layout.h's table
        const uint32_t q = (words[i] >> (4 * nibble)) & 0xF;
        out[j] = __bfloat16_as_ushort(__float2bfloat16_rn(Value(w.offset_kind, q, s, o)));
      }
      const int64_t dst = Int4DequantOutputRow(rows[half], w.n, p.gate_up);
      if (p.columns != nullptr) {  // act order: each value to its own column
#pragma unroll
        for (int j = 0; j < 4; ++j) out_rows[dst * w.k + __ldg(p.columns + col + j)] = out[j];
        continue;
      }
      *reinterpret_cast<uint2*>(out_rows + dst * w.k + col) =
          make_uint2(out[0] | (uint32_t{out[1]} << 16), out[2] | (uint32_t{out[3]} << 16));
    }
  }
}

}  // namespace

absl::Status Int4DequantizeBf16(const Int4DequantParams& p, cudaStream_t stream) {
  RETURN_IF_ERROR(CheckInt4DequantParams(p, "Int4DequantizeBf16"));
  const int64_t tiles = (p.w.n / kInt4TileRows) * (p.w.k / kInt4TileCols);
  const int64_t blocks = cuda::CeilDiv(tiles, 8);
  Int4DequantKernel<<<static_cast<unsigned>(blocks), 256, 0, stream>>>(p, tiles);
  CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

}  // namespace onecard::engine
