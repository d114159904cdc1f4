// Device helpers of the 4-bit kernels (int4_gemm.cu, int4_gemm_tiled.cu) for
// the code layout of int4_layout.h: a code word's nibbles to bf16 mma
// operands, a column's group, fp16 pairs.
// Tested through tests/gpu/int4_gemm_test.cc.
#ifndef ONECARD_ENGINE_KERNELS_INT4_CODES_CUH_
#define ONECARD_ENGINE_KERNELS_INT4_CODES_CUH_

#include <cuda_fp16.h>

#include <cstdint>

#include "engine/kernels/cuda_common.cuh"
#include "engine/kernels/int4_gemm.h"

namespace onecard::engine::int4 {

enum class YKind : int32_t { kBf16, kBf16Add, kF32, kSiluMul };

// What both Int4Gemm kernels take from Int4GemmParams (their Args derive
// from it).
struct LaunchArgs {
  const uint4* codes;
  const uint32_t* scales;
  const uint32_t* offsets;
  int32_t n_tiles;  // n / 16
  int32_t k_tiles;  // k / 64
  int32_t group;
  float inv_group;     // 1 / group (GroupOf)
  int32_t num_groups;  // k / group
  const cuda::bf16* x;
  int64_t x_stride;
  void* y;
  YKind y_kind;
  int64_t n;
  int32_t rows;
  float* partials;        // the workspace's slots
  int32_t* counters_end;  // its end: counter t is counters_end[-1 - t]
};

inline LaunchArgs MakeLaunchArgs(const Int4GemmParams& p) {
  LaunchArgs a{};
  a.codes = static_cast<const uint4*>(p.w.codes);
  a.scales = static_cast<const uint32_t*>(p.w.scales);
  a.offsets = static_cast<const uint32_t*>(p.w.offsets);
  a.n_tiles = static_cast<int32_t>(p.w.n / kInt4TileRows);
  a.k_tiles = static_cast<int32_t>(p.w.k / kInt4TileCols);
  a.group = p.w.group;
  a.inv_group = 1.0f / static_cast<float>(p.w.group);
  a.num_groups = static_cast<int32_t>(p.w.k / p.w.group);
  a.x = static_cast<const cuda::bf16*>(p.x);
  a.x_stride = p.x_row_stride;
  a.y = p.y;
  a.y_kind = p.y_dtype == DType::kF32 ? YKind::kF32
             : p.silu_mul_y           ? YKind::kSiluMul
             : p.add_to_y             ? YKind::kBf16Add
                                      : YKind::kBf16;
  a.n = p.w.n;
  a.rows = p.rows;
  a.partials = static_cast<float*>(p.workspace);
  a.counters_end =
      reinterpret_cast<int32_t*>(static_cast<char*>(p.workspace) + p.workspace_bytes / 4 * 4);
  return a;
}

inline constexpr uint32_t kOnes = 0x3F803F80u;      // bf16 pair (1, 1)
inline constexpr uint32_t kMagic136 = 0x43084308u;  // bf16 pair (136, 136): 128 + 8

// The bf16 pair 128 + q of nibbles m and m + 4 of a code word: exact.
__device__ __forceinline__ uint32_t Dequant128(uint32_t word, int m) {
  uint32_t out;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;\n"
      : "=r"(out)
      : "r"(word >> (4 * m)), "n"(0x000f000f), "n"(0x43004300));
  return out;
}

__device__ __forceinline__ uint32_t SubBf16x2(uint32_t a, uint32_t b) {
  uint32_t out;
  asm("sub.rn.bf16x2 %0, %1, %2;\n" : "=r"(out) : "r"(a), "r"(b));
  return out;
}

// The bf16 pair a b, rounded once.
__device__ __forceinline__ uint32_t MulBf16x2(uint32_t a, uint32_t b) {
  uint32_t out;
  asm("mul.rn.bf16x2 %0, %1, %2;\n" : "=r"(out) : "r"(a), "r"(b));
  return out;
}

// The bf16 pair 128 + z subtracted from 128 + q for a zero point z in 0..127.
__device__ __forceinline__ uint32_t ZeroPair(uint32_t z) { return 0x43004300u | z | (z << 16); }

__device__ __forceinline__ float2 HalfPair(uint32_t w) {
  return __half22float2(*reinterpret_cast<const __half2*>(&w));
}

// The group of column c: exact for c < 2^22 - 1 (kInt4MaxK), and a few
// float instructions where an integer division takes ~28.
__device__ __forceinline__ int32_t GroupOf(int32_t c, float inv_group) {
  return __float2int_rd((static_cast<float>(c) + 0.5f) * inv_group);
}

// Writes output o of y from its fp32 sum (a.y_kind but kSiluMul: fp32,
// bf16, or bf16 added to y with rms_norm's two roundings).
__device__ __forceinline__ void StoreY(const LaunchArgs& a, int64_t o, float val) {
  if (a.y_kind == YKind::kF32) {
    static_cast<float*>(a.y)[o] = val;
  } else if (a.y_kind == YKind::kBf16Add) {
    cuda::bf16* y = static_cast<cuda::bf16*>(a.y);
    y[o] = __float2bfloat16_rn(cuda::RoundTo<cuda::bf16>(val) + __bfloat162float(y[o]));
  } else {
    static_cast<cuda::bf16*>(a.y)[o] = __float2bfloat16_rn(val);
  }
}

// kSiluMul: y[m][col] = bf16(silu(bf16(gate)) * bf16(up)).
__device__ __forceinline__ void StoreSiluMul(const LaunchArgs& a, int64_t m, int64_t col,
                                             float gate, float up) {
  const float g = cuda::RoundTo<cuda::bf16>(gate);
  const float u = cuda::RoundTo<cuda::bf16>(up);
  static_cast<cuda::bf16*>(a.y)[m * (a.n / 2) + col] =
      __float2bfloat16_rn(g / (1.0f + expf(-g)) * u);
}

}  // namespace onecard::engine::int4

#endif  // ONECARD_ENGINE_KERNELS_INT4_CODES_CUH_
