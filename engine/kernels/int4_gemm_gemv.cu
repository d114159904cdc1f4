// Int4Gemm's kGemv kernel (see int4_gemm.h; the layout in int4_layout.h):
// decode at 1-8 rows in the FP8 Gemv's form (gemv_fp8.cu), where a launch's
// time is the weights' bytes. Design:
// - A block takes a 16-row tile of W at a time (persistent: the resident
//   blocks take tiles blockIdx.x, + gridDim.x, ...), all of k: warp w the
//   w-th of eight runs of its k tiles. Each lane loads its 16 bytes of a
//   tile, so a warp-load is one coalesced 512-byte tile; kU tiles a chunk,
//   and the next chunk's loads (the next row tile's first chunk at the end
//   of a tile) are issued before this chunk's arithmetic, into registers: no
//   shared-memory ring, no producer warp, no barrier a stage.
// - x's rows (all of k) are staged in shared memory once a block, after the
//   first chunk's loads and griddepcontrol.wait (programmatic dependent
//   launch: the weights never depend on the previous kernel). With the
//   RMSNorm prologue every block sums the squares of each row as it stages
//   it (over the block: cuda::BlockSum) and normalizes its copy in place,
//   x' = bf16(w * (x * inv_rms)) (rms_norm.h's rounding; the norm weight
//   asked into L1 before the wait): no RmsNorm launch before the product.
// - Int4Gemm's exact arithmetic: (word >> 4 m) & 0x000f000f | 0x43004300 is
//   the bf16 pair 128 + q; minus 128 + z (136 symmetric) it is q - z, and
//   one mma.m16n8k16 a code word sums p = sum (q - z) x over its 16 columns
//   for the tile's 16 rows and up to 8 x rows (the B fragment's 8 columns);
//   with mins (kFloat) p = sum (128 + q) x, a second mma with A = 1 sums
//   S = sum x, and acc += s p + (m - 128 s) S. acc += s p at the end of every
//   tile, or of every 32 columns for groups of an odd multiple of 32 (kSpan
//   0); a chunk carries a scale word for each group it touches.
// - The eight warps' sums meet in shared memory, in warp order
//   (deterministic), and 16 outputs a row of x are written with Int4Gemm's
//   epilogues (StoreY, StoreSiluMul). No workspace, no split-K, no counters.
// Tested by tests/gpu/int4_gemm_test.cc (the kGemv cases) against
// Int4GemmRef.
#include <cuda_fp16.h>

#include <algorithm>

#include "engine/kernels/cuda_check.h"
#include "engine/kernels/cuda_common.cuh"
#include "engine/kernels/cuda_ptx.cuh"
#include "engine/kernels/int4_codes.cuh"
#include "engine/kernels/int4_gemm_internal.h"

namespace onecard::engine {
namespace {

using int4::Dequant128;
using int4::HalfPair;
using int4::kMagic136;
using int4::kOnes;
using int4::SubBf16x2;

constexpr int kWarps = 8;
constexpr int kThreads = 32 * kWarps;
constexpr int kBlocksPerSm = 2;

// Tiles a chunk: eight for symmetric codes in groups of whole tiles (32
// registers of codes in flight, 32 more for the next chunk); four where the
// tiles carry more scale and offset words.
template <Int4Offsets kKind, int kSpan>
inline constexpr int kU = (kKind == Int4Offsets::kSymmetric && kSpan != 0) ? 8 : 4;

struct Args : int4::LaunchArgs {
  int32_t per_warp;  // k tiles a warp's run (even; the last runs may be shorter or empty)
  int32_t x_row;     // bf16 a staged x row: k + kInt4GemmGemvXPad
  bool early_dependents;
  const cuda::bf16* norm_w;  // the RMSNorm prologue's weight; null: none
  float eps;
};

// Where one lane reads row tile rt: its codes' first tile, the stride
// between k tiles, and its scale (offset) words' first word and stride
// between groups.
struct TileAt {
  const uint4* codes;
  const uint32_t* scales;
  const uint32_t* offsets;  // the same index; null for kSymmetric
  int32_t code_stride;      // uint4 from one k tile to the next
  int32_t word_stride;      // words from one group to the next
};

__device__ __forceinline__ TileAt LocateTile(const Args& a, int32_t rt, int lane) {
  const int32_t rg = rt / 8;
  const int32_t g = static_cast<int32_t>(Int4GroupTiles(rg, a.n_tiles));
  TileAt t;
  t.codes = a.codes + (int64_t{rg} * 8 * a.k_tiles + rt % 8) * 32 + lane;
  const int64_t word = (int64_t{rg} * 8 * a.num_groups + rt % 8) * 8 + (lane >> 2);
  t.scales = a.scales + word;
  t.offsets = a.offsets != nullptr ? a.offsets + word : nullptr;
  t.code_stride = g * 32;
  t.word_stride = g * 8;
  return t;
}

// A chunk's codes and its groups' scale and offset words (offsets unused
// for kSymmetric). kSpan: groups of a multiple of 128 columns (2: a word
// serves two tiles), of an odd multiple of 64 (1: a word a tile) or of an
// odd multiple of 32 (0: two words a tile, the sums flushed every 32
// columns).
template <Int4Offsets kKind, int kSpan>
struct Chunk {
  static constexpr int kU_ = kU<kKind, kSpan>;
  static constexpr int kWords = kSpan == 2 ? kU_ / 2 : kSpan == 1 ? kU_ : 2 * kU_;
  uint4 codes[kU_];
  uint32_t scale[kWords];
  uint32_t offset[kWords];
};

// Issues the loads of k tiles kt .. kt + kU - 1 (those before `end`; kt even
// for kSpan 2).
template <Int4Offsets kKind, int kSpan>
__device__ __forceinline__ void LoadChunk(const Args& a, const TileAt& t, int32_t kt, int32_t end,
                                          Chunk<kKind, kSpan>& c) {
  using C = Chunk<kKind, kSpan>;
#pragma unroll
  for (int u = 0; u < C::kU_; ++u) {
    if (kt + u < end)
      c.codes[u] = cuda::LoadStreaming(t.codes + (kt + u) * t.code_stride);  // < 2^24
  }
#pragma unroll
  for (int w = 0; w < C::kWords; ++w) {
    const int u = kSpan == 2 ? 2 * w : kSpan == 1 ? w : w / 2;
    if (kt + u >= end) continue;
    const int32_t col = (kt + u) * kInt4TileCols + (kSpan == 0 ? 32 * (w % 2) : 0);
    const int32_t at = int4::GroupOf(col, a.inv_group) * t.word_stride;  // < 2^23
    c.scale[w] = __ldg(t.scales + at);
    c.offset[w] = kKind == Int4Offsets::kSymmetric ? 0u : __ldg(t.offsets + at);
  }
}

// acc += this span's sums (p, and S for mins) times its scale; both cleared.
template <Int4Offsets kKind>
__device__ __forceinline__ void Flush(uint32_t scale_word, uint32_t offset_word, float (&p)[4],
                                      float (&sx)[4], float (&acc)[4]) {
  const float2 s = HalfPair(scale_word);
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const float sc = e < 2 ? s.x : s.y;
    if constexpr (kKind == Int4Offsets::kFloat) {
      const float2 m = HalfPair(offset_word);
      const float c = (e < 2 ? m.x : m.y) - 128.0f * sc;
      acc[e] = fmaf(c, sx[e], acc[e]);
      sx[e] = 0.0f;
    }
    acc[e] = fmaf(sc, p[e], acc[e]);
    p[e] = 0.0f;
  }
}

// One chunk's arithmetic: `ntiles` tiles from k tile kt, x fragments from
// xs_lane (this lane's x row, column 4 t4).
template <Int4Offsets kKind, int kSpan>
__device__ __forceinline__ void ComputeChunk(const Chunk<kKind, kSpan>& c,
                                             const cuda::bf16* xs_lane, int32_t kt, int ntiles,
                                             float (&acc)[4]) {
  constexpr int U = kU<kKind, kSpan>;
  constexpr bool kSum = kKind == Int4Offsets::kFloat;
  const uint32_t ones[4] = {kOnes, kOnes, kOnes, kOnes};
#pragma unroll
  for (int u = 0; u < U; ++u) {
    if (u >= ntiles) break;
    float p[4] = {0.0f, 0.0f, 0.0f, 0.0f}, sx[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    const uint32_t words[4] = {c.codes[u].x, c.codes[u].y, c.codes[u].z, c.codes[u].w};
    const cuda::bf16* xt = xs_lane + (kt + u) * kInt4TileCols;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int w = kSpan == 2 ? u / 2 : kSpan == 1 ? u : 2 * u + i / 2;
      uint32_t sub_lo = kMagic136, sub_hi = kMagic136;
      if constexpr (kKind == Int4Offsets::kZero) {
        const uint32_t z = c.offset[w];  // two int16 zero points, 0..127
        sub_lo = int4::ZeroPair(z & 0xFFFF);
        sub_hi = int4::ZeroPair(z >> 16);
      }
      uint32_t av[4];
#pragma unroll
      for (int m = 0; m < 4; ++m) {
        av[m] = Dequant128(words[i], m);
        if constexpr (!kSum) av[m] = SubBf16x2(av[m], m % 2 == 0 ? sub_lo : sub_hi);
      }
      const uint2 bv = *reinterpret_cast<const uint2*>(xt + 16 * i);
      cuda::MmaBf16(p, av, bv.x, bv.y);
      if constexpr (kSum) cuda::MmaBf16(sx, ones, bv.x, bv.y);
      if (i == 3 || (kSpan == 0 && i == 1)) Flush<kKind>(c.scale[w], c.offset[w], p, sx, acc);
    }
  }
}

// Copies x's rows into xs; with the RMSNorm prologue normalizes each row in
// place once it landed: its sum of squares over the block (cuda::BlockSum on
// `scratch`), then each thread rescales the 16-byte pieces it copied.
__device__ __forceinline__ void StageX(const Args& a, cuda::bf16* xs, float* scratch, int32_t k) {
  for (int r = 0; r < a.rows; ++r) {
    const uint4* src = reinterpret_cast<const uint4*>(a.x + r * a.x_stride);
    uint4* dst = reinterpret_cast<uint4*>(xs + r * a.x_row);
    float sum_sq = 0.0f;
    for (int i = threadIdx.x; i < k / 8; i += kThreads) {
      const uint4 v = src[i];
      dst[i] = v;
      if (a.norm_w != nullptr) {
        float f[8];
        cuda::Unpack8(v, f);
#pragma unroll
        for (int e = 0; e < 8; ++e) sum_sq += f[e] * f[e];
      }
    }
    if (a.norm_w == nullptr) continue;
    const float inv_rms = rsqrtf(cuda::BlockSum(sum_sq, scratch) / static_cast<float>(k) + a.eps);
    const uint4* w = reinterpret_cast<const uint4*>(a.norm_w);
    for (int i = threadIdx.x; i < k / 8; i += kThreads) {
      float xf[8], wf[8];
      cuda::Unpack8(dst[i], xf);
      cuda::Unpack8(__ldg(w + i), wf);
#pragma unroll
      for (int e = 0; e < 8; ++e) xf[e] = wf[e] * (xf[e] * inv_rms);
      dst[i] = cuda::Pack8(xf);
    }
  }
}

template <Int4Offsets kKind, int kSpan>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm) Int4GemvKernel(Args a) {
  constexpr int U = kU<kKind, kSpan>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  cuda::bf16* xs = reinterpret_cast<cuda::bf16*>(smem_raw);
  // The warps' sums: [warp][lane][4].
  float* red = reinterpret_cast<float*>(smem_raw + int64_t{a.rows} * a.x_row * 2);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gr = lane >> 2, t4 = lane & 3;
  const int32_t kt_begin = min(warp * a.per_warp, a.k_tiles);
  const int32_t kt_end = min(kt_begin + a.per_warp, a.k_tiles);
  int32_t rt = blockIdx.x;
  Chunk<kKind, kSpan> cur;
  if (rt < a.n_tiles) LoadChunk(a, LocateTile(a, rt, lane), kt_begin, kt_end, cur);
  if (a.norm_w != nullptr) {  // the norm weight into L1 while the previous kernel ends
    for (int i = threadIdx.x; i < a.k_tiles; i += kThreads) {
      cuda::PrefetchL1(a.norm_w + i * kInt4TileCols);
    }
  }
  cuda::PdlEnter(a.early_dependents);  // x and y come from the previous kernel
  const int32_t k = a.k_tiles * kInt4TileCols;
  StageX(a, xs, red, k);
  __syncthreads();  // x's rows, and red free for the sums
  // Lanes past the rows read row 0: their sums land in columns never stored.
  const cuda::bf16* xs_lane = xs + (gr < a.rows ? gr : 0) * a.x_row + 4 * t4;
  while (rt < a.n_tiles) {
    const TileAt at = LocateTile(a, rt, lane);
    const int32_t next_rt = rt + gridDim.x;
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int32_t kt = kt_begin; kt < kt_end; kt += U) {
      Chunk<kKind, kSpan> next;
      if (kt + U < kt_end) {
        LoadChunk(a, at, kt + U, kt_end, next);
      } else if (next_rt < a.n_tiles) {
        LoadChunk(a, LocateTile(a, next_rt, lane), kt_begin, kt_end, next);
      }
      ComputeChunk(cur, xs_lane, kt, min(U, kt_end - kt), acc);
      cur = next;
    }
    reinterpret_cast<float4*>(red)[warp * 32 + lane] = make_float4(acc[0], acc[1], acc[2], acc[3]);
    __syncthreads();
    // The C fragment's element e of lane L: W row L / 4 + 8 (e / 2), x row
    // 2 (L % 4) + e % 2.
    if (a.y_kind == int4::YKind::kSiluMul) {
      // Rows gr (gate) and gr + 8 (up) of the tile: output 8 rt + gr.
      if (threadIdx.x < 64) {
        const int l = threadIdx.x >> 1, e = threadIdx.x & 1, m = 2 * (l & 3) + e;
        float gate = 0.0f, up = 0.0f;
#pragma unroll
        for (int w = 0; w < kWarps; ++w) {
          gate += red[(w * 32 + l) * 4 + e];
          up += red[(w * 32 + l) * 4 + e + 2];
        }
        if (m < a.rows) int4::StoreSiluMul(a, m, int64_t{rt} * 8 + (l >> 2), gate, up);
      }
    } else if (threadIdx.x < 128) {
      const int l = threadIdx.x >> 2, e = threadIdx.x & 3, m = 2 * (l & 3) + (e & 1);
      float sum = 0.0f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) sum += red[(w * 32 + l) * 4 + e];
      if (m < a.rows) int4::StoreY(a, m * a.n + int64_t{rt} * 16 + (l >> 2) + 8 * (e >> 1), sum);
    }
    __syncthreads();  // red, before the next tile's sums
    rt = next_rt;
  }
}

template <Int4Offsets kKind, int kSpan>
absl::Status Launch(const Args& a, int num_sms, cudaStream_t stream) {
  static const absl::Status allowed = [] {
    CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(Int4GemvKernel<kKind, kSpan>,
                                              cudaFuncAttributeMaxDynamicSharedMemorySize,
                                              static_cast<int>(kInt4GemmGemvMaxSmemBytes)));
    return absl::OkStatus();
  }();
  RETURN_IF_ERROR(allowed);
  const int64_t smem = Int4GemmGemvSmemBytes(a.rows, int64_t{a.k_tiles} * kInt4TileCols);
  const int64_t grid = std::min<int64_t>(a.n_tiles, int64_t{num_sms} * kBlocksPerSm);
  CUDA_RETURN_IF_ERROR(cuda::LaunchPdl(Int4GemvKernel<kKind, kSpan>, dim3(static_cast<int>(grid)),
                                       dim3(kThreads), static_cast<size_t>(smem), stream, a));
  return absl::OkStatus();
}

template <Int4Offsets kKind>
absl::Status LaunchGroups(const Args& a, int num_sms, cudaStream_t stream) {
  if (a.group % (2 * kInt4TileCols) == 0) return Launch<kKind, 2>(a, num_sms, stream);
  if (a.group % kInt4TileCols == 0) return Launch<kKind, 1>(a, num_sms, stream);
  return Launch<kKind, 0>(a, num_sms, stream);
}

}  // namespace

absl::Status LaunchInt4GemmGemv(const Int4GemmParams& p, int num_sms, cudaStream_t stream) {
  Args a{};
  static_cast<int4::LaunchArgs&>(a) = int4::MakeLaunchArgs(p);
  a.per_warp = static_cast<int32_t>(cuda::CeilDiv(a.k_tiles, 2 * kWarps) * 2);
  a.x_row = static_cast<int32_t>(p.w.k + kInt4GemmGemvXPad);
  const LaunchSettings settings = GetLaunchSettings();
  a.early_dependents = settings.early_dependents;
  if (p.prologue == GemvPrologue::kRmsNorm) {
    a.norm_w = static_cast<const cuda::bf16*>(p.norm_weight);
    a.eps = p.eps;
  }
  switch (p.w.offset_kind) {
    case Int4Offsets::kSymmetric:
      return LaunchGroups<Int4Offsets::kSymmetric>(a, num_sms, stream);
    case Int4Offsets::kZero:
      return LaunchGroups<Int4Offsets::kZero>(a, num_sms, stream);
    case Int4Offsets::kFloat:
      return LaunchGroups<Int4Offsets::kFloat>(a, num_sms, stream);
  }
  return absl::UnimplementedError("Int4Gemm: unknown offset kind");
}

}  // namespace onecard::engine
