// What the two CUDA kernels of Int4Gemm share (int4_gemm.cu: the pipelined
// kernel; int4_gemm_direct.cu: the direct-load kernel for 1..8 rows): the
// launch arguments, the stream-K split of the (row group x k tile)
// iterations and its walker, the dequantization of code words, a group's
// constants, and the end of a segment (partial sums, the last part's
// epilogue). Device code only; included by the two .cu files.
// A row's arithmetic is the same in both kernels and for any rows: fp32
// mma sums over 32 columns of exact (q - z) codes, then acc += scale * sum
// (mins: acc += s P + (m - 128 s) S), 32 columns at a time in k order.
#ifndef ONECARD_ENGINE_KERNELS_INT4_GEMM_INTERNAL_CUH_
#define ONECARD_ENGINE_KERNELS_INT4_GEMM_INTERNAL_CUH_

#include <cuda_fp16.h>

#include <cstdint>

#include "absl/status/status.h"
#include "engine/kernels/cuda_common.cuh"
#include "engine/kernels/cuda_ptx.cuh"
#include "engine/kernels/int4_gemm.h"

namespace onecard::engine::int4_gemm_internal {

inline constexpr int kWarps = 8;                    // warps computing: one 16-row tile each
inline constexpr uint32_t kOnes = 0x3F803F80u;      // bf16 pair (1, 1)
inline constexpr uint32_t kMagic136 = 0x43084308u;  // bf16 pair (136, 136): 128 + 8

// Whether q's offset is taken after the sums, through S = sum x (mins).
template <Int4Offsets kKind>
constexpr bool kSumX = kKind == Int4Offsets::kFloat;

enum class YKind : int32_t { kBf16, kBf16Add, kF32, kSiluMul };

struct Args {
  const uint4* codes;
  const uint32_t* scales;
  const uint32_t* offsets;
  int32_t n_tiles;  // n / 16
  int32_t k_tiles;  // k / 64
  int32_t group;
  int32_t num_groups;  // k / group
  const cuda::bf16* x;
  int64_t x_stride;
  const cuda::bf16* norm_w;
  float eps;
  void* y;
  YKind y_kind;
  int64_t n;
  int32_t rows;
  int32_t row_groups;
  int64_t iters;  // row_groups * k_tiles
  float* partials;
  int32_t* counters_end;  // one a row tile: tile t's is counters_end[-1 - t]
};

// The device's SMs (int4_gemm.cu).
int NumSms();

// The direct-load kernel's launch for 1..8 rows, no prologue
// (int4_gemm_direct.cu).
template <Int4Offsets kKind>
absl::Status LaunchDirect(const Args& a, cudaStream_t stream);

// First iteration of block b: b * iters / grid.
__device__ __forceinline__ int64_t ShareStart(int64_t b, const Args& a) {
  return b * a.iters / gridDim.x;
}

// The block whose share holds iteration i.
__device__ __forceinline__ int32_t BlockOf(int64_t i, const Args& a) {
  int64_t b = i * gridDim.x / a.iters;
  while (b + 1 < gridDim.x && ShareStart(b + 1, a) <= i) ++b;
  while (b > 0 && ShareStart(b, a) > i) --b;
  return static_cast<int32_t>(b);
}

// A stage's work: row group rg, k tiles [kt, kt + ntiles) of a segment (the
// part of one row group in this block's share).
struct Sub {
  int32_t rg, kt, ntiles;
  int32_t g;      // tiles in row group rg
  bool seg_last;  // ends its segment
  bool whole;     // its segment is the whole row group
};

// Walks a block's share sub by sub (one 64-bit division at the start, none
// after: a stage's bookkeeping must cost nothing next to its slices).
template <int kTpu>
struct Walker {
  int64_t left;     // iterations not yet walked
  int32_t rg, kt;   // of the next sub
  bool seg_from_0;  // the current segment started at k tile 0

  __device__ __forceinline__ Walker(int64_t begin, int64_t end, const Args& a)
      : left(end - begin),
        rg(static_cast<int32_t>(begin / a.k_tiles)),
        kt(static_cast<int32_t>(begin % a.k_tiles)),
        seg_from_0(kt == 0) {}

  __device__ __forceinline__ bool done() const { return left <= 0; }

  __device__ __forceinline__ Sub Next(const Args& a) {
    Sub s;
    s.rg = rg;
    s.kt = kt;
    const int32_t in_row = a.k_tiles - kt;
    const int64_t seg_left = left < in_row ? left : in_row;
    s.ntiles = static_cast<int32_t>(seg_left < kTpu ? seg_left : kTpu);
    s.seg_last = s.ntiles == seg_left;
    s.whole = s.seg_last && seg_from_0 && s.ntiles == in_row;
    s.g = static_cast<int32_t>(Int4GroupTiles(rg, a.n_tiles));
    left -= s.ntiles;
    kt += s.ntiles;
    if (kt == a.k_tiles) {
      kt = 0;
      ++rg;
      seg_from_0 = true;
    }
    return s;
  }
};

// The bf16 pair 128 + q of nibbles m and m + 4 of a code word.
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

__device__ __forceinline__ float2 HalfPair(uint32_t w) {
  return __half22float2(*reinterpret_cast<const __half2*>(&w));
}

// A group's constants for rows gr (.lo) and gr + 8 (.hi): the scales, and
// the pair subtracted from 128 + q before the sums (kSymmetric, kZero) or
// the factor c = m - 128 s of S after them (kFloat).
struct Span {
  float2 scale;
  uint32_t sub_lo, sub_hi;
  float2 c;
};

// From the group's scale word and offset word (int4_layout.h).
template <Int4Offsets kKind>
__device__ __forceinline__ Span MakeSpan(uint32_t scale_word, uint32_t offset_word) {
  Span s;
  s.scale = HalfPair(scale_word);
  if constexpr (kKind == Int4Offsets::kFloat) {
    const float2 m = HalfPair(offset_word);
    s.c = make_float2(m.x - 128.0f * s.scale.x, m.y - 128.0f * s.scale.y);
  } else if constexpr (kKind == Int4Offsets::kSymmetric) {
    s.sub_lo = s.sub_hi = kMagic136;
  } else {
    const uint32_t lo = offset_word & 0xFFFF, hi = offset_word >> 16;  // int16 z, 0..127
    s.sub_lo = 0x43004300u | lo | (lo << 16);
    s.sub_hi = 0x43004300u | hi | (hi << 16);
  }
  return s;
}

// The four A registers of 16 columns (code word i of a lane's tile).
template <Int4Offsets kKind>
__device__ __forceinline__ void DequantWord(uint32_t word, const Span& span, uint32_t (&av)[4]) {
#pragma unroll
  for (int m = 0; m < 4; ++m) {
    av[m] = Dequant128(word, m);
    if constexpr (!kSumX<kKind>) av[m] = SubBf16x2(av[m], m % 2 == 0 ? span.sub_lo : span.sub_hi);
  }
}

// acc += the 32 columns' sums p (and S), scaled; p and S back to zero.
template <int NT, Int4Offsets kKind>
__device__ __forceinline__ void Flush(const Span& span, float (&acc)[NT][4], float (&p)[NT][4],
                                      float (&sx)[NT][4]) {
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float sc = e < 2 ? span.scale.x : span.scale.y;
      if constexpr (kSumX<kKind>) {
        acc[nt][e] = fmaf(e < 2 ? span.c.x : span.c.y, sx[nt][e], acc[nt][e]);
      }
      acc[nt][e] = fmaf(sc, p[nt][e], acc[nt][e]);
      p[nt][e] = 0.0f;
    }
#pragma unroll
    for (int e = 0; e < 4; ++e) sx[nt][e] = 0.0f;
  }
}

// Writes the outputs of the warp's tile rt from its sums v (rows gr, gr + 8;
// x rows nt * 8 + 2 t4 + {0, 1}).
template <int NT>
__device__ __forceinline__ void Epilogue(const Args& a, int32_t rt, const float (&v)[NT][4]) {
  const int lane = threadIdx.x & 31, gr = lane >> 2, t4 = lane & 3;
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int m = nt * 8 + 2 * t4 + e;
      if (m >= a.rows) continue;
      if (a.y_kind == YKind::kSiluMul) {
        const float g = cuda::RoundTo<cuda::bf16>(v[nt][e]);
        const float u = cuda::RoundTo<cuda::bf16>(v[nt][e + 2]);
        static_cast<cuda::bf16*>(a.y)[m * (a.n / 2) + int64_t{rt} * 8 + gr] =
            __float2bfloat16_rn(g / (1.0f + expf(-g)) * u);
        continue;
      }
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int64_t o = m * a.n + int64_t{rt} * 16 + gr + 8 * half;
        const float val = v[nt][e + 2 * half];
        if (a.y_kind == YKind::kF32) {
          static_cast<float*>(a.y)[o] = val;
        } else if (a.y_kind == YKind::kBf16Add) {
          cuda::bf16* y = static_cast<cuda::bf16*>(a.y);
          y[o] = __float2bfloat16_rn(cuda::RoundTo<cuda::bf16>(val) + __bfloat162float(y[o]));
        } else {
          static_cast<cuda::bf16*>(a.y)[o] = __float2bfloat16_rn(val);
        }
      }
    }
  }
}

// Ends the warp's segment of tile rt: a whole row group writes y; a part
// leaves its sums in its slot, and the warp that brings the tile's last part
// sums the slots in block order and writes y.
template <int NT>
__device__ void FinishSegment(const Sub& s, const Args& a, const float (&acc)[NT][4]) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int32_t rt = s.rg * kWarps + warp;
  if (rt >= a.n_tiles) return;
  if (s.whole) {
    Epilogue<NT>(a, rt, acc);
    return;
  }
  constexpr int kSlotFloats = 32 * NT * 4;
  auto slot = [&](int32_t blk) {
    return reinterpret_cast<float4*>(a.partials +
                                     ((int64_t{s.rg} + blk) * kWarps + warp) * kSlotFloats) +
           lane * NT;
  };
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    __stcg(slot(blockIdx.x) + nt, make_float4(acc[nt][0], acc[nt][1], acc[nt][2], acc[nt][3]));
  }
  __threadfence();
  __syncwarp();
  const int64_t row_begin = int64_t{s.rg} * a.k_tiles;
  const int32_t first = BlockOf(row_begin, a), last = BlockOf(row_begin + a.k_tiles - 1, a);
  int is_last = 0;
  int32_t* counter = a.counters_end - 1 - rt;
  if (lane == 0) is_last = atomicAdd(counter, 1) == last - first;
  if (!__shfl_sync(0xffffffffu, is_last, 0)) return;
  __threadfence();
  float sum[NT][4] = {};
  for (int32_t blk = first; blk <= last; ++blk) {
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      const float4 v = __ldcg(slot(blk) + nt);
      sum[nt][0] += v.x, sum[nt][1] += v.y, sum[nt][2] += v.z, sum[nt][3] += v.w;
    }
  }
  Epilogue<NT>(a, rt, sum);
  if (lane == 0) *counter = 0;
}

}  // namespace onecard::engine::int4_gemm_internal

#endif  // ONECARD_ENGINE_KERNELS_INT4_GEMM_INTERNAL_CUH_
