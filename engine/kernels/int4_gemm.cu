// Int4Gemm on CUDA (int4_gemm.h; layout: int4_layout.h): the entry and the kStream
// kernel (kTiled: int4_gemm_tiled.cu), for the HBM floor of decode. Design:
// - Tensor cores with the weights as the A operand: a warp owns one 16-row
//   tile; the step's rows are the mma's n (8 a tile, padded with zeros), in
//   tiles of 8 NT rows (NT = 1, 2, 4, 8: Cfg), so the dequantization of a
//   code slice serves NT mmas.
// - Dequantization in registers: (word >> 4 m) & 0x000f000f | 0x43004300 is a
//   bf16 pair 128 + q, exact. Either, minus 128 + z (136 for symmetric
//   codes), it is the exact q - z and the scale is applied once a group to
//   the mma's fp32 sums; or, for mins (kFloat), the mma sums
//   P = sum (128 + q) x, a second mma with A = 1 sums S = sum x, and
//   acc += s P + (m - 128 s) S once a group. A row's arithmetic is the same
//   whatever the rows of the launch (batch invariance).
// - Warp-specialised pipeline: a producer warp streams each stage (8, 4 or
//   2 k tiles of the block's 8 row tiles: codes, scales, the x columns; the
//   layout makes the codes and the scales one contiguous copy each) into
//   shared memory with the bulk copy engine (x from 32 rows by cp.async:
//   kXByCpAsync), up to kStages stages ahead, completing on mbarriers; eight
//   consumer warps wait on a stage, compute, and release it. No block-wide
//   barrier in the loop. With the RMSNorm prologue the producer also
//   normalizes a stage's x before releasing it to the consumers.
// - Work split "stream-K": the (row group of 8 tiles) x (64-column k tile)
//   iterations are cut into one equal contiguous share per resident block,
//   so every SM streams to the end whatever n and k are. A row tile cut
//   between blocks is summed in block order (deterministic) by the warp that
//   brings its last part, which also writes y: from partial slots, its own
//   part from registers when the others were in before it ended
//   (FinishSegment, int4_gemm_finish.cuh).
// - Full stages: up to 16 rows a block's stages end on multiples of kTpu k
//   tiles, so all but a segment's first and last hold kTpu k tiles from an
//   aligned start, where groups of 32, 64, 128 and 256 or more columns open
//   and close at places known at compile time: those stages run
//   straight-line code (ComputeFull, ~60 warp instructions a 512-byte code
//   tile against ~75 with the per-slice group tests of Compute), chosen once
//   a launch (ConsumeStages' kSpan).
// - Cluster split (LaunchSettings::int4_cluster_split_k; Int4GemmClusterSize
//   says where): a row group's k tiles cut in G equal parts over the blocks
//   of one thread block cluster, summed through distributed shared memory
//   (int4_gemm_finish.cuh) instead of stream-K's slots; a kernel of its own
//   (kCluster).
// - Programmatic dependent launch: the first stages' weights come before the wait.
// Tested by tests/gpu/int4_gemm_test.cc against Int4GemmRef.
#include <cuda_fp16.h>

#include <algorithm>
#include <array>
#include <limits>

#include "engine/kernels/cuda_check.h"
#include "engine/kernels/cuda_common.cuh"
#include "engine/kernels/cuda_pipeline.cuh"
#include "engine/kernels/cuda_ptx.cuh"
#include "engine/kernels/int4_codes.cuh"
#include "engine/kernels/int4_gemm.h"
#include "engine/kernels/int4_gemm_finish.cuh"
#include "engine/kernels/int4_gemm_internal.h"
#include "engine/kernels/int4_gemm_stream.cuh"
#include "engine/kernels/launch_settings.h"

namespace onecard::engine {
namespace int4_stream {

using int4::Dequant128;
using int4::HalfPair;
using int4::kMagic136;
using int4::kOnes;
using int4::SubBf16x2;
using int4::YKind;

// ---------------------------------------------------------------- producer

template <int NT, Int4Offsets kKind>
__device__ __forceinline__ uint32_t ConstantBytes(const Sub& s, const Args& a) {
  const uint32_t scale_bytes = Spans(s, a) * 32;
  return s.g *
         (s.ntiles * kInt4TileBytes + scale_bytes * (kKind == Int4Offsets::kSymmetric ? 1 : 2));
}

// How a stage's x rows come: up to 16 rows one bulk copy a row (lanes
// 8..31); from 32 rows by 16-byte cp.async pieces over the warp's lanes, each
// lane arriving on the stage's barrier when its pieces land (the copy engine
// takes ~100 cycles a copy whatever its size: 32-64 copies a stage held the
// consumers up; for 16 rows the bulk copies were 12 % faster, kernels-int4).
template <int NT>
constexpr bool kXByCpAsync = NT >= 4;

// Arrivals a stage's full barrier takes: the producer's lane 0 (with the
// bulk copies' bytes), and with kXByCpAsync each producer lane's.
template <int NT>
constexpr uint32_t kFullArrivals = kXByCpAsync<NT> ? 1 + 32 : 1;

// Bytes of the stage's bulk copies after the constants: the norm weights'
// columns and the x rows that come by bulk copy.
template <int NT, bool kNorm>
__device__ __forceinline__ uint32_t XBytes(const Sub& s, const Args& a) {
  const uint32_t row = s.ntiles * kInt4TileCols * 2;
  return (kXByCpAsync<NT> ? 0 : min(a.rows, 8 * NT) * row) + (kNorm ? row : 0);
}

template <int NT, Int4Offsets kKind>
__device__ __forceinline__ void CopyConstants(Stage<NT>& st, uint64_t* bar, const Sub& s,
                                              const Args& a, int lane) {
  if (lane == 0) {
    const int64_t tile = Int4TileIndex(int64_t{s.rg} * kWarps, s.kt, a.k_tiles, a.n_tiles);
    cuda::BulkCopy(st.codes, a.codes + tile * 32, s.g * s.ntiles * kInt4TileBytes, bar);
    return;
  }
  if (lane > 2 || (lane == 2 && kKind == Int4Offsets::kSymmetric)) return;
  const int64_t word = (int64_t{s.rg} * kWarps * a.num_groups + FirstGroup(s, a) * s.g) * 8;
  const uint32_t bytes = Spans(s, a) * s.g * 32;
  if (lane == 1) {
    cuda::BulkCopy(st.scales, a.scales + word, bytes, bar);
  } else {
    cuda::BulkCopy(st.offsets, a.offsets + word, bytes, bar);
  }
}

// The x rows of the stage (kXByCpAsync says how); lane 3 brings the norm
// weights' columns with the copy engine.
template <int NT, bool kNorm>
__device__ __forceinline__ void CopyX(Stage<NT>& st, uint64_t* bar, const Sub& s, const Args& a,
                                      int lane) {
  const int64_t col0 = int64_t{s.kt} * kInt4TileCols;
  const uint32_t row_bytes = s.ntiles * kInt4TileCols * 2;
  if (kNorm && lane == 3) cuda::BulkCopy(st.norm_w, a.norm_w + col0, row_bytes, bar);
  const int rows = min(a.rows, 8 * NT);
  if constexpr (kXByCpAsync<NT>) {
    const int pieces = row_bytes / 16;  // a row's
    for (int i = lane; i < rows * pieces; i += 32) {
      const int r = i / pieces, c = (i - r * pieces) * 8;
      cuda::CpAsync16(&st.x[r][c], a.x + r * a.x_stride + col0 + c);
    }
    cuda::CpAsyncArriveNoinc(bar);
  } else {
    for (int r = lane - 8; r >= 0 && r < rows; r += 24) {
      cuda::BulkCopy(st.x[r], a.x + r * a.x_stride + col0, row_bytes, bar);
    }
  }
}

// x' = bf16(w * (x * inv_rms)) in place (rms_norm.h's rounding).
template <int NT>
__device__ __forceinline__ void NormalizeX(Stage<NT>& st, const Smem<NT>& sm, const Sub& s,
                                           const Args& a, int lane) {
  const int chunks = s.ntiles * (kInt4TileCols / 8);
  for (int i = lane; i < a.rows * chunks; i += 32) {
    const int row = i / chunks, c = i % chunks;
    uint4* v = reinterpret_cast<uint4*>(&st.x[row][c * 8]);
    float xf[8], wf[8];
    cuda::Unpack8(*v, xf);
    cuda::Unpack8(*reinterpret_cast<const uint4*>(&st.norm_w[c * 8]), wf);
#pragma unroll
    for (int e = 0; e < 8; ++e) xf[e] = wf[e] * (xf[e] * sm.inv_rms[row]);
    *v = cuda::Pack8(xf);
  }
}

template <int NT, Int4Offsets kKind, bool kNorm>
__device__ void Producer(Smem<NT>& sm, const Args& a, int64_t begin, int64_t end) {
  constexpr int S = Cfg<NT>::kStages;
  const int lane = threadIdx.x & 31;
  if (a.early_dependents) cuda::LaunchDependents();
  // The first stages' weights before the wait (constants), their x after.
  Walker<Cfg<NT>::kTpu, kFullStages<NT, kKind>> issue(begin, end, a);
  Sub first[S];
  int issued = 0;
  for (; issued < S - 1 && !issue.done(); ++issued) {
    first[issued] = issue.Next(a);
    if (lane == 0)
      cuda::MbarrierExpectTx(&sm.full[issued], ConstantBytes<NT, kKind>(first[issued], a));
    __syncwarp();
    CopyConstants<NT, kKind>(sm.stage[issued], &sm.full[issued], first[issued], a, lane);
  }
  cuda::GridDependencyWait();
  if (!a.early_dependents) cuda::LaunchDependents();
  for (int j = 0; j < issued; ++j) {
    if (lane == 0) cuda::MbarrierArriveExpectTx(&sm.full[j], XBytes<NT, kNorm>(first[j], a));
    __syncwarp();
    CopyX<NT, kNorm>(sm.stage[j], &sm.full[j], first[j], a, lane);
  }
  __syncthreads();  // the consumers' inv_rms
  // Refills stage `issued % S` (sub `issued`) after the consumers left it.
  const auto refill = [&] {
    const int st = issued % S;
    cuda::MbarrierWait(&sm.empty[st], ((issued / S) & 1) ^ 1);
    const Sub s = issue.Next(a);
    if (lane == 0) {
      cuda::MbarrierArriveExpectTx(&sm.full[st],
                                   ConstantBytes<NT, kKind>(s, a) + XBytes<NT, kNorm>(s, a));
    }
    __syncwarp();
    CopyConstants<NT, kKind>(sm.stage[st], &sm.full[st], s, a, lane);
    CopyX<NT, kNorm>(sm.stage[st], &sm.full[st], s, a, lane);
    ++issued;
  };
  Walker<Cfg<NT>::kTpu, kFullStages<NT, kKind>> norm(begin, end, a);
  for (int j = 0; !norm.done(); ++j) {
    const Sub s = norm.Next(a);
    if constexpr (kNorm) {
      // Stage j is normalized as soon as it lands, before the refill of a
      // slot the consumers still hold (they are computing stage j - 1 and
      // next wait for this one); a slot already free is refilled first.
      const bool free_slot =
          !issue.done() && cuda::MbarrierTestWait(&sm.empty[issued % S], ((issued / S) & 1) ^ 1);
      if (free_slot) refill();
      const int st = j % S;
      cuda::MbarrierWait(&sm.full[st], (j / S) & 1);
      NormalizeX<NT>(sm.stage[st], sm, s, a, lane);
      __threadfence_block();
      cuda::FenceProxyAsync();  // the copy engine writes this buffer again later
      __syncwarp();
      if (lane == 0) cuda::MbarrierArrive(&sm.ready[st]);
      if (!free_slot && !issue.done()) refill();
    } else {
      if (!issue.done()) refill();
    }
  }
}

// ---------------------------------------------------------------- consumers

// A group's constants for rows gr (.lo) and gr + 8 (.hi): the scales, and
// the pair subtracted from 128 + q before the sums (kSymmetric, kZero) or
// the factor c = m - 128 s of S after them (kFloat).
struct Span {
  float2 scale;
  uint32_t sub_lo, sub_hi;
  float2 c;
};

template <int NT, Int4Offsets kKind>
__device__ __forceinline__ Span LoadSpan(const Stage<NT>& st, int g, int warp, int sp, int gr) {
  const int word = (sp * g + warp) * 8 + gr;
  Span s;
  s.scale = HalfPair(st.scales[word]);
  if constexpr (kKind == Int4Offsets::kFloat) {
    const float2 m = HalfPair(st.offsets[word]);
    s.c = make_float2(m.x - 128.0f * s.scale.x, m.y - 128.0f * s.scale.y);
  } else if constexpr (kKind == Int4Offsets::kSymmetric) {
    s.sub_lo = s.sub_hi = kMagic136;
  } else {
    const uint32_t z = st.offsets[word];  // two int16 zero points, 0..127
    const uint32_t lo = z & 0xFFFF, hi = z >> 16;
    s.sub_lo = int4::ZeroPair(lo);
    s.sub_hi = int4::ZeroPair(hi);
  }
  return s;
}

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

// One 16-column slice of the warp's tile: code word `word` dequantized and
// multiplied by the x columns from col into p (and S = sum x into sx, mins).
template <int NT, Int4Offsets kKind>
__device__ __forceinline__ void Slice(const Stage<NT>& st, uint32_t word, const Span& span, int col,
                                      int gr, float (&p)[NT][4], float (&sx)[NT][4]) {
  constexpr bool kSum = kSumX<kKind>;
  const uint32_t ones[4] = {kOnes, kOnes, kOnes, kOnes};
  uint32_t av[4];
#pragma unroll
  for (int m = 0; m < 4; ++m) {
    av[m] = Dequant128(word, m);
    if constexpr (!kSum) av[m] = SubBf16x2(av[m], m % 2 == 0 ? span.sub_lo : span.sub_hi);
  }
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    const uint2 bv = *reinterpret_cast<const uint2*>(&st.x[nt * 8 + gr][col]);
    cuda::MmaBf16(p[nt], av, bv.x, bv.y);
    if constexpr (kSum) cuda::MmaBf16(sx[nt], ones, bv.x, bv.y);
  }
}

// The tensor-core work of one stage for this warp's tile, any stage.
template <int NT, Int4Offsets kKind>
__device__ __forceinline__ void Compute(const Stage<NT>& st, const Sub& s, const Args& a,
                                        float (&acc)[NT][4]) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gr = lane >> 2, t4 = lane & 3;
  float p[NT][4] = {}, sx[NT][4] = {};
  const int32_t col0 = s.kt * kInt4TileCols;
  int32_t boundary = (GroupOf(col0, a) + 1) * a.group;  // the next group's first column
  int sp = 0;
  Span span = LoadSpan<NT, kKind>(st, s.g, warp, 0, gr);
#pragma unroll
  for (int t = 0; t < Cfg<NT>::kTpu; ++t) {
    if (t >= s.ntiles) break;
    const uint4 v = st.codes[(t * s.g + warp) * 32 + lane];
    const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      Slice<NT, kKind>(st, words[i], span, t * kInt4TileCols + 16 * i + 4 * t4, gr, p, sx);
      // Groups end on 32-column boundaries (odd i) only.
      if (i % 2 == 0) continue;
      const int32_t next_col = col0 + t * kInt4TileCols + 16 * i + 16;
      const bool last = t == s.ntiles - 1 && i == 3;
      if (next_col == boundary || last) {
        Flush<NT, kKind>(span, acc, p, sx);
        if (next_col == boundary && !last) {
          boundary += a.group;
          span = LoadSpan<NT, kKind>(st, s.g, warp, ++sp, gr);
        }
      }
    }
  }
}

// Compute for a full stage (kTpu k tiles from a multiple of kTpu): where its
// groups open and close is known at compile time (kTilesPerSpan, see
// Args::tiles_per_span), so its slices run as straight-line code.
template <int NT, Int4Offsets kKind, int kTilesPerSpan>
__device__ __forceinline__ void ComputeFull(const Stage<NT>& st, const Sub& s,
                                            float (&acc)[NT][4]) {
  constexpr int kTpu = Cfg<NT>::kTpu;
  constexpr bool kHalf = kTilesPerSpan == 0;     // groups of 32
  constexpr int kJ = kHalf ? 1 : kTilesPerSpan;  // tiles a span
  static_assert(kJ <= kTpu && kTpu % kJ == 0, "spans end on the stage's end");
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gr = lane >> 2, t4 = lane & 3;
  float p[NT][4] = {}, sx[NT][4] = {};
  Span span;
#pragma unroll
  for (int t = 0; t < kTpu; ++t) {
    const uint4 v = st.codes[(t * s.g + warp) * 32 + lane];
    const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const bool opens = kHalf ? i % 2 == 0 : t % kJ == 0 && i == 0;
      const bool closes = kHalf ? i % 2 == 1 : t % kJ == kJ - 1 && i == 3;
      if (opens) {
        const int sp = kHalf ? 2 * t + i / 2 : t / kJ;
        span = LoadSpan<NT, kKind>(st, s.g, warp, sp, gr);
      }
      Slice<NT, kKind>(st, words[i], span, t * kInt4TileCols + 16 * i + 4 * t4, gr, p, sx);
      if (closes) Flush<NT, kKind>(span, acc, p, sx);
    }
  }
}

// A stage's work: ComputeFull for a full stage where kSpan (the launch's
// Args::tiles_per_span, a template argument so that no stage tests it) has
// one, else Compute.
template <int NT, Int4Offsets kKind, int kSpan>
__device__ __forceinline__ void ComputeStage(const Stage<NT>& st, const Sub& s, const Args& a,
                                             float (&acc)[NT][4]) {
  if constexpr (kSpan >= 0 && kFullStages<NT, kKind>) {
    if (s.ntiles == Cfg<NT>::kTpu) return ComputeFull<NT, kKind, kSpan>(st, s, acc);
  }
  Compute<NT, kKind>(st, s, a, acc);
}

// Args::tiles_per_span for stages of tpu k tiles: groups of 32 two spans a
// tile (0); groups of j * 64 columns with j dividing tpu a span every j tiles;
// groups of a multiple of tpu tiles one span a stage (tpu); else -1.
constexpr int32_t TilesPerSpan(int32_t group, int32_t tpu) {
  if (group == kInt4MinGroup) return 0;
  if (group % kInt4TileCols != 0) return -1;
  const int32_t tpg = group / kInt4TileCols;
  if (tpg <= tpu && tpu % tpg == 0) return tpg;
  return tpg % tpu == 0 ? tpu : -1;
}

// inv_rms of every row (kRmsNorm), over all of k, by the consumer warps.
template <int NT>
__device__ __forceinline__ void RowNorms(Smem<NT>& sm, const Args& a) {
  const int k = a.k_tiles * kInt4TileCols;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  for (int row = 0; row < a.rows; ++row) {
    const uint4* x = reinterpret_cast<const uint4*>(a.x + row * a.x_stride);
    float sum_sq = 0.0f;
    for (int i = threadIdx.x; i < k / 8; i += 32 * kWarps) {
      float v[8];
      cuda::Unpack8(x[i], v);
#pragma unroll
      for (int e = 0; e < 8; ++e) sum_sq += v[e] * v[e];
    }
    sum_sq = cuda::WarpSum(sum_sq);
    if (lane == 0) sm.red[warp] = sum_sq;
    cuda::NamedBarrier(1, 32 * kWarps);
    if (warp == 0) {
      float total = lane < kWarps ? sm.red[lane] : 0.0f;
      total = cuda::WarpSum(total);
      if (lane == 0) sm.inv_rms[row] = rsqrtf(total / static_cast<float>(k) + a.eps);
    }
    cuda::NamedBarrier(1, 32 * kWarps);
  }
}

// x_sum_sq's r of every row, by the consumer warps (warp w rows w, w + 8):
// the sum of the row's k / 16 tile sums, read 4 at a time over the lanes.
template <int NT>
__device__ __forceinline__ void RowScales(Smem<NT>& sm, const Args& a) {
  const int tiles = a.k_tiles * (kInt4TileCols / 16);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  for (int row = warp; row < a.rows; row += kWarps) {
    const float4* s = reinterpret_cast<const float4*>(a.x_sum_sq + int64_t{row} * tiles);
    float sum_sq = 0.0f;
    for (int i = lane; i < tiles / 4; i += 32) {
      const float4 v = s[i];
      sum_sq += (v.x + v.y) + (v.z + v.w);
    }
    sum_sq = cuda::WarpSum(sum_sq);
    if (lane == 0) sm.inv_rms[row] = rsqrtf(sum_sq / static_cast<float>(tiles * 16) + a.eps);
  }
  cuda::NamedBarrier(1, 32 * kWarps);
}

// The consumers' loop over the block's stages (kSpan: ComputeStage; kTrace:
// Args::trace is set, and the loop stamps it; kCluster: a cluster split).
template <int NT, Int4Offsets kKind, Norm kNorm, bool kTrace, bool kCluster, int kSpan>
__device__ __forceinline__ void ConsumeStages(Smem<NT>& sm, const Args& a, int64_t begin,
                                              int64_t end) {
  constexpr int S = Cfg<NT>::kStages;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  float acc[NT][4] = {};
  Walker<Cfg<NT>::kTpu, kFullStages<NT, kKind>> walk(begin, end, a);
  for (int j = 0; !walk.done(); ++j) {
    const Sub s = walk.Next(a);
    const int st = j % S;
    cuda::MbarrierWait(kNorm == Norm::kPrologue ? &sm.ready[st] : &sm.full[st], (j / S) & 1);
    if (kTrace && j == 0 && lane == 0) sm.t_first[warp] = cuda::GlobalTimerNs();
    if (s.rg * kWarps + warp < a.n_tiles) ComputeStage<NT, kKind, kSpan>(sm.stage[st], s, a, acc);
    __syncwarp();
    if (lane == 0) cuda::MbarrierArrive(&sm.empty[st]);
    if (s.seg_last) {
      // The last segment's overwrites the others': its last stage computed.
      if (kTrace && lane == 0) sm.t_last[warp] = cuda::GlobalTimerNs();
      Finish<NT, kCluster, kNorm == Norm::kFolded>(sm, s, a, acc);
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.0f;
    }
  }
}

template <int NT, Int4Offsets kKind, Norm kNorm, bool kTrace, bool kCluster>
__device__ void Consumer(Smem<NT>& sm, const Args& a, int64_t begin, int64_t end) {
  constexpr int S = Cfg<NT>::kStages;
  // x rows past a.rows stay zero (the copies never write them).
  for (int st = 0; st < S; ++st) {
    for (int r = a.rows; r < 8 * NT; ++r) {
      for (int c = threadIdx.x; c < Cfg<NT>::kXStride / 8; c += 32 * kWarps) {
        reinterpret_cast<uint4*>(sm.stage[st].x[r])[c] = make_uint4(0, 0, 0, 0);
      }
    }
  }
  cuda::PdlEnter(a.early_dependents);  // x and y come from the previous kernel
  if constexpr (kNorm == Norm::kPrologue) RowNorms<NT>(sm, a);
  __syncthreads();  // inv_rms for the producer, the zero rows for every consumer
  if constexpr (kNorm == Norm::kFolded) {
    if (a.x_sum_sq != nullptr) RowScales<NT>(sm, a);  // used from the first Finish
  }
  // (kRmsNorm's with mins would spill.)
  if constexpr (kFullStages<NT, kKind> && !(kNorm == Norm::kPrologue && kSumX<kKind>)) {
    const int32_t span = a.tiles_per_span;
    if (span == 0) return ConsumeStages<NT, kKind, kNorm, kTrace, kCluster, 0>(sm, a, begin, end);
    if (span == 1) return ConsumeStages<NT, kKind, kNorm, kTrace, kCluster, 1>(sm, a, begin, end);
    if (span == 2) return ConsumeStages<NT, kKind, kNorm, kTrace, kCluster, 2>(sm, a, begin, end);
    if constexpr (Cfg<NT>::kTpu >= 4) {
      if (span == 4) return ConsumeStages<NT, kKind, kNorm, kTrace, kCluster, 4>(sm, a, begin, end);
      if constexpr (Cfg<NT>::kTpu == 8) {
        if (span == 8)
          return ConsumeStages<NT, kKind, kNorm, kTrace, kCluster, 8>(sm, a, begin, end);
      }
    }
  }
  ConsumeStages<NT, kKind, kNorm, kTrace, kCluster, -1>(sm, a, begin, end);
}

// kCluster: a cluster split (Args::cluster, int4_gemm_finish.cuh), a kernel
// of its own so that stream-K's carry none of its code; kNorm likewise.
template <int NT, Int4Offsets kKind, Norm kNorm, bool kTrace, bool kCluster>
__global__ void __launch_bounds__(kThreads, Cfg<NT>::kBlocksPerSm) Int4GemmKernel(Args a) {
  static_assert(!kCluster || kClusterSplit<NT>, "cluster splits up to 16 rows");
  extern __shared__ __align__(128) unsigned char smem_raw[];
  Smem<NT>& sm = *reinterpret_cast<Smem<NT>*>(smem_raw);
  int64_t begin = 0, end = 0;
  ShareOf<kCluster>(blockIdx.x, a, &begin, &end);
  if (begin >= end) return;  // stream-K only: a cluster split gives every block k tiles
  if (threadIdx.x == 0) {
    if constexpr (kTrace) sm.t_start = cuda::GlobalTimerNs();
    for (int s = 0; s < Cfg<NT>::kStages; ++s) {
      cuda::MbarrierInit(&sm.full[s], kFullArrivals<NT>);
      cuda::MbarrierInit(&sm.ready[s], 1);
      cuda::MbarrierInit(&sm.empty[s], kWarps);
    }
    if constexpr (kCluster) InitClusterParts<NT>(sm, a);
    cuda::FenceMbarrierInit();
  }
  __syncthreads();                                       // the barriers, before anyone uses them
  if constexpr (kCluster) cuda::ClusterArriveRelaxed();  // for FinishInCluster's senders
  if (threadIdx.x >= 32 * kWarps) {
    Producer<NT, kKind, kNorm == Norm::kPrologue>(sm, a, begin, end);
    if constexpr (kCluster) cuda::ClusterWaitAcquire();  // its arrival's pair
  } else {
    Consumer<NT, kKind, kNorm, kTrace, kCluster>(sm, a, begin, end);
    const int warp = threadIdx.x >> 5;
    if (kTrace && (threadIdx.x & 31) == 0) {
      uint64_t* r = a.trace + (int64_t{blockIdx.x} * kWarps + warp) * kInt4GemmTraceStamps;
      r[0] = sm.t_start;
      r[1] = sm.t_first[warp];
      r[2] = sm.t_last[warp];
      r[3] = cuda::GlobalTimerNs();
      r[4] = cuda::SmId();
    }
  }
}

int NumSms() {
  static const int sms = [] {
    int device = 0, count = 0;
    const bool ok =
        cudaGetDevice(&device) == cudaSuccess &&
        cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device) == cudaSuccess;
    return ok ? count : 132;
  }();
  return sms;
}

constexpr int kMaxNt = kInt4GemmStreamMaxRows / 8;
static_assert(kInt4GemmSlotBytes == int64_t{kWarps} * 32 * kMaxNt * 4 * 4, "a slot holds acc");
static_assert(kInt4GemmRowGroup == kWarps * kInt4TileRows, "a row group is a block's tiles");
static_assert(kInt4GemmTraceWarps == kWarps && kInt4GemmMaxBlocksPerSm == 4 &&
                  kInt4GemmTraceStamps == 5,
              "the trace's shape");

// `kernel`'s dynamic shared memory (`smem` bytes) set, and the blocks an SM
// it then holds (1 to kInt4GemmMaxBlocksPerSm).
template <typename Kernel>
absl::StatusOr<int> KernelBlocksPerSm(Kernel kernel, size_t smem) {
  CUDA_RETURN_IF_ERROR(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  int blocks = 0;
  CUDA_RETURN_IF_ERROR(
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, kThreads, smem));
  return std::clamp(blocks, 1, kInt4GemmMaxBlocksPerSm);
}

// The clusters of each size Int4GemmClusterSize picks from (2, 4 and 8) that
// a cluster split's `kernel` can hold resident at once (0 for other sizes).
template <int NT, typename Kernel>
absl::StatusOr<std::array<int, kInt4GemmMaxCluster + 1>> ResidentClusters(Kernel kernel) {
  RETURN_IF_ERROR(KernelBlocksPerSm(kernel, kClusterSmemBytes<NT>).status());
  std::array<int, kInt4GemmMaxCluster + 1> count{};
  for (int g = 2; g <= kInt4GemmMaxCluster; g *= 2) {  // Int4GemmClusterSize's sizes
    cudaLaunchAttribute attr;
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = static_cast<unsigned>(g);
    attr.val.clusterDim.y = 1;
    attr.val.clusterDim.z = 1;
    cudaLaunchConfig_t config = {};
    config.blockDim = dim3(kThreads);
    config.gridDim = dim3(g);
    config.dynamicSmemBytes = kClusterSmemBytes<NT>;
    config.attrs = &attr;
    config.numAttrs = 1;
    CUDA_RETURN_IF_ERROR(cudaOccupancyMaxActiveClusters(&count[g], kernel, &config));
  }
  return count;
}

// A launch of NT row tiles: a cluster split in the params' clusters
// (Int4GemmParams::stream_cluster), or where the launch settings ask for one
// and the weight's row groups fill the grid in one wave of clusters
// (Int4GemmClusterSize, ResidentClusters), else stream-K's shares. With
// `plan` set, only what it would take (Int4GemmClusterPlan) into it, no
// launch.
template <int NT, Int4Offsets kKind, Norm kNorm, bool kTrace>
absl::Status Launch(const Args& a, cudaStream_t stream, Int4GemmClusterPlan* plan) {
  static const absl::StatusOr<int> per_sm =
      KernelBlocksPerSm(Int4GemmKernel<NT, kKind, kNorm, kTrace, false>, sizeof(Smem<NT>));
  RETURN_IF_ERROR(per_sm.status());
  const LaunchSettings settings = GetLaunchSettings();
  const int32_t asked = settings.int4_stream_blocks_per_sm;
  const int blocks_per_sm = asked > 0 ? std::min(asked, *per_sm) : *per_sm;
  const int64_t capacity = int64_t{NumSms()} * blocks_per_sm;
  Args b = a;
  b.tiles_per_span = TilesPerSpan(a.group, Cfg<NT>::kTpu);
  if constexpr (kClusterSplit<NT> && kNorm != Norm::kPrologue) {
    if (a.stream_cluster > 0 || settings.int4_cluster_split_k) {
      // (ResidentClusters also gives the cluster kernel its shared memory.)
      static const absl::StatusOr<std::array<int, kInt4GemmMaxCluster + 1>> resident =
          ResidentClusters<NT>(Int4GemmKernel<NT, kKind, kNorm, kTrace, true>);
      RETURN_IF_ERROR(resident.status());
      if (a.stream_cluster > 0) {
        b.cluster = a.stream_cluster;
      } else {
        const int32_t g = Int4GemmClusterSize(a.row_groups, a.k_tiles, capacity);
        if (g > 0 && (*resident)[g] >= a.row_groups) b.cluster = g;
      }
      if (plan != nullptr) {
        plan->row_groups = a.row_groups;
        plan->k_tiles = a.k_tiles;
        plan->capacity = capacity;
        plan->resident = *resident;
      }
    }
  }
  if (plan != nullptr) {
    plan->size = b.cluster;
    return absl::OkStatus();
  }
  if constexpr (kClusterSplit<NT> && kNorm != Norm::kPrologue) {
    if (b.cluster > 0) {
      CUDA_RETURN_IF_ERROR(cuda::LaunchPdlInClusters(Int4GemmKernel<NT, kKind, kNorm, kTrace, true>,
                                                     dim3(a.row_groups * b.cluster), dim3(kThreads),
                                                     kClusterSmemBytes<NT>, stream, b.cluster, b));
      return absl::OkStatus();
    }
  }
  const int64_t grid = std::min<int64_t>(a.iters, capacity);
  CUDA_RETURN_IF_ERROR(cuda::LaunchPdl(Int4GemmKernel<NT, kKind, kNorm, kTrace, false>,
                                       dim3(static_cast<int>(grid)), dim3(kThreads),
                                       sizeof(Smem<NT>), stream, b));
  return absl::OkStatus();
}

// One switch on the offset kind, then the rows (n8 tiles), the prologue and
// whether the launch is traced (a kernel of its own: the served one has no
// stamps).
template <Int4Offsets kKind, bool kTrace>
absl::Status LaunchRows(const Args& a, cudaStream_t stream, Int4GemmClusterPlan* plan) {
  const bool folded = a.fold_w != nullptr || a.x_sum_sq != nullptr;  // up to 16 rows
  if (a.rows > 32) return Launch<8, kKind, Norm::kApart, kTrace>(a, stream, plan);
  if (a.rows > 16) return Launch<4, kKind, Norm::kApart, kTrace>(a, stream, plan);
  if (a.rows > 8) {
    if (folded) return Launch<2, kKind, Norm::kFolded, kTrace>(a, stream, plan);
    return Launch<2, kKind, Norm::kApart, kTrace>(a, stream, plan);
  }
  if (a.norm_w != nullptr) return Launch<1, kKind, Norm::kPrologue, kTrace>(a, stream, plan);
  if (folded) return Launch<1, kKind, Norm::kFolded, kTrace>(a, stream, plan);
  return Launch<1, kKind, Norm::kApart, kTrace>(a, stream, plan);
}

// Launch (or, with plan, what it would take) for the kernel of a's
// offset kind, rows, prologue and trace.
absl::Status Dispatch(const Args& a, Int4Offsets kind, cudaStream_t stream,
                      Int4GemmClusterPlan* plan) {
  const bool trace = a.trace != nullptr;
  switch (kind) {
    case Int4Offsets::kSymmetric:
      return trace ? LaunchRows<Int4Offsets::kSymmetric, true>(a, stream, plan)
                   : LaunchRows<Int4Offsets::kSymmetric, false>(a, stream, plan);
    case Int4Offsets::kZero:
      return trace ? LaunchRows<Int4Offsets::kZero, true>(a, stream, plan)
                   : LaunchRows<Int4Offsets::kZero, false>(a, stream, plan);
    case Int4Offsets::kFloat:
      return trace ? LaunchRows<Int4Offsets::kFloat, true>(a, stream, plan)
                   : LaunchRows<Int4Offsets::kFloat, false>(a, stream, plan);
  }
  return absl::UnimplementedError("Int4Gemm: unknown offset kind");
}

// The kStream kernel's arguments for checked params p.
absl::StatusOr<Args> StreamArgs(const Int4GemmParams& p) {
  Args a{};
  static_cast<int4::LaunchArgs&>(a) = int4::MakeLaunchArgs(p);
  a.norm_w = p.prologue == GemvPrologue::kRmsNorm ? static_cast<const cuda::bf16*>(p.norm_weight)
                                                  : nullptr;
  a.eps = p.eps;
  a.fold_w = static_cast<const cuda::bf16*>(p.fold_norm.weight);
  a.fold_x = static_cast<cuda::bf16*>(p.fold_norm.x);
  a.fold_sum_sq = p.fold_norm.sum_sq;
  a.x_sum_sq = p.x_sum_sq;
  a.trace = p.trace;
  a.early_dependents = GetLaunchSettings().early_dependents;
  a.stream_cluster = p.stream_cluster;
  a.row_groups = static_cast<int32_t>(cuda::CeilDiv(a.n_tiles, int4_stream::kWarps));
  a.iters = int64_t{a.row_groups} * a.k_tiles;
  if (a.iters > std::numeric_limits<int32_t>::max()) {  // a share's walk counts in int32
    return absl::UnimplementedError(cuda::Cat("Int4Gemm: a weight of ", p.w.n, " x ", p.w.k,
                                              " holds over 2^31 tiles of 16 x 64 codes"));
  }
  return a;
}

}  // namespace int4_stream

namespace {

// kWgmma when asked for, or on kAuto where it is built and
// Int4GemmAutoWgmma takes it.
bool UsesWgmma(const Int4GemmParams& p) {
  if (p.path == Int4GemmPath::kWgmma) return true;
  if (p.path != Int4GemmPath::kAuto || !Int4GemmWgmmaBuilt()) return false;
  return Int4GemmAutoWgmma(p, GetLaunchSettings(), int4_stream::NumSms());
}

}  // namespace

absl::Status Int4Gemm(const Int4GemmParams& p, cudaStream_t stream) {
  RETURN_IF_ERROR(CheckInt4GemmParams(p, "Int4Gemm"));
  const Int4GemmWorkspaceLayout ws = Int4GemmWorkspace(p.w.n, int4_stream::NumSms());
  if (p.workspace == nullptr || p.workspace_bytes < ws.total_bytes) {
    return absl::InvalidArgumentError(cuda::Cat("Int4Gemm: workspace of ", p.workspace_bytes,
                                                " bytes; n = ", p.w.n, " needs ", ws.total_bytes,
                                                " (Int4GemmWorkspaceBytes)"));
  }
  if (Int4GemmUsesGemv(p, GetLaunchSettings())) {
    return LaunchInt4GemmGemv(p, int4_stream::NumSms(), stream);
  }
  if (UsesWgmma(p)) return LaunchInt4GemmWgmma(p, int4_stream::NumSms(), stream);
  if (Int4GemmUsesTiled(p)) return LaunchInt4GemmTiled(p, int4_stream::NumSms(), stream);
  ASSIGN_OR_RETURN(const int4_stream::Args a, int4_stream::StreamArgs(p));
  return int4_stream::Dispatch(a, p.w.offset_kind, stream, nullptr);
}

absl::StatusOr<Int4GemmClusterPlan> Int4GemmClusterSplit(const Int4GemmParams& p) {
  RETURN_IF_ERROR(CheckInt4GemmParams(p, "Int4GemmClusterSplit"));
  Int4GemmClusterPlan plan;
  if (Int4GemmUsesGemv(p, GetLaunchSettings()) || UsesWgmma(p) || Int4GemmUsesTiled(p)) {
    return plan;
  }
  ASSIGN_OR_RETURN(const int4_stream::Args a, int4_stream::StreamArgs(p));
  RETURN_IF_ERROR(int4_stream::Dispatch(a, p.w.offset_kind, nullptr, &plan));
  return plan;
}

}  // namespace onecard::engine
