// Int4Gemm's kWgmma kernel (int4_gemm_wgmma.cu, which alone includes this):
// a block's pieces (its shapes Cfg, the launch arguments, its Place in the
// grid with the stream-K walk of its share, the producer, a stage's A
// fragments and wgmmas, the epilogues and the split-K finishes); the
// consumer loops, the kernel and its launches are the .cu's. The design:
// int4_gemm_wgmma.cu's head.
#ifndef ONECARD_ENGINE_KERNELS_INT4_GEMM_WGMMA_CUH_
#define ONECARD_ENGINE_KERNELS_INT4_GEMM_WGMMA_CUH_

#include <cuda.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "engine/kernels/cuda_common.cuh"
#include "engine/kernels/cuda_pipeline.cuh"
#include "engine/kernels/cuda_ptx.cuh"
#include "engine/kernels/cuda_wgmma.cuh"
#include "engine/kernels/int4_codes.cuh"
#include "engine/kernels/int4_gemm.h"

namespace onecard::engine::int4_wgmma {

using int4::Dequant128;
using int4::HalfPair;
using int4::kMagic136;
using int4::SubBf16x2;
using int4::YKind;

constexpr int kConsumers = 256;             // two warpgroups
constexpr int kThreads = kConsumers + 128;  // and the producer's
// Registers a thread: the launch gives every warp kLaunchRegs (64K / 384
// threads, in steps of 8); setmaxnreg then moves the producer warpgroup's
// surplus to the consumers through the block's own pool, and an inc waits
// until the pool holds what it asks, so the two shares fill the launch's
// allocation exactly (the producer's 56 keep its cluster variants from
// spilling; the consumers need no more than 224).
constexpr int kLaunchRegs = 65536 / kThreads / 8 * 8;
constexpr int kProducerRegs = 56;
constexpr int kConsumerRegs = 224;
static_assert(kProducerRegs * 128 + kConsumerRegs * kConsumers <= kLaunchRegs * kThreads,
              "setmaxnreg.inc would wait forever for registers the block does not hold");
constexpr int kStageTiles = 2;  // k tiles a stage
static_assert(kStageTiles * kInt4TileCols == kInt4WgmmaStageCols);
constexpr int kSteps = kStageTiles * kInt4TileCols / 16;  // k16 steps a stage
constexpr int kCodeBytes = kStageTiles * 8 * kInt4TileBytes;
constexpr int kScaleBytes = 8 * 8 * 4;  // a group's words of a row group

template <int kN>
struct Cfg {
  static constexpr int kStages = kN == 128 ? 4 : kN == 64 ? 6 : 8;
  static constexpr int kPanelBytes = kN * 128;  // kN rows of one k tile
  static constexpr int kXBytes = kStageTiles * kPanelBytes;
  // x first (1024-byte aligned for the swizzle), then codes, scales, zero
  // points, the full and empty barriers; 1 KB of slack for the alignment.
  static constexpr int kCodesAt = kStages * kXBytes;
  static constexpr int kScalesAt = kCodesAt + kStages * kCodeBytes;
  static constexpr int kOffsetsAt = kScalesAt + kStages * kScaleBytes;
  static constexpr int kBarsAt = kOffsetsAt + kStages * kScaleBytes;
  static constexpr int kSmemBytes = 1024 + kBarsAt + 2 * kStages * 8;
  static constexpr int kSlotFloats = kConsumers * kN / 2;  // a block's sums
};
static_assert(Cfg<128>::kSlotFloats * 4 == 128 * 512, "Int4GemmWgmmaSplits' slots");

struct Args : int4::LaunchArgs {
  CUtensorMap x_map;    // x [rows, k] bf16, boxes of 64 columns x kN rows, 128-byte swizzle
  int32_t m_blocks;     // output tiles along x
  int32_t splits;       // blocks an output tile
  int32_t split_tiles;  // k tiles a split (a multiple of kStageTiles)
  // Stream-K (Int4GemmWgmmaStreamKBlocks; 0: a block a tile or split): the
  // grid's blocks, each a share of the tiles x k_stages iterations.
  int32_t sk_blocks;
  int32_t k_stages;  // stages a tile
  int32_t sk_iters;  // tiles x k_stages
};

// p (+)= a x (x's k16 step at desc): m64nNk16 with N = kN.
template <int kN>
__device__ __forceinline__ void Wgmma(float (&p)[kN / 2], const uint32_t (&a)[4], uint64_t desc,
                                      bool accumulate) {
  if constexpr (kN == 128) {
    cuda::WgmmaM64N128K16<false, 0>(p, a, desc, accumulate);
  } else if constexpr (kN == 64) {
    cuda::WgmmaM64N64K16<false, 0>(p, a, desc, accumulate);
  } else if constexpr (kN == 32) {
    cuda::WgmmaM64N32K16<false, 0>(p, a, desc, accumulate);
  } else {
    cuda::WgmmaM64N16K16<false, 0>(p, a, desc, accumulate);
  }
}

// Words 0..3 of a tile for lane 4 gr + t4 in column order
// (Int4ColumnOrderWord): lo, hi the tile's pieces of lanes 4 gr + t4 / 2 and
// 4 gr + 2 + t4 / 2.
__device__ __forceinline__ void ColumnOrder(const uint4& lo, const uint4& hi, int t4,
                                            uint32_t* out) {
  out[0] = Int4ColumnOrderWord(lo.x, hi.x, t4);
  out[1] = Int4ColumnOrderWord(lo.y, hi.y, t4);
  out[2] = Int4ColumnOrderWord(lo.z, hi.z, t4);
  out[3] = Int4ColumnOrderWord(lo.w, hi.w, t4);
}

// Writes the warp's outputs from its sums v: row tile rt of row group rg,
// x rows xrow0 + 8 j + 2 t4 + {0, 1}. A kBf16Add epilogue reads every value
// of y it adds to before its first store: y's loads and stores may alias,
// so loads between the stores would each wait for an L2 round trip in turn
// (kN / 2 of them a thread).
template <int kN>
__device__ __forceinline__ void Epilogue(const Args& a, int32_t rg, int32_t rt, int32_t xrow0,
                                         const float (&v)[kN / 2]) {
  const int lane = threadIdx.x & 31, gr = lane >> 2, t4 = lane & 3;
  const int64_t tile = int64_t{rg} * 8 + rt;
  auto out = [&](int j, int e, int half) {
    return int64_t{xrow0 + 8 * j + 2 * t4 + e} * a.n + tile * 16 + gr + 8 * half;
  };
  if (a.y_kind == YKind::kBf16Add) {
    cuda::bf16* y = static_cast<cuda::bf16*>(a.y);
    float residual[kN / 2];
#pragma unroll
    for (int j = 0; j < kN / 8; ++j) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int e = i & 1, half = i >> 1;
        residual[4 * j + i] =
            xrow0 + 8 * j + 2 * t4 + e < a.rows ? __bfloat162float(y[out(j, e, half)]) : 0.0f;
      }
    }
#pragma unroll
    for (int j = 0; j < kN / 8; ++j) {
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int e = i & 1, half = i >> 1;
        if (xrow0 + 8 * j + 2 * t4 + e >= a.rows) continue;
        y[out(j, e, half)] =
            __float2bfloat16_rn(cuda::RoundTo<cuda::bf16>(v[4 * j + i]) + residual[4 * j + i]);
      }
    }
    return;
  }
#pragma unroll
  for (int j = 0; j < kN / 8; ++j) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int32_t m = xrow0 + 8 * j + 2 * t4 + e;
      if (m >= a.rows) continue;
      if (a.y_kind == YKind::kSiluMul) {
        int4::StoreSiluMul(a, m, tile * 8 + gr, v[4 * j + e], v[4 * j + e + 2]);
        continue;
      }
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        int4::StoreY(a, out(j, e, half), v[4 * j + e + 2 * half]);
      }
    }
  }
}

// A block's place: its output tile (row group rg against x rows m0 ..
// m0 + kN - 1), its split's k tiles, and its stage buffers. Blocks of a
// cluster of kG share the x rows and the split and take kG consecutive row
// groups, the cluster's rank r the (r + 1)-th: grid index
// ((rg / kG * m_blocks + mb) * splits + split) * kG + rg % kG. Under
// stream-K (clusters of 1) a place is a segment of the block's share, its
// part of one tile: stages [kt_begin / kStageTiles, + stages) from the
// share's iteration `it`; the block's stage buffers turn over across its
// segments, a segment's stage s being the block's (j0 + s)-th. Every field
// follows from `it` (Place(a, smem, it)), so a loop over the segments
// carries only that.
template <int kN, int kG, bool kShares = false>
struct Place {
  using C = Cfg<kN>;
  int32_t rank, split, rg, m0, out_tile, g, kt_begin, stages, j0, it;
  unsigned char* smem;
  uint64_t* full;   // a stage landed: the producer's arrival and the bytes
  uint64_t* empty;  // a stage released by every consumer warp of the cluster

  // The block's place, under stream-K its share's first segment.
  __device__ __forceinline__ Place(const Args& a, unsigned char* aligned_smem)
      : Place(a, aligned_smem,
              kShares ? Int4WgmmaShareStart(blockIdx.x, a.sk_blocks, a.sk_iters) : 0) {}

  // Stream-K: the segment of the block's share that starts at iteration it.
  __device__ __forceinline__ Place(const Args& a, unsigned char* aligned_smem, int32_t it_)
      : it(it_) {
    smem = aligned_smem;
    full = reinterpret_cast<uint64_t*>(smem + C::kBarsAt);
    empty = full + C::kStages;
    rank = static_cast<int32_t>(blockIdx.x % kG);
    if constexpr (kShares) {
      static_assert(kG == 1, "stream-K shares in clusters of 1");
      const int32_t b = static_cast<int32_t>(blockIdx.x);
      out_tile = it / a.k_stages;
      const int32_t s0 = it - out_tile * a.k_stages;
      stages = min(a.k_stages - s0, ShareEnd(a) - it);
      j0 = it - Int4WgmmaShareStart(b, a.sk_blocks, a.sk_iters);
      split = 0;
      rg = out_tile / a.m_blocks;
      m0 = (out_tile % a.m_blocks) * kN;
      g = min(a.n_tiles - rg * 8, 8);
      kt_begin = s0 * kStageTiles;
      return;
    }
    j0 = 0;
    int32_t rest = static_cast<int32_t>(blockIdx.x / kG);
    split = rest % a.splits;
    rest /= a.splits;
    const int32_t mb = rest % a.m_blocks;
    rg = rest / a.m_blocks * kG + rank;
    m0 = mb * kN;
    out_tile = rg * a.m_blocks + mb;
    g = min(a.n_tiles - rg * 8, 8);
    kt_begin = split * a.split_tiles;
    stages = (min(a.k_tiles, kt_begin + a.split_tiles) - kt_begin) / kStageTiles;
  }

  // Stream-K: the end of the block's share, and the start of the segment
  // after this one (the share's end where this one is its last).
  __device__ __forceinline__ int32_t ShareEnd(const Args& a) const {
    return Int4WgmmaShareStart(static_cast<int32_t>(blockIdx.x) + 1, a.sk_blocks, a.sk_iters);
  }
  __device__ __forceinline__ int32_t NextIt() const { return it + stages; }
};

// The producer (one lane): each stage's codes, scales (and zero points) by
// bulk copies, x by TMA, its kG-th of x's rows multicast to the cluster; the
// first stages' weights before griddepcontrol.wait; under stream-K the
// share's segments one after another through the same buffers.
template <int kN, Int4Offsets kKind, int kG, bool kShares>
__device__ __forceinline__ void Produce(const Args& a, Place<kN, kG, kShares> pl) {
  using C = Cfg<kN>;
  constexpr int S = C::kStages;
  constexpr int kSliceRows = kN / kG;
  auto weights = [&](int32_t s) {
    const int b = (pl.j0 + s) % S;
    const int32_t kt = pl.kt_begin + kStageTiles * s;
    const int32_t stage_bytes = C::kXBytes + pl.g * kStageTiles * kInt4TileBytes +
                                pl.g * 32 * (kKind == Int4Offsets::kSymmetric ? 1 : 2);
    const unsigned char* codes = reinterpret_cast<const unsigned char*>(a.codes) +
                                 int64_t{pl.rg} * 8 * a.k_tiles * kInt4TileBytes;
    cuda::MbarrierArriveExpectTx(&pl.full[b], stage_bytes);
    cuda::BulkCopy(pl.smem + C::kCodesAt + b * kCodeBytes,
                   codes + int64_t{kt} * pl.g * kInt4TileBytes, pl.g * kStageTiles * kInt4TileBytes,
                   &pl.full[b]);
    const int64_t word =
        (int64_t{pl.rg} * 8 * a.num_groups + int64_t{kt * kInt4TileCols / a.group} * pl.g) * 8;
    cuda::BulkCopy(pl.smem + C::kScalesAt + b * kScaleBytes, a.scales + word, pl.g * 32,
                   &pl.full[b]);
    if constexpr (kKind != Int4Offsets::kSymmetric) {
      cuda::BulkCopy(pl.smem + C::kOffsetsAt + b * kScaleBytes, a.offsets + word, pl.g * 32,
                     &pl.full[b]);
    }
  };
  auto x = [&](int32_t s) {
    const int b = (pl.j0 + s) % S;
    const int32_t col = (pl.kt_begin + kStageTiles * s) * kInt4TileCols;
    for (int t = 0; t < kStageTiles; ++t) {
      unsigned char* dst = pl.smem + b * C::kXBytes + t * C::kPanelBytes;
      if constexpr (kG == 1) {
        cuda::TensorCopy2d(dst, &a.x_map, col + t * kInt4TileCols, pl.m0, &pl.full[b]);
      } else {
        cuda::TensorCopy2dMulticast(dst + pl.rank * (C::kPanelBytes / kG), &a.x_map,
                                    col + t * kInt4TileCols, pl.m0 + pl.rank * kSliceRows,
                                    &pl.full[b], static_cast<uint16_t>((1 << kG) - 1));
      }
    }
  };
  // The stages after the first buffers' fill, from stage `from` of the
  // segment: each once its buffer's previous stage is released.
  auto rest = [&](int32_t from) {
    for (int32_t s = from; s < pl.stages; ++s) {
      const int32_t j = pl.j0 + s;
      if (j >= S) cuda::MbarrierWait(&pl.empty[j % S], ((j / S) - 1) & 1);
      weights(s);
      x(s);
    }
  };
  const int32_t first = min(pl.stages, S);
  for (int32_t s = 0; s < first; ++s) weights(s);
  cuda::GridDependencyWait();
  cuda::LaunchDependents();
  for (int32_t s = 0; s < first; ++s) x(s);
  rest(first);
  if constexpr (kShares) {
    for (int32_t it = pl.NextIt(); it < pl.ShareEnd(a); it = pl.NextIt()) {
      pl = Place<kN, kG, kShares>(a, pl.smem, it);
      rest(0);
    }
  }
}

// Stage b's A fragments for row tile rtc (in av; zero points into sub) and
// its scales (rows gr and gr + 8 of the tile).
template <int kN, Int4Offsets kKind>
__device__ __forceinline__ uint32_t StageFragments(const unsigned char* smem, int b, int32_t g,
                                                   int32_t rtc, uint32_t (&sub)[2],
                                                   uint32_t (&av)[kSteps][4]) {
  using C = Cfg<kN>;
  const int lane = threadIdx.x & 31, gr = lane >> 2, t4 = lane & 3;
  const int src_lo = 4 * gr + t4 / 2;  // ColumnOrder's lo lane (hi: + 2)
  const uint4* codes = reinterpret_cast<const uint4*>(smem + C::kCodesAt + b * kCodeBytes);
  uint32_t words[kSteps];
#pragma unroll
  for (int t = 0; t < kStageTiles; ++t) {
    const uint4* tile = codes + (t * g + rtc) * 32;
    ColumnOrder(tile[src_lo], tile[src_lo + 2], t4, &words[4 * t]);
  }
  const uint32_t scale =
      reinterpret_cast<const uint32_t*>(smem + C::kScalesAt + b * kScaleBytes)[rtc * 8 + gr];
  if constexpr (kKind == Int4Offsets::kZero) {
    const uint32_t z =
        reinterpret_cast<const uint32_t*>(smem + C::kOffsetsAt + b * kScaleBytes)[rtc * 8 + gr];
    sub[0] = int4::ZeroPair(z & 0xFFFF);
    sub[1] = int4::ZeroPair(z >> 16);
  }
#pragma unroll
  for (int j = 0; j < kSteps; ++j) {
#pragma unroll
    for (int m = 0; m < 4; ++m) av[j][m] = SubBf16x2(Dequant128(words[j], m), sub[m % 2]);
  }
  return scale;
}

// The warpgroup's 8 wgmmas of stage b into p (the first overwrites p when
// `fresh`), committed as one group.
template <int kN>
__device__ __forceinline__ void IssueStage(float (&p)[kN / 2], uint32_t (&av)[kSteps][4],
                                           uint32_t x_stage, bool fresh) {
  using C = Cfg<kN>;
  cuda::KeepOperands(av);
  cuda::KeepOperands(p);
  cuda::WgmmaFence();
#pragma unroll
  for (int j = 0; j < kSteps; ++j) {
    const uint32_t at = x_stage + (j / 4) * C::kPanelBytes + (j % 4) * 32;
    Wgmma<kN>(p, av[j], cuda::SmemDescriptor128B(at, 16, 1024), !(fresh && j == 0));
  }
  cuda::WgmmaCommit();
}

// acc += s p, s the scales of rows gr (p[i], i & 2 == 0) and gr + 8.
template <int kN>
__device__ __forceinline__ void Fold(float (&acc)[kN / 2], const float (&p)[kN / 2],
                                     uint32_t scale) {
  const float2 sc = HalfPair(scale);
#pragma unroll
  for (int i = 0; i < kN / 2; ++i) acc[i] = fmaf((i & 2) ? sc.y : sc.x, p[i], acc[i]);
}

// The end of a consumer warp's work on a tile: y from acc, or its part of
// the tile (its split's, or under stream-K its segment's) in a slot, the
// last part to arrive summing the slots in k order and writing y.
template <int kN, int kG, bool kShares>
__device__ __forceinline__ void Finish(const Args& a, const Place<kN, kG, kShares>& pl,
                                       const float (&acc)[kN / 2], int* last_block) {
  using C = Cfg<kN>;
  const int32_t rt = threadIdx.x >> 5;  // the warp's row tile
  // The tile's parts: its splits, or the blocks first .. first + parts - 1
  // whose shares hold its stages; this block's is part `self`.
  int32_t parts = a.splits, first = 0, self = pl.split;
  if constexpr (kShares) {
    const int32_t it = pl.out_tile * a.k_stages;
    first = Int4WgmmaShareBlock(it, a.sk_blocks, a.sk_iters);
    parts = Int4WgmmaShareBlock(it + a.k_stages - 1, a.sk_blocks, a.sk_iters) - first + 1;
    self = static_cast<int32_t>(blockIdx.x) - first;
  }
  if (parts == 1) {
    if (rt < pl.g) Epilogue<kN>(a, pl.rg, rt, pl.m0, acc);
    return;
  }
  // A split's slot: the tile's splits in turn; a stream-K part's: one of
  // its block's two, the first for the tile its share starts in.
  auto slot = [&](int32_t part) {
    int64_t index = int64_t{pl.out_tile} * a.splits + part;
    if constexpr (kShares) {
      const int32_t b = first + part;
      const bool starts =
          Int4WgmmaShareStart(b, a.sk_blocks, a.sk_iters) / a.k_stages == pl.out_tile;
      index = 2 * int64_t{b} + (starts ? 0 : 1);
    }
    return reinterpret_cast<float4*>(a.partials + index * C::kSlotFloats) + threadIdx.x * (kN / 8);
  };
  float4* own = slot(self);
#pragma unroll
  for (int j = 0; j < kN / 8; ++j) {
    __stcg(own + j, make_float4(acc[4 * j], acc[4 * j + 1], acc[4 * j + 2], acc[4 * j + 3]));
  }
  // The barrier orders every consumer's stores before thread 0's release
  // (cumulative); the second, thread 0's acquire before everyone's loads.
  cuda::NamedBarrier(1, kConsumers);
  int32_t* counter = a.counters_end - 1 - pl.out_tile;
  if (threadIdx.x == 0) *last_block = cuda::AtomicAddAcqRelGpu(counter, 1) == parts - 1;
  cuda::NamedBarrier(1, kConsumers);
  if (!*last_block) return;
  float sum[kN / 2] = {};
  for (int32_t part = 0; part < parts; ++part) {
    const float4* in = slot(part);
#pragma unroll
    for (int j = 0; j < kN / 8; ++j) {
      const float4 v = __ldcg(in + j);
      sum[4 * j] += v.x, sum[4 * j + 1] += v.y, sum[4 * j + 2] += v.z, sum[4 * j + 3] += v.w;
    }
  }
  if (rt < pl.g) Epilogue<kN>(a, pl.rg, rt, pl.m0, sum);
  if (threadIdx.x == 0) *counter = 0;
}

// Whether stage s of the block's split opens a group (its sums start
// fresh) and closes one (they are scaled into the output's).
struct StageEnds {
  bool opens, closes;
};
template <int kN, int kG>
__device__ __forceinline__ StageEnds Ends(const Args& a, const Place<kN, kG>& pl, int32_t s) {
  const int32_t col = (pl.kt_begin + kStageTiles * s) * kInt4TileCols;
  return {.opens = s == 0 || col % a.group == 0,
          .closes = s == pl.stages - 1 || (col + kStageTiles * kInt4TileCols) % a.group == 0};
}

// Stage b released by the warp: one arrival on its empty barrier in every
// block of the cluster.
template <int kN, int kG, bool kShares>
__device__ __forceinline__ void Release(const Place<kN, kG, kShares>& pl, int b) {
  const int lane = threadIdx.x & 31;
  __syncwarp();
  if constexpr (kG == 1) {
    if (lane == 0) cuda::MbarrierArrive(&pl.empty[b]);
  } else {
    if (lane < kG) cuda::MbarrierArriveCluster(&pl.empty[b], lane);
  }
}

}  // namespace onecard::engine::int4_wgmma

#endif  // ONECARD_ENGINE_KERNELS_INT4_GEMM_WGMMA_CUH_
