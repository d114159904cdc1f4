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
//   epilogues (StoreY, StoreSiluMul).
// - A block's work is a list of items, blockIdx.x, + gridDim.x, ...: the
//   whole tiles (all of k), then, with a last round in parts
//   (Int4GemmGemvTail), each remaining tile's `parts` parts of k, a block
//   each. A part's 16 x 8 sums go to its workspace slot; the block that
//   brings a tile's count (its arrival counter) to `parts` adds the parts'
//   sums in part order, stores the outputs and zeroes the counter.
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
constexpr int kBlocksPerSm = kInt4GemmGemvBlocksPerSm;
constexpr int kTileSums = 16 * 8;  // a tile's sums: 16 W rows x 8 x rows

// Tiles a chunk: eight for symmetric codes in groups of whole tiles (32
// registers of codes in flight, 32 more for the next chunk); four where the
// tiles carry more scale and offset words.
template <Int4Offsets kKind, int kSpan>
inline constexpr int kU = (kKind == Int4Offsets::kSymmetric && kSpan != 0) ? 8 : 4;

struct Args : int4::LaunchArgs {
  int32_t whole;  // tiles [0, whole) whole, [whole, n_tiles) in `parts` parts
  int32_t parts;
  int32_t items;  // whole + (n_tiles - whole) * parts
  int32_t x_row;  // bf16 a staged x row: k + kInt4GemmGemvXPad
  bool early_dependents;
  const cuda::bf16* norm_w;  // the RMSNorm prologue's weight; null: none
  float eps;
};

// One warp's share of an item: its row tile, its part (-1: the tile whole)
// and the k tiles of its run, [kt_begin, kt_end): the item's k range cut
// into eight runs of an even number of tiles (the last runs may be shorter
// or empty).
struct Item {
  int32_t rt;
  int32_t part;
  int32_t kt_begin;
  int32_t kt_end;
};

__device__ __forceinline__ int32_t PartStart(const Args& a, int32_t part) {
  return part == a.parts ? a.k_tiles : a.k_tiles / 2 * part / a.parts * 2;
}

__device__ __forceinline__ Item ItemAt(const Args& a, int32_t i, int warp) {
  Item it{i, -1, 0, a.k_tiles};
  if (i >= a.whole) {
    const int32_t j = i - a.whole;
    it.rt = a.whole + j / a.parts;
    it.part = j % a.parts;
    it.kt_begin = PartStart(a, it.part);
    it.kt_end = PartStart(a, it.part + 1);
  }
  const int32_t per_warp = (it.kt_end - it.kt_begin + 2 * kWarps - 1) / (2 * kWarps) * 2;
  const int32_t end = it.kt_end;
  it.kt_begin = min(it.kt_begin + warp * per_warp, end);
  it.kt_end = min(it.kt_begin + per_warp, end);
  return it;
}

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

// Stores row tile rt's outputs from sums[w * kTileSums + L * 4 + e] added
// over w < nw, where the C fragment's element e of lane L is W row L / 4 +
// 8 (e / 2), x row 2 (L % 4) + e % 2.
__device__ __forceinline__ void StoreTile(const Args& a, int32_t rt, const float* sums, int nw) {
  if (a.y_kind == int4::YKind::kSiluMul) {
    // Rows gr (gate) and gr + 8 (up) of the tile: output 8 rt + gr.
    if (threadIdx.x < 64) {
      const int l = threadIdx.x >> 1, e = threadIdx.x & 1, m = 2 * (l & 3) + e;
      float gate = 0.0f, up = 0.0f;
      for (int w = 0; w < nw; ++w) {
        gate += sums[w * kTileSums + l * 4 + e];
        up += sums[w * kTileSums + l * 4 + e + 2];
      }
      if (m < a.rows) int4::StoreSiluMul(a, m, int64_t{rt} * 8 + (l >> 2), gate, up);
    }
  } else if (threadIdx.x < kTileSums) {
    const int l = threadIdx.x >> 2, e = threadIdx.x & 3, m = 2 * (l & 3) + (e & 1);
    float sum = 0.0f;
    for (int w = 0; w < nw; ++w) sum += sums[w * kTileSums + threadIdx.x];
    if (m < a.rows) int4::StoreY(a, m * a.n + int64_t{rt} * 16 + (l >> 2) + 8 * (e >> 1), sum);
  }
}

// A part of tile `it`: its sums (red, over the warps) to its slot; the last
// part to arrive adds the slots in part order into red[0, kTileSums) and
// stores the tile. Returns after a barrier.
__device__ __forceinline__ void FinishPart(const Args& a, const Item& it, float* red) {
  __shared__ int last;
  float* slots = a.partials + int64_t{it.rt - a.whole} * a.parts * kTileSums;
  if (threadIdx.x < kTileSums) {
    float sum = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) sum += red[w * kTileSums + threadIdx.x];
    __stcg(slots + it.part * kTileSums + threadIdx.x, sum);
  }
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    int32_t* counter = a.counters_end - 1 - it.rt;
    last = atomicAdd(counter, 1) == a.parts - 1;
    if (last) *counter = 0;  // every part arrived: zero again for the next launch
  }
  __syncthreads();
  if (last) {
    __threadfence();
    if (threadIdx.x < kTileSums) {
      float sum = 0.0f;
      for (int q = 0; q < a.parts; ++q) sum += __ldcg(slots + q * kTileSums + threadIdx.x);
      red[threadIdx.x] = sum;
    }
    __syncthreads();
    StoreTile(a, it.rt, red, 1);
  }
  __syncthreads();
}

template <Int4Offsets kKind, int kSpan>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm) Int4GemvKernel(Args a) {
  constexpr int U = kU<kKind, kSpan>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  cuda::bf16* xs = reinterpret_cast<cuda::bf16*>(smem_raw);
  // The warps' sums: [warp][lane][4].
  float* red = reinterpret_cast<float*>(smem_raw + int64_t{a.rows} * a.x_row * 2);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gr = lane >> 2, t4 = lane & 3;
  int32_t i = blockIdx.x;
  Item it = ItemAt(a, i, warp);
  Chunk<kKind, kSpan> cur;
  if (i < a.items) LoadChunk(a, LocateTile(a, it.rt, lane), it.kt_begin, it.kt_end, cur);
  if (a.norm_w != nullptr) {  // the norm weight into L1 while the previous kernel ends
    for (int j = threadIdx.x; j < a.k_tiles; j += kThreads) {
      cuda::PrefetchL1(a.norm_w + j * kInt4TileCols);
    }
  }
  cuda::PdlEnter(a.early_dependents);  // x and y come from the previous kernel
  const int32_t k = a.k_tiles * kInt4TileCols;
  StageX(a, xs, red, k);
  __syncthreads();  // x's rows, and red free for the sums
  // Lanes past the rows read row 0: their sums land in columns never stored.
  const cuda::bf16* xs_lane = xs + (gr < a.rows ? gr : 0) * a.x_row + 4 * t4;
  while (i < a.items) {
    const TileAt at = LocateTile(a, it.rt, lane);
    const int32_t next_i = i + gridDim.x;
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    // The next item's first chunk (recomputed where it is needed, so that
    // it holds no registers through the loop).
    auto load_next = [&](Chunk<kKind, kSpan>& c) {
      const Item n = ItemAt(a, next_i, warp);
      LoadChunk(a, LocateTile(a, n.rt, lane), n.kt_begin, n.kt_end, c);
    };
    for (int32_t kt = it.kt_begin; kt < it.kt_end; kt += U) {
      Chunk<kKind, kSpan> next;
      if (kt + U < it.kt_end) {
        LoadChunk(a, at, kt + U, it.kt_end, next);
      } else if (next_i < a.items) {
        load_next(next);
      }
      ComputeChunk(cur, xs_lane, kt, min(U, it.kt_end - kt), acc);
      cur = next;
    }
    if (it.kt_begin == it.kt_end && next_i < a.items) load_next(cur);  // an empty run
    reinterpret_cast<float4*>(red)[warp * 32 + lane] = make_float4(acc[0], acc[1], acc[2], acc[3]);
    __syncthreads();
    if (it.part < 0) {
      StoreTile(a, it.rt, red, kWarps);
      __syncthreads();  // red, before the next item's sums
    } else {
      FinishPart(a, it, red);
    }
    i = next_i;
    it = ItemAt(a, i, warp);
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
  const int64_t grid = std::min<int64_t>(a.items, int64_t{num_sms} * kBlocksPerSm);
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
  a.x_row = static_cast<int32_t>(p.w.k + kInt4GemmGemvXPad);
  const LaunchSettings settings = GetLaunchSettings();
  const Int4GemvTail tail = Int4GemmGemvTail(p, settings, num_sms);
  a.whole = static_cast<int32_t>(tail.whole);
  a.parts = tail.parts;
  a.items = a.whole + (a.n_tiles - a.whole) * a.parts;
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
