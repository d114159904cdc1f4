// Int4Gemm's kStream kernel (int4_gemm.cu, which alone includes this): its
// shapes (Cfg, the shared-memory Stage and Smem), its launch arguments, and
// the stream-K walk of a block's share (ShareStart, BlockOf, Sub, Walker) with
// the group arithmetic of a stage's columns. The design: int4_gemm.cu's head.
#ifndef ONECARD_ENGINE_KERNELS_INT4_GEMM_STREAM_CUH_
#define ONECARD_ENGINE_KERNELS_INT4_GEMM_STREAM_CUH_

#include <cstdint>

#include "engine/kernels/cuda_common.cuh"
#include "engine/kernels/int4_codes.cuh"
#include "engine/kernels/int4_gemm.h"

namespace onecard::engine::int4_stream {

constexpr int kWarps = 8;                    // consumer warps: one 16-row tile each
constexpr int kThreads = 32 * (kWarps + 1);  // + the producer warp

// The shape of a launch for rows in (8 (NT / 2), 8 NT]: the k tiles a stage
// holds, the stages and the blocks an SM (shared memory: up to 16 KB of
// codes and 8 NT staged x rows a stage; registers: 8 NT fp32 sums a thread,
// 12 NT with mins). Rows 9-16: 8 k tiles and one block (half the x-row copies a code byte).
template <int NT>
struct Cfg {
  static constexpr int kTpu = NT == 2 ? 8 : NT == 1 ? 4 : 2;  // k tiles a stage
  static constexpr int kCols = kTpu * kInt4TileCols;          // columns a stage
  static constexpr int kXStride = kCols + 16;              // bf16 a staged row (no bank conflicts)
  static constexpr int kMaxSpans = kCols / kInt4MinGroup;  // groups a stage touches
  static constexpr int kStages = NT == 2 ? 3 : 4;
  static constexpr int kBlocksPerSm = NT >= 8 || NT == 2 ? 1 : 2;
};

// Where a normed product's RMSNorm runs (a kernel's template argument):
// apart (an RmsNorm launch before it, or none), in the prologue (kRmsNorm:
// RowNorms, the producer normalizing each stage), or folded (Int4NormFold:
// the residual product's fold outputs, x_sum_sq's row scales).
enum class Norm { kApart, kPrologue, kFolded };

// Whether q's offset is taken after the sums, through S = sum x (mins).
template <Int4Offsets kKind>
constexpr bool kSumX = kKind == Int4Offsets::kFloat;

struct Args : int4::LaunchArgs {
  // A full stage's group spans, for ComputeFull (Launch sets it from the
  // stage shape): 0 two a tile (groups of 32), j a span every j tiles, -1 the
  // general Compute only.
  int32_t tiles_per_span;
  const cuda::bf16* norm_w;
  float eps;
  // Int4GemmParams::fold_norm (fold_w null: none) and x_sum_sq.
  const cuda::bf16* fold_w;
  cuda::bf16* fold_x;
  float* fold_sum_sq;
  const float* x_sum_sq;
  int32_t row_groups;
  int64_t iters;  // row_groups * k_tiles
  // counters_end: one a row tile
  uint64_t* trace;        // Int4GemmParams::trace
  bool early_dependents;  // LaunchSettings::early_dependents
  // 0: stream-K shares. G > 0: a cluster split (int4_gemm_finish.cuh), the
  // grid row_groups x G blocks in clusters of G (ShareOf).
  int32_t cluster;
  int32_t stream_cluster;  // Int4GemmParams::stream_cluster
};

// A stage's copy of the row group's codes, scales and offsets keeps their
// global order (int4_layout.h): tile t of warp w at codes[(t * g + w) * 32],
// group span sp of warp w at scales[(sp * g + w) * 8], g the group's tiles.
template <int NT>
struct Stage {
  uint4 codes[Cfg<NT>::kTpu * kWarps * 32];
  cuda::bf16 x[8 * NT][Cfg<NT>::kXStride];
  cuda::bf16 norm_w[Cfg<NT>::kCols];
  uint32_t scales[Cfg<NT>::kMaxSpans * kWarps * 8];
  uint32_t offsets[Cfg<NT>::kMaxSpans * kWarps * 8];
};

template <int NT>
struct Smem {
  Stage<NT> stage[Cfg<NT>::kStages];
  uint64_t full[Cfg<NT>::kStages];   // the copies of a stage landed
  uint64_t ready[Cfg<NT>::kStages];  // the producer normalized its x (kRmsNorm)
  uint64_t empty[Cfg<NT>::kStages];  // the consumers are done with it
  // kRmsNorm's inv_rms, or x_sum_sq's r, of each row.
  float inv_rms[kInt4GemmMaxNormRows > kInt4GemmFoldMaxRows ? kInt4GemmMaxNormRows
                                                            : kInt4GemmFoldMaxRows];
  float red[kWarps];
  uint64_t t_start;          // Args::trace: the block's start
  uint64_t t_first[kWarps];  // and each consumer warp's first stage landed
  uint64_t t_last[kWarps];   // and its last stage computed
};

// First iteration of block b: b * iters / grid.
__device__ __forceinline__ int64_t ShareStart(int64_t b, const Args& a) {
  return b * a.iters / gridDim.x;
}

// Block b's iterations [*begin, *end): its stream-K share, or in a cluster
// split (kCluster) the k tiles [r K / G, (r + 1) K / G) of row group b / G,
// r = b % G (its rank in its cluster), K = k_tiles, G = Args::cluster.
template <bool kCluster>
__device__ __forceinline__ void ShareOf(int64_t b, const Args& a, int64_t* begin, int64_t* end) {
  if constexpr (kCluster) {
    const int64_t row = b / a.cluster * a.k_tiles, r = b % a.cluster;
    *begin = row + r * a.k_tiles / a.cluster;
    *end = row + (r + 1) * a.k_tiles / a.cluster;
    return;
  }
  *begin = ShareStart(b, a);
  *end = ShareStart(b + 1, a);
}

// The block whose stream-K share holds iteration i.
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

// Whether a launch's full stages run ComputeFull: up to 16 rows, not with
// mins at 16 (wider row tiles and mins would spill in its straight-line code).
template <int NT, Int4Offsets kKind>
constexpr bool kFullStages = NT == 1 || (NT == 2 && !kSumX<kKind>);

// Walks a block's share sub by sub (one 64-bit division at the start, none
// after: a stage's bookkeeping must cost nothing next to its slices). With
// kAligned, subs end on multiples of kTpu k tiles, so all but a segment's
// first and last are full stages (ComputeFull).
template <int kTpu, bool kAligned>
struct Walker {
  static_assert((kTpu & (kTpu - 1)) == 0, "k tiles a stage: a power of two");
  int32_t left;     // iterations not yet walked (a share: under 2^31, Int4Gemm checks)
  int32_t rg, kt;   // of the next sub
  bool seg_from_0;  // the current segment started at k tile 0

  __device__ __forceinline__ Walker(int64_t begin, int64_t end, const Args& a)
      : left(static_cast<int32_t>(end - begin)),
        rg(static_cast<int32_t>(begin / a.k_tiles)),
        kt(static_cast<int32_t>(begin % a.k_tiles)),
        seg_from_0(kt == 0) {}

  __device__ __forceinline__ bool done() const { return left <= 0; }

  __device__ __forceinline__ Sub Next(const Args& a) {
    Sub s;
    s.rg = rg;
    s.kt = kt;
    const int32_t in_row = a.k_tiles - kt;
    const int32_t seg_left = min(left, in_row);
    s.ntiles = min(seg_left, kAligned ? kTpu - (kt & (kTpu - 1)) : kTpu);
    s.seg_last = s.ntiles == seg_left;
    s.whole = s.seg_last && seg_from_0 && s.ntiles == in_row;
    s.g = min(a.n_tiles - rg * kWarps, kWarps);
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

__device__ __forceinline__ int32_t GroupOf(int32_t c, const Args& a) {
  return int4::GroupOf(c, a.inv_group);
}

// Groups of the stage's columns: the first, and how many.
__device__ __forceinline__ int32_t FirstGroup(const Sub& s, const Args& a) {
  return GroupOf(s.kt * kInt4TileCols, a);
}
__device__ __forceinline__ int32_t Spans(const Sub& s, const Args& a) {
  return GroupOf((s.kt + s.ntiles) * kInt4TileCols - 1, a) - FirstGroup(s, a) + 1;
}

}  // namespace onecard::engine::int4_stream

#endif  // ONECARD_ENGINE_KERNELS_INT4_GEMM_STREAM_CUH_
