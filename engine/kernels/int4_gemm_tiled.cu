// Int4Gemm's kTiled kernel (see int4_gemm.h; the layout in int4_layout.h):
// the middle steps, where a launch's time is the tensor cores' and the
// dequantization's, not the weights' bytes. Design:
// - A block computes one output tile: a row group of W (8 row tiles, 128
//   rows: the layout's contiguous unit) against kRows = 16 kNt rows of x. Its
//   8 warps stand 4 along W (two 16-row tiles each) by 2 along x (kNt 8-row n
//   tiles each). A code word is dequantized once for kNt mmas, and an x
//   fragment read from shared memory serves two (the kStream kernel: one
//   row tile a warp, so an x fragment a mma).
// - Exact arithmetic, as kStream's: (word >> 4 m) & 0x000f000f | 0x43004300
//   is the bf16 pair 128 + q; minus 128 + z (136 symmetric) it is q - z, the
//   mma sums p = sum (q - z) x in fp32 and acc += s p once a group; with mins
//   (kFloat) p = sum (128 + q) x, a second mma with A = 1 sums S = sum x, and
//   acc += s p + (m - 128 s) S. A group's first mmas start from a zero C, so
//   p is never cleared.
// - Groups of a multiple of the stage's columns (128, 256, ..., one a row):
//   a full stage's 8 slices are straight-line code; other groups test their
//   end after every slice.
// - Stages of kTpu 64-column k tiles (codes, the groups' scales and offsets,
//   the x rows, zero past `rows`) come by 16-byte cp.async from every thread,
//   each thread's pieces at addresses computed once (Tile::Init), kStages
//   deep, one block barrier a stage. The weights of the first stages
//   are requested before griddepcontrol.wait (programmatic dependent launch).
// - Split-K while the output tiles alone would leave SMs idle: a split's
//   block leaves its sums in a slot of the workspace, and the block that
//   arrives last (a counter a tile) sums the slots in split order
//   (deterministic) and writes y.
// Tested by tests/gpu/int4_gemm_test.cc against Int4GemmRef.
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

constexpr int kWarpsN = 4;  // along W's rows: two 16-row tiles each
constexpr int kWarpsM = 2;  // along x's rows: kNt 8-row n tiles each
constexpr int kWarps = kWarpsN * kWarpsM;
constexpr int kThreads = 32 * kWarps;
constexpr int kTpu = 2;                           // k tiles a stage
constexpr int kCols = kTpu * kInt4TileCols;       // columns a stage
constexpr int kXStride = kCols + 16;              // bf16 a staged row (no bank conflicts)
constexpr int kMaxSpans = kCols / kInt4MinGroup;  // groups a stage touches
static_assert(kWarpsN * 2 * kInt4TileRows == kInt4GemmRowGroup, "a block: one row group");
static_assert(kMaxSpans * 8 * 2 <= kThreads, "a stage's scales: one piece a thread at most");

template <int kNt>
struct Cfg {
  static constexpr int kRows = kWarpsM * 8 * kNt;  // x rows a block
  static constexpr int kStages = kNt == 4 ? 3 : 4;
  static constexpr int kBlocksPerSm = kNt >= 8 ? 1 : 2;
  static constexpr int kSlotFloats = kThreads * 2 * kNt * 4;  // a block's sums
};

template <int kNt>
struct Stage {
  uint4 codes[kTpu * 8 * 32];  // [k tile][row tile][lane], as in global memory
  uint32_t scales[kMaxSpans * 8 * 8];
  uint32_t offsets[kMaxSpans * 8 * 8];
  cuda::bf16 x[Cfg<kNt>::kRows][kXStride];
};

using int4::YKind;

struct Args : int4::LaunchArgs {
  int32_t m_blocks;     // output tiles along x
  int32_t splits;       // blocks an output tile
  int32_t split_tiles;  // k tiles a split (a multiple of kTpu)
  // counters_end: one an output tile
};

__device__ __forceinline__ int32_t GroupOf(int32_t c, const Args& a) {
  return int4::GroupOf(c, a.inv_group);
}

// c += a b, m16n8k16, bf16 in, fp32 sums (not volatile: the compiler may
// interleave the mmas with the loads and the dequantization).
__device__ __forceinline__ void Mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                    uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
      "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// d = a b (a zero C: the first slice of a group's sums).
__device__ __forceinline__ void Mma0(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                     uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
      "{%4, %5, %6, %7}, {%8, %9}, {%10, %10, %10, %10};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(0.0f));
}

// A block's output tile and its loads. Each thread's pieces keep their place
// from stage to stage: x piece c (16 bytes) of staged rows r0 + 16 j, and
// codes pieces threadIdx.x + kThreads j; Init computes their addresses once.
template <int kNt, Int4Offsets kKind>
struct Tile {
  static constexpr int kXPieces = kCols / 8;                           // 16-byte pieces a row
  static constexpr int kXPer = Cfg<kNt>::kRows * kXPieces / kThreads;  // a thread's a stage
  static_assert(kThreads % kXPieces == 0 && kXPer >= 1, "x pieces spread evenly");
  const Args& a;
  int32_t rg, m0, g;  // row group, first x row, row tiles in the group
  int32_t kt_begin, kt_end;
  int32_t stages;
  const uint4* codes;   // this thread's first piece of the row group's k tile 0
  const cuda::bf16* x;  // its x piece of column 0 in row m0 + r0
  int64_t x_step;       // 16 x rows
  int32_t r0, c;        // its first staged row, its piece of a row
  uint32_t rows_valid;  // bit j: row m0 + r0 + 16 j is below rows

  __device__ __forceinline__ void Init() {
    c = threadIdx.x % kXPieces;
    r0 = threadIdx.x / kXPieces;
    x = a.x + int64_t{m0 + r0} * a.x_stride + 8 * c;
    x_step = 16 * a.x_stride;
    rows_valid = 0;
#pragma unroll
    for (int j = 0; j < kXPer; ++j) rows_valid |= (m0 + r0 + 16 * j < a.rows ? 1u : 0u) << j;
    codes = a.codes + int64_t{rg} * 8 * a.k_tiles * 32 + threadIdx.x;
  }

  // Stage s: k tiles [kt_begin + kTpu s, +kTpu) within [kt_begin, kt_end).
  __device__ __forceinline__ int32_t StageTile(int32_t s) const { return kt_begin + kTpu * s; }
  __device__ __forceinline__ int32_t StageTiles(int32_t s) const {
    return min(kTpu, kt_end - StageTile(s));
  }

  __device__ __forceinline__ void LoadWeights(Stage<kNt>& st, int32_t s) const {
    const int32_t kt = StageTile(s), nt = StageTiles(s);
    const uint4* src = codes + int64_t{kt} * g * 32;  // Int4TileIndex(8 rg, kt, ...)
#pragma unroll
    for (int j = 0; j < kTpu * 8 * 32 / kThreads; ++j) {
      if (threadIdx.x + kThreads * j < g * nt * 32) {
        cuda::CpAsync16(&st.codes[threadIdx.x + kThreads * j], src + kThreads * j, true);
      }
    }
    const int32_t first = GroupOf(kt * kInt4TileCols, a);
    const int32_t spans = GroupOf((kt + nt) * kInt4TileCols - 1, a) - first + 1;
    if (threadIdx.x < spans * g * 2) {  // 16 bytes each: at most 4 spans x 8 tiles x 2
      const int64_t word = (int64_t{rg} * 8 * a.num_groups + int64_t{first} * g) * 8;
      const int i = threadIdx.x;
      cuda::CpAsync16(&st.scales[4 * i], a.scales + word + 4 * i, true);
      if constexpr (kKind != Int4Offsets::kSymmetric) {
        cuda::CpAsync16(&st.offsets[4 * i], a.offsets + word + 4 * i, true);
      }
    }
  }

  __device__ __forceinline__ void LoadX(Stage<kNt>& st, int32_t s) const {
    const int32_t col0 = StageTile(s) * kInt4TileCols;
    const bool col_valid = c < StageTiles(s) * (kInt4TileCols / 8);
#pragma unroll
    for (int j = 0; j < kXPer; ++j) {
      const bool valid = col_valid && ((rows_valid >> j) & 1u);
      const cuda::bf16* src = valid ? x + j * x_step + col0 : a.x;
      cuda::CpAsync16(&st.x[r0 + 16 * j][8 * c], src, valid);
    }
  }
};

// Writes the warp's outputs from its sums v: row tiles j0 + r (r = 0, 1) of
// the row group, x rows m0 + xr + nt * 8 + 2 t4 + {0, 1}. A kBf16Add
// epilogue reads the values of y it adds to eight at a time (two n tiles'),
// each batch before its stores: y's loads and stores may alias, so a load
// after a store would wait for an L2 round trip of its own.
template <int kNt>
__device__ __forceinline__ void Epilogue(const Args& a, int32_t rg, int32_t g, int32_t j0,
                                         int32_t xrow0, const float (&v)[2][kNt][4]) {
  const int lane = threadIdx.x & 31, gr = lane >> 2, t4 = lane & 3;
  if (a.y_kind == YKind::kBf16Add) {
    cuda::bf16* y = static_cast<cuda::bf16*>(a.y);
    // Output i of (r, nt): x row xrow0 + nt * 8 + 2 t4 + (i & 1), W row
    // (rg * 8 + j0 + r) * 16 + gr + 8 (i >> 1).
    auto at = [&](int r, int nt, int i, int64_t* o) {
      const int32_t m = xrow0 + nt * 8 + 2 * t4 + (i & 1);
      *o = int64_t{m} * a.n + (int64_t{rg} * 8 + j0 + r) * 16 + gr + 8 * (i >> 1);
      return j0 + r < g && m < a.rows;
    };
    // More at a time would spill (ptxas).
#pragma unroll
    for (int r = 0; r < 2; ++r) {
#pragma unroll
      for (int nt0 = 0; nt0 < kNt; nt0 += 2) {
        float residual[2][4];
#pragma unroll
        for (int u = 0; u < 2 && nt0 + u < kNt; ++u) {
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            int64_t o;
            residual[u][i] = at(r, nt0 + u, i, &o) ? __bfloat162float(y[o]) : 0.0f;
          }
        }
#pragma unroll
        for (int u = 0; u < 2 && nt0 + u < kNt; ++u) {
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            int64_t o;
            if (!at(r, nt0 + u, i, &o)) continue;
            y[o] =
                __float2bfloat16_rn(cuda::RoundTo<cuda::bf16>(v[r][nt0 + u][i]) + residual[u][i]);
          }
        }
      }
    }
    return;
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    if (j0 + r >= g) continue;
    const int64_t rt = int64_t{rg} * 8 + j0 + r;
#pragma unroll
    for (int nt = 0; nt < kNt; ++nt) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int32_t m = xrow0 + nt * 8 + 2 * t4 + e;
        if (m >= a.rows) continue;
        if (a.y_kind == YKind::kSiluMul) {
          int4::StoreSiluMul(a, m, rt * 8 + gr, v[r][nt][e], v[r][nt][e + 2]);
          continue;
        }
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int64_t o = m * a.n + rt * 16 + gr + 8 * half;
          const float val = v[r][nt][e + 2 * half];
          int4::StoreY(a, o, val);
        }
      }
    }
  }
}

// One 16-column slice of the warp's two row tiles: code words w[r] (of
// tile column `col`, x columns from col + 4 t4) against its kNt n tiles,
// into p (and S = sum x into sx, mins); kFresh: the group's first, so the
// sums start from zero instead of p.
template <int kNt, Int4Offsets kKind, bool kFresh>
__device__ __forceinline__ void Slice(const Stage<kNt>& st, const uint32_t (&w)[2], int col, int xr,
                                      int gr, const uint32_t (&sub)[2][2], float (&p)[2][kNt][4],
                                      float (&sx)[kNt][4]) {
  constexpr bool kSum = kKind == Int4Offsets::kFloat;
  uint2 b[kNt];
#pragma unroll
  for (int nt = 0; nt < kNt; ++nt) {
    b[nt] = *reinterpret_cast<const uint2*>(&st.x[xr + nt * 8 + gr][col]);
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    uint32_t av[4];
#pragma unroll
    for (int m = 0; m < 4; ++m) {
      av[m] = Dequant128(w[r], m);
      if constexpr (!kSum) av[m] = SubBf16x2(av[m], sub[r][m % 2]);
    }
#pragma unroll
    for (int nt = 0; nt < kNt; ++nt) {
      if constexpr (kFresh) {
        Mma0(p[r][nt], av, b[nt].x, b[nt].y);
      } else {
        Mma(p[r][nt], av, b[nt].x, b[nt].y);
      }
    }
  }
  if constexpr (kSum) {
    const uint32_t ones[4] = {kOnes, kOnes, kOnes, kOnes};
#pragma unroll
    for (int nt = 0; nt < kNt; ++nt) {
      if constexpr (kFresh) {
        Mma0(sx[nt], ones, b[nt].x, b[nt].y);
      } else {
        Mma(sx[nt], ones, b[nt].x, b[nt].y);
      }
    }
  }
}

// A group's (or a split's part of one) sums into acc: span sp of the
// stage's scales (and mins) for the warp's row tiles j0, j0 + 1. p and sx
// are left as they are: the next slice starts them afresh (Slice's kFresh).
template <int kNt, Int4Offsets kKind>
__device__ __forceinline__ void Flush(const Stage<kNt>& st, int sp, int g, int j0, int gr,
                                      float (&acc)[2][kNt][4], const float (&p)[2][kNt][4],
                                      const float (&sx)[kNt][4]) {
  constexpr bool kSum = kKind == Int4Offsets::kFloat;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int w = (sp * g + j0 + r) * 8 + gr;
    const float2 sc = HalfPair(st.scales[w]);
    float2 c = make_float2(0.0f, 0.0f);
    if constexpr (kSum) {
      const float2 mins = HalfPair(st.offsets[w]);
      c = make_float2(mins.x - 128.0f * sc.x, mins.y - 128.0f * sc.y);
    }
#pragma unroll
    for (int nt = 0; nt < kNt; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        if constexpr (kSum) acc[r][nt][e] = fmaf(e < 2 ? c.x : c.y, sx[nt][e], acc[r][nt][e]);
        acc[r][nt][e] = fmaf(e < 2 ? sc.x : sc.y, p[r][nt][e], acc[r][nt][e]);
      }
    }
  }
}

// The zero points of span sp for the warp's row tiles (kZero).
template <int kNt>
__device__ __forceinline__ void LoadZeros(const Stage<kNt>& st, int sp, int g, int j0, int gr,
                                          uint32_t (&sub)[2][2]) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const uint32_t z = st.offsets[(sp * g + j0 + r) * 8 + gr];
    sub[r][0] = int4::ZeroPair(z & 0xFFFF);
    sub[r][1] = int4::ZeroPair(z >> 16);
  }
}

// kAligned: groups of a multiple of kCols columns, so a full stage lies in
// one group and its 8 slices run as straight-line code, the group's end
// tested once a stage; else every slice tests it.
template <int kNt, Int4Offsets kKind, bool kAligned>
__global__ void __launch_bounds__(kThreads, Cfg<kNt>::kBlocksPerSm) Int4TiledKernel(Args a) {
  constexpr int S = Cfg<kNt>::kStages;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  Stage<kNt>* stages = reinterpret_cast<Stage<kNt>*>(smem_raw);
  __shared__ int last_block;

  const int32_t split = blockIdx.x % a.splits;
  const int32_t out_tile = blockIdx.x / a.splits;
  Tile<kNt, kKind> t{a};
  t.rg = out_tile / a.m_blocks;
  t.m0 = (out_tile % a.m_blocks) * Cfg<kNt>::kRows;
  t.g = min(a.n_tiles - t.rg * 8, 8);
  t.kt_begin = split * a.split_tiles;
  t.kt_end = min(a.k_tiles, t.kt_begin + a.split_tiles);
  t.stages = (t.kt_end - t.kt_begin + kTpu - 1) / kTpu;
  t.Init();

  // The first stages' weights before the wait, their x after it.
  for (int s = 0; s < S - 1; ++s) {
    if (s < t.stages) t.LoadWeights(stages[s], s);
  }
  cuda::GridDependencyWait();
  cuda::LaunchDependents();
  for (int s = 0; s < S - 1; ++s) {
    if (s < t.stages) t.LoadX(stages[s], s);
    cuda::CpAsyncCommit();
  }

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gr = lane >> 2, t4 = lane & 3;
  const int32_t j0 = (warp % kWarpsN) * 2;        // the warp's first row tile of the group
  const int32_t xr = (warp / kWarpsN) * 8 * kNt;  // its first x row of the block's
  const bool active = j0 < t.g;
  float acc[2][kNt][4] = {}, p[2][kNt][4] = {}, sx[kNt][4] = {};
  int32_t gi = GroupOf(t.kt_begin * kInt4TileCols, a);  // the group of the next slice
  const int32_t end_col = t.kt_end * kInt4TileCols;
  int32_t boundary = min((gi + 1) * a.group, end_col);  // where its part of the group ends
  uint32_t sub[2][2] = {{kMagic136, kMagic136}, {kMagic136, kMagic136}};
  bool open = kKind == Int4Offsets::kZero;  // a group starts: load its zero points
  bool fresh = true;                        // p and sx hold nothing yet
  // After a slice ending at column next_col: flush at the group's (or the
  // split's) end, and step to the next group at a group's end.
  auto close = [&](const Stage<kNt>& st, int32_t next_col, int32_t stage_g0) {
    if (next_col != boundary) return;
    Flush<kNt, kKind>(st, gi - stage_g0, t.g, j0, gr, acc, p, sx);
    fresh = true;
    if (next_col == (gi + 1) * a.group) {
      ++gi;
      open = kKind == Int4Offsets::kZero;
    }
    boundary = min((gi + 1) * a.group, end_col);
  };

  for (int32_t s = 0; s < t.stages; ++s) {
    cuda::CpAsyncWait<S - 2>();
    __syncthreads();  // stage s landed for all; stage s - 1's buffer is free
    const int32_t next = s + S - 1;
    if (next < t.stages) {
      t.LoadWeights(stages[next % S], next);
      t.LoadX(stages[next % S], next);
    }
    cuda::CpAsyncCommit();
    if (!active) continue;  // inactive warps keep no sums and no group state
    const Stage<kNt>& st = stages[s % S];
    const int32_t kt = t.StageTile(s), ntiles = t.StageTiles(s);
    const int32_t stage_g0 = gi;  // the group of the stage's first column
    if constexpr (kAligned) {
      if (ntiles == kTpu) {
        if constexpr (kKind == Int4Offsets::kZero) {
          if (open) LoadZeros<kNt>(st, 0, t.g, j0, gr, sub);
          open = false;
        }
        uint4 c[kTpu][2];
#pragma unroll
        for (int tt = 0; tt < kTpu; ++tt) {
          c[tt][0] = st.codes[(tt * t.g + j0) * 32 + lane];
          c[tt][1] = st.codes[(tt * t.g + j0 + 1) * 32 + lane];
        }
#pragma unroll
        for (int tt = 0; tt < kTpu; ++tt) {
          const uint32_t w[4][2] = {{c[tt][0].x, c[tt][1].x},
                                    {c[tt][0].y, c[tt][1].y},
                                    {c[tt][0].z, c[tt][1].z},
                                    {c[tt][0].w, c[tt][1].w}};
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const int col = tt * kInt4TileCols + 16 * i + 4 * t4;
            if (tt == 0 && i == 0 && fresh) {  // groups open on stage starts only
              Slice<kNt, kKind, true>(st, w[i], col, xr, gr, sub, p, sx);
            } else {
              Slice<kNt, kKind, false>(st, w[i], col, xr, gr, sub, p, sx);
            }
          }
        }
        fresh = false;
        close(st, (kt + kTpu) * kInt4TileCols, stage_g0);
        continue;
      }
    }
#pragma unroll
    for (int tt = 0; tt < kTpu; ++tt) {
      if (tt >= ntiles) break;
      const uint4 c0 = st.codes[(tt * t.g + j0) * 32 + lane];
      const uint4 c1 = st.codes[(tt * t.g + j0 + 1) * 32 + lane];
      const uint32_t w[4][2] = {{c0.x, c1.x}, {c0.y, c1.y}, {c0.z, c1.z}, {c0.w, c1.w}};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        if constexpr (kKind == Int4Offsets::kZero) {
          if (open) LoadZeros<kNt>(st, gi - stage_g0, t.g, j0, gr, sub);
          open = false;
        }
        const int col = tt * kInt4TileCols + 16 * i + 4 * t4;
        if (fresh) {
          Slice<kNt, kKind, true>(st, w[i], col, xr, gr, sub, p, sx);
        } else {
          Slice<kNt, kKind, false>(st, w[i], col, xr, gr, sub, p, sx);
        }
        fresh = false;
        close(st, (kt + tt) * kInt4TileCols + 16 * i + 16, stage_g0);
      }
    }
  }
  cuda::CpAsyncWait<0>();

  if (a.splits == 1) {
    if (active) Epilogue<kNt>(a, t.rg, t.g, j0, t.m0 + xr, acc);
    return;
  }
  // Split-K: this block's sums to its slot; the last of the tile's blocks
  // sums the slots in split order and writes y.
  constexpr int kSlot = Cfg<kNt>::kSlotFloats;
  auto slot = [&](int32_t sp) {
    return reinterpret_cast<float4*>(a.partials + (int64_t{out_tile} * a.splits + sp) * kSlot) +
           threadIdx.x * 2 * kNt;
  };
#pragma unroll
  for (int r = 0; r < 2; ++r) {
#pragma unroll
    for (int nt = 0; nt < kNt; ++nt) {
      __stcg(slot(split) + r * kNt + nt,
             make_float4(acc[r][nt][0], acc[r][nt][1], acc[r][nt][2], acc[r][nt][3]));
    }
  }
  // The barrier orders every thread's stores before thread 0's release
  // (cumulative); the second, thread 0's acquire before everyone's loads.
  __syncthreads();
  int32_t* counter = a.counters_end - 1 - out_tile;
  if (threadIdx.x == 0) last_block = cuda::AtomicAddAcqRelGpu(counter, 1) == a.splits - 1;
  __syncthreads();
  if (!last_block) return;
  float sum[2][kNt][4] = {};
  for (int32_t sp = 0; sp < a.splits; ++sp) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
#pragma unroll
      for (int nt = 0; nt < kNt; ++nt) {
        const float4 v = __ldcg(slot(sp) + r * kNt + nt);
        sum[r][nt][0] += v.x, sum[r][nt][1] += v.y, sum[r][nt][2] += v.z, sum[r][nt][3] += v.w;
      }
    }
  }
  if (active) Epilogue<kNt>(a, t.rg, t.g, j0, t.m0 + xr, sum);
  if (threadIdx.x == 0) *counter = 0;
}

template <int kNt, Int4Offsets kKind, bool kAligned>
absl::Status Launch(Args a, int num_sms, int64_t slot_bytes, cudaStream_t stream) {
  using C = Cfg<kNt>;
  constexpr size_t kSmem = sizeof(Stage<kNt>) * C::kStages;
  static const absl::StatusOr<int> per_sm = []() -> absl::StatusOr<int> {
    auto* kernel = Int4TiledKernel<kNt, kKind, kAligned>;
    CUDA_RETURN_IF_ERROR(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
    int blocks = 0;
    CUDA_RETURN_IF_ERROR(
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, kThreads, kSmem));
    return std::max(blocks, 1);
  }();
  RETURN_IF_ERROR(per_sm.status());
  a.m_blocks = static_cast<int32_t>(cuda::CeilDiv(a.rows, C::kRows));
  const int64_t row_groups = cuda::CeilDiv(a.n_tiles, 8);
  const int64_t tiles = row_groups * a.m_blocks;
  const int64_t k_stages = cuda::CeilDiv(a.k_tiles, kTpu);
  const int64_t splits = Int4TileSplits(tiles, int64_t{num_sms} * *per_sm, k_stages,
                                        slot_bytes / (C::kSlotFloats * 4), a.n_tiles);
  a.split_tiles = static_cast<int32_t>(cuda::CeilDiv(k_stages, splits) * kTpu);
  a.splits = static_cast<int32_t>(cuda::CeilDiv(a.k_tiles, a.split_tiles));
  const int64_t grid = tiles * a.splits;
  CUDA_RETURN_IF_ERROR(cuda::LaunchPdl(Int4TiledKernel<kNt, kKind, kAligned>,
                                       dim3(static_cast<int>(grid)), dim3(kThreads), kSmem, stream,
                                       a));
  return absl::OkStatus();
}

template <int kNt, Int4Offsets kKind>
absl::Status LaunchAligned(const Args& a, int num_sms, int64_t slot_bytes, cudaStream_t stream) {
  if (a.group % kCols == 0) return Launch<kNt, kKind, true>(a, num_sms, slot_bytes, stream);
  return Launch<kNt, kKind, false>(a, num_sms, slot_bytes, stream);
}

template <Int4Offsets kKind>
absl::Status LaunchRows(const Args& a, int32_t tile_rows, int num_sms, int64_t slot_bytes,
                        cudaStream_t stream) {
  switch (tile_rows) {
    case 16:
      return LaunchAligned<1, kKind>(a, num_sms, slot_bytes, stream);
    case 32:
      return LaunchAligned<2, kKind>(a, num_sms, slot_bytes, stream);
    case 64:
      return LaunchAligned<4, kKind>(a, num_sms, slot_bytes, stream);
    case 128:
      return LaunchAligned<8, kKind>(a, num_sms, slot_bytes, stream);
  }
  return absl::UnimplementedError(cuda::Cat("Int4Gemm: tile_rows ", tile_rows));
}

}  // namespace

absl::Status LaunchInt4GemmTiled(const Int4GemmParams& p, int num_sms, cudaStream_t stream) {
  Args a{};
  static_cast<int4::LaunchArgs&>(a) = int4::MakeLaunchArgs(p);
  const int64_t slot_bytes = Int4GemmWorkspace(p.w.n, num_sms).slot_bytes;
  const int32_t tile_rows = Int4GemmTiledRows(p);
  switch (p.w.offset_kind) {
    case Int4Offsets::kSymmetric:
      return LaunchRows<Int4Offsets::kSymmetric>(a, tile_rows, num_sms, slot_bytes, stream);
    case Int4Offsets::kZero:
      return LaunchRows<Int4Offsets::kZero>(a, tile_rows, num_sms, slot_bytes, stream);
    case Int4Offsets::kFloat:
      return LaunchRows<Int4Offsets::kFloat>(a, tile_rows, num_sms, slot_bytes, stream);
  }
  return absl::UnimplementedError("Int4Gemm: unknown offset kind");
}

}  // namespace onecard::engine
