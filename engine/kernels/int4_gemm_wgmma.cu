// Int4Gemm's kWgmma kernel (see int4_gemm.h; the layout in int4_layout.h):
// the middle steps on Hopper's warpgroup MMA, for the tensor-core rate that
// kTiled's mma.sync does not reach. Design:
// - A block computes one output tile: a row group of W (8 row tiles, 128 rows)
//   against kN = 16, 32, 64 or 128 rows of x. Two consumer warpgroups take 64
//   W rows each; warp w of warpgroup h owns row tile 4 h + w, whose code words
//   are, lane by lane, the A fragments of wgmma m64nNk16 (the register layout
//   of mma.m16n8k16's A, cuda_wgmma.cuh) once regathered to column order
//   (Int4ColumnOrderWord: two 16-byte loads and a byte_perm a word). x is
//   wgmma's B operand from shared memory (K-major, 128-byte swizzle).
// - Exact arithmetic, as the other kernels' (ConsumeScaled apart, below): a
//   code word's nibbles | 0x4300 are the bf16 values 128 + q, minus 128 + z
//   (136 symmetric) the exact q - z; the wgmmas sum p = sum (q - z) x over a
//   group in fp32 and acc += s p once a group. So groups are whole stages:
//   group % 128 == 0, k % 128 == 0, and no mins (kFloat stays on kTiled).
// - Stages of 128 columns (two k tiles), kStages deep, on mbarriers: one lane
//   of a producer warpgroup (its registers given to the consumers by
//   setmaxnreg) brings a stage's codes (one bulk copy: the row group's two k
//   tiles are contiguous), its group's scales (and zero points), and x by two
//   TMA tensor copies (64 columns x kN rows each, the 128-byte swizzle wgmma
//   reads; rows past `rows` arrive as zeros). The weights of the first stages
//   are requested before griddepcontrol.wait.
// - A warpgroup waits for its stage, dequantizes its 8 k16 A fragments,
//   issues 8 wgmmas and waits for them, releases the stage (one arrival a
//   warp), then applies the scale where a group ends. The two warpgroups
//   run unsynchronized, so one's dequantization and scaling overlap the
//   other's wgmmas. With LaunchSettings::int4_wgmma_overlap (clusters of 1)
//   a warpgroup also dequantizes stage s while its own wgmmas of stage s - 1
//   run (ConsumeOverlap: two stages' fragments in registers; in source
//   order: ptxas may schedule the wait for s - 1 ahead of much of the
//   dequantization); with
//   LaunchSettings::int4_wgmma_double_sums as well (tiles of up to 64 x
//   rows, groups of 128 columns: a stage each) it issues stage s's wgmmas
//   into a second set of sums right after stage s - 1's finish and scales
//   those while they run (ConsumeDoubleSums). With
//   LaunchSettings::int4_wgmma_scaled_from_rows (128: served), tiles of that
//   many x rows and more take the scale into the fragments instead, s (q - z)
//   in bf16 (s rounded to bf16, then the product: within 2^-8 of the exact
//   weight), and sum every stage straight into the outputs (ConsumeScaled).
// - Blocks in thread block clusters of kG (1, 2 or 4) along W's row groups:
//   the cluster's blocks share x's stages, each copying kN / kG of the rows
//   into all of them (TMA multicast), and a stage is refilled once every
//   consumer warp of the cluster has released it (remote mbarrier arrivals).
// - Split-K while the output tiles alone would leave SMs idle, as kTiled:
//   slots in the workspace, the last block of a tile sums them in split
//   order and writes y.
// - The epilogue stages the tile's sums in the freed stage buffers and
//   writes y in 16-byte chunks (int4_gemm_wgmma_epilogue.cuh).
// Compiled where every target has wgmma (ONECARD_CUDA_SM90A).
// Tested by tests/gpu/int4_gemm_test.cc against Int4GemmRef.
#include "engine/kernels/int4_gemm_internal.h"

#if ONECARD_CUDA_SM90A
#include <cuda_fp16.h>

#include <algorithm>
#include <limits>
#include <type_traits>

#include "engine/kernels/cuda_check.h"
#include "engine/kernels/cuda_common.cuh"
#include "engine/kernels/cuda_pipeline.cuh"
#include "engine/kernels/cuda_ptx.cuh"
#include "engine/kernels/cuda_tensor_map.h"
#include "engine/kernels/cuda_wgmma.cuh"
#include "engine/kernels/int4_codes.cuh"
#include "engine/kernels/int4_gemm_wgmma_epilogue.cuh"
#include "engine/kernels/launch_settings.h"
#endif

namespace onecard::engine {

#if ONECARD_CUDA_SM90A
namespace {

using int4::Dequant128;
using int4::HalfPair;
using int4::kMagic136;
using int4::MulBf16x2;
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
  CUtensorMap x_map;      // x [rows, k] bf16, boxes of 64 columns x kN rows, 128-byte swizzle
  int32_t m_blocks;       // output tiles along x
  int32_t splits;         // blocks an output tile
  int32_t split_tiles;    // k tiles a split (a multiple of kStageTiles)
  bool staged_epilogue;   // LaunchSettings::int4_wgmma_staged_epilogue
  bool early_dependents;  // LaunchSettings::int4_wgmma_early_dependents
  // Int4GemmWgmmaTail: tiles from tail_from on in tail_parts parts of
  // tail_split_tiles k tiles (tail_from past the tiles: none).
  int32_t tail_from, tail_parts, tail_split_tiles;
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

// A block's place: its output tile (row group rg against x rows m0 ..
// m0 + kN - 1), its split's k tiles, and its stage buffers. Blocks of a
// cluster of kG share the x rows and the split and take kG consecutive row
// groups, the cluster's rank r the (r + 1)-th: grid index
// ((rg / kG * m_blocks + mb) * splits + split) * kG + rg % kG; with a last
// wave in parts (Args::tail_from, clusters of 1), tile t >= tail_from's
// part p at tail_from + (t - tail_from) tail_parts + p.
template <int kN, int kG>
struct Place {
  using C = Cfg<kN>;
  int32_t rank, split, rg, m0, out_tile, g, kt_begin, stages;
  int32_t splits, slot0;  // its tile's parts, and the first one's partial-sum slot
  unsigned char* smem;
  uint64_t* full;   // a stage landed: the producer's arrival and the bytes
  uint64_t* empty;  // a stage released by every consumer warp of the cluster

  __device__ __forceinline__ Place(const Args& a, unsigned char* aligned_smem) {
    rank = static_cast<int32_t>(blockIdx.x % kG);
    int32_t rest = static_cast<int32_t>(blockIdx.x / kG);
    const bool tail = kG == 1 && rest >= a.tail_from;  // a part of a last-wave tile
    splits = tail ? a.tail_parts : a.splits;
    const int32_t split_tiles = tail ? a.tail_split_tiles : a.split_tiles;
    if (tail) rest -= a.tail_from;
    split = rest % splits;
    rest = rest / splits + (tail ? a.tail_from : 0);
    const int32_t mb = rest % a.m_blocks;
    rg = rest / a.m_blocks * kG + rank;
    m0 = mb * kN;
    out_tile = rg * a.m_blocks + mb;
    slot0 = tail ? (out_tile - a.tail_from) * splits : out_tile * splits;
    g = min(a.n_tiles - rg * 8, 8);
    kt_begin = split * split_tiles;
    stages = (min(a.k_tiles, kt_begin + split_tiles) - kt_begin) / kStageTiles;
    smem = aligned_smem;
    full = reinterpret_cast<uint64_t*>(smem + C::kBarsAt);
    empty = full + C::kStages;
  }
};

// The producer (one lane): each stage's codes, scales (and zero points) by
// bulk copies, x by TMA, its kG-th of x's rows multicast to the cluster; the
// first stages' weights before griddepcontrol.wait (the next kernel let
// launch before or after it: Args::early_dependents).
template <int kN, Int4Offsets kKind, int kG>
__device__ __forceinline__ void Produce(const Args& a, const Place<kN, kG>& pl) {
  using C = Cfg<kN>;
  constexpr int S = C::kStages;
  constexpr int kSliceRows = kN / kG;
  const int32_t stage_bytes = C::kXBytes + pl.g * kStageTiles * kInt4TileBytes +
                              pl.g * 32 * (kKind == Int4Offsets::kSymmetric ? 1 : 2);
  const unsigned char* codes = reinterpret_cast<const unsigned char*>(a.codes) +
                               int64_t{pl.rg} * 8 * a.k_tiles * kInt4TileBytes;
  auto weights = [&](int32_t s) {
    const int b = s % S;
    const int32_t kt = pl.kt_begin + kStageTiles * s;
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
    const int b = s % S;
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
  const int32_t first = min(pl.stages, S);
  for (int32_t s = 0; s < first; ++s) weights(s);
  cuda::PdlEnter(a.early_dependents);  // x and y come from the previous kernel
  for (int32_t s = 0; s < first; ++s) x(s);
  for (int32_t s = S; s < pl.stages; ++s) {
    cuda::MbarrierWait(&pl.empty[s % S], ((s / S) - 1) & 1);
    weights(s);
    x(s);
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

// Writes the block's outputs from its sums v (every consumer thread calls
// it): StagedEpilogue (int4_gemm_wgmma_epilogue.cuh) in the stage buffers,
// or DirectEpilogue (Args::staged_epilogue false, the comparison arm).
template <int kN, int kG>
__device__ __forceinline__ void Epilogue(const Args& a, const Place<kN, kG>& pl,
                                         const float (&v)[kN / 2]) {
  static_assert(int4_wgmma::kEpilogueBytes<kN> <= Cfg<kN>::kStages * Cfg<kN>::kXBytes,
                "the epilogue's tile fits the x stages");
  if (!a.staged_epilogue) {
    const int32_t rt = threadIdx.x >> 5;  // the warp's row tile
    if (rt < pl.g) int4_wgmma::DirectEpilogue<kN>(a, pl.rg, rt, pl.m0, v);
    return;
  }
  int4_wgmma::StagedEpilogue<kN>(a, pl.smem, pl.rg, pl.g, pl.m0, v);
}

// The end of a consumer warp's work: y from acc, or its split's part.
template <int kN, int kG>
__device__ __forceinline__ void Finish(const Args& a, const Place<kN, kG>& pl,
                                       const float (&acc)[kN / 2], int* last_block) {
  using C = Cfg<kN>;
  if (pl.splits == 1) {
    Epilogue<kN>(a, pl, acc);
    return;
  }
  // Split-K: this block's sums to its slot; the last of the tile's blocks
  // sums the slots in split order and writes y.
  auto slot = [&](int32_t sp) {
    return reinterpret_cast<float4*>(a.partials + (int64_t{pl.slot0} + sp) * C::kSlotFloats) +
           threadIdx.x * (kN / 8);
  };
#pragma unroll
  for (int j = 0; j < kN / 8; ++j) {
    __stcg(slot(pl.split) + j,
           make_float4(acc[4 * j], acc[4 * j + 1], acc[4 * j + 2], acc[4 * j + 3]));
  }
  // The barrier orders every consumer's stores before thread 0's release
  // (cumulative); the second, thread 0's acquire before everyone's loads.
  cuda::NamedBarrier(1, kConsumers);
  int32_t* counter = a.counters_end - 1 - pl.out_tile;
  if (threadIdx.x == 0) *last_block = cuda::AtomicAddAcqRelGpu(counter, 1) == pl.splits - 1;
  cuda::NamedBarrier(1, kConsumers);
  if (!*last_block) return;
  float sum[kN / 2] = {};
  for (int32_t sp = 0; sp < pl.splits; ++sp) {
#pragma unroll
    for (int j = 0; j < kN / 8; ++j) {
      const float4 v = __ldcg(slot(sp) + j);
      sum[4 * j] += v.x, sum[4 * j + 1] += v.y, sum[4 * j + 2] += v.z, sum[4 * j + 3] += v.w;
    }
  }
  Epilogue<kN>(a, pl, sum);
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
template <int kN, int kG>
__device__ __forceinline__ void Release(const Place<kN, kG>& pl, int b) {
  const int lane = threadIdx.x & 31;
  __syncwarp();
  if constexpr (kG == 1) {
    if (lane == 0) cuda::MbarrierArrive(&pl.empty[b]);
  } else {
    if (lane < kG) cuda::MbarrierArriveCluster(&pl.empty[b], lane);
  }
}

// A consumer warp: row tile `warp` of the row group (warpgroup h = warp / 4
// takes rows 64 h .. 64 h + 63 of its wgmmas), every stage, then Finish.
// Each stage waits for its own wgmmas: the fp32 sums p run over a group and
// are scaled where it closes.
template <int kN, Int4Offsets kKind, int kG>
__device__ __forceinline__ void Consume(const Args& a, const Place<kN, kG>& pl, int* last_block) {
  using C = Cfg<kN>;
  constexpr int S = C::kStages;
  const int32_t rtc = min(threadIdx.x >> 5, pl.g - 1);  // warps past the group's end: a loaded tile
  const uint32_t x_base = cuda::SmemAddr(pl.smem);
  float acc[kN / 2] = {}, p[kN / 2] = {};
  uint32_t sub[2] = {kMagic136, kMagic136};
  for (int32_t s = 0; s < pl.stages; ++s) {
    const int b = s % S;
    const StageEnds ends = Ends(a, pl, s);
    cuda::MbarrierWait(&pl.full[b], (s / S) & 1);
    uint32_t av[kSteps][4];
    const uint32_t scale = StageFragments<kN, kKind>(pl.smem, b, pl.g, rtc, sub, av);
    IssueStage<kN>(p, av, x_base + b * C::kXBytes, ends.opens);
    cuda::WgmmaWait<0>();
    cuda::KeepOperands(av);  // read by the wgmmas until here
    cuda::KeepOperands(p);
    Release(pl, b);
    if (ends.closes) Fold<kN>(acc, p, scale);
  }
  Finish<kN, kG>(a, pl, acc, last_block);
}

// Consume with a stage's wgmmas in flight while the next stage is
// dequantized (LaunchSettings::int4_wgmma_overlap; clusters of 1): stage s
// keeps its fragments in slot s % 2 of av; once they are ready, the warp
// waits for stage s - 1's wgmmas, releases that stage, scales p where its
// group closed, and issues stage s's. The same operations in the same order
// as Consume's, so the same sums bit for bit.
template <int kN, Int4Offsets kKind>
__device__ __forceinline__ void ConsumeOverlap(const Args& a, const Place<kN, 1>& pl,
                                               int* last_block) {
  using C = Cfg<kN>;
  constexpr int S = C::kStages;
  const int32_t rtc = min(threadIdx.x >> 5, pl.g - 1);
  const uint32_t x_base = cuda::SmemAddr(pl.smem);
  float acc[kN / 2] = {}, p[kN / 2] = {};
  uint32_t av[2][kSteps][4];
  uint32_t sub[2] = {kMagic136, kMagic136};
  uint32_t scale_prev = 0;
  bool closes_prev = false;
  auto stage = [&](int32_t s, auto slot) {
    constexpr int kSlot = decltype(slot)::value;
    const int b = s % S;
    const StageEnds ends = Ends(a, pl, s);
    cuda::MbarrierWait(&pl.full[b], (s / S) & 1);
    const uint32_t scale = StageFragments<kN, kKind>(pl.smem, b, pl.g, rtc, sub, av[kSlot]);
    if (s > 0) {
      cuda::WgmmaWait<0>();
      cuda::KeepOperands(av[1 - kSlot]);  // read by stage s - 1's wgmmas until here
      cuda::KeepOperands(p);
      Release(pl, (s - 1) % S);
      if (closes_prev) Fold<kN>(acc, p, scale_prev);
    }
    IssueStage<kN>(p, av[kSlot], x_base + b * C::kXBytes, ends.opens);
    scale_prev = scale;
    closes_prev = ends.closes;
  };
  int32_t s = 0;
  for (; s + 1 < pl.stages; s += 2) {
    stage(s, std::integral_constant<int, 0>{});
    stage(s + 1, std::integral_constant<int, 1>{});
  }
  if (s < pl.stages) stage(s, std::integral_constant<int, 0>{});
  cuda::WgmmaWait<0>();
  cuda::KeepOperands(av[0]);
  cuda::KeepOperands(av[1]);
  cuda::KeepOperands(p);
  Fold<kN>(acc, p, scale_prev);  // the last stage closes its part of a group
  Finish<kN, 1>(a, pl, acc, last_block);
}

// stage(s, slot, first) for the split's stages s = 0, 1, ... in order, slot
// (s % 2) and first (s == 0) as std::integral_constants, so that registers
// indexed by the slot stay registers; returns the last stage's slot.
template <typename Stage>
__device__ __forceinline__ int StagesInSlots(int32_t stages, Stage&& stage) {
  using Zero = std::integral_constant<int, 0>;
  using One = std::integral_constant<int, 1>;
  stage(0, Zero{}, std::true_type{});
  int32_t s = 1;
  for (; s + 1 < stages; s += 2) {
    stage(s, One{}, std::false_type{});
    stage(s + 1, Zero{}, std::false_type{});
  }
  if (s < stages) {
    stage(s, One{}, std::false_type{});
    return 1;
  }
  return 0;
}

// ConsumeOverlap with two sets of sums, for groups of one stage (128
// columns) and tiles of up to 64 x rows (LaunchSettings::int4_wgmma_double_sums;
// 128 would need 256 registers a thread): stage s's fragments and sums in
// slot s % 2; once its fragments are ready the warp waits for stage s - 1's
// wgmmas, issues stage s's, then releases stage s - 1 and scales its sums
// into acc while stage s's wgmmas run, so only the wait and the issue stand
// between a warpgroup's wgmmas. (Issuing before the wait, with
// wgmma.wait_group 1, has ptxas serialize the wgmmas: C7514.) Each group's
// sums are Consume's, scaled and added in the same order: the same bytes.
template <int kN, Int4Offsets kKind>
__device__ __forceinline__ void ConsumeDoubleSums(const Args& a, const Place<kN, 1>& pl,
                                                  int* last_block) {
  static_assert(kN <= 64, "two sets of 128-row sums do not fit the consumers' registers");
  using C = Cfg<kN>;
  constexpr int S = C::kStages;
  const int32_t rtc = min(threadIdx.x >> 5, pl.g - 1);
  const uint32_t x_base = cuda::SmemAddr(pl.smem);
  float acc[kN / 2] = {}, p[2][kN / 2] = {};
  uint32_t av[2][kSteps][4];
  uint32_t scale[2] = {0, 0};
  uint32_t sub[2] = {kMagic136, kMagic136};
  // Stage s in slot kSlot; after the first, stage s - 1's wgmmas are in
  // flight on entry (the same state at the loop's head each time round).
  auto stage = [&](int32_t s, auto slot, auto first) {
    constexpr int kSlot = decltype(slot)::value;
    const int b = s % S;
    cuda::MbarrierWait(&pl.full[b], (s / S) & 1);
    scale[kSlot] = StageFragments<kN, kKind>(pl.smem, b, pl.g, rtc, sub, av[kSlot]);
    if constexpr (!decltype(first)::value) {
      cuda::WgmmaWait<0>();
      cuda::KeepOperands(av[1 - kSlot]);  // read by stage s - 1's wgmmas until here
      cuda::KeepOperands(p[1 - kSlot]);
    }
    IssueStage<kN>(p[kSlot], av[kSlot], x_base + b * C::kXBytes, true);
    if constexpr (!decltype(first)::value) {
      Release(pl, (s - 1) % S);
      Fold<kN>(acc, p[1 - kSlot], scale[1 - kSlot]);
    }
  };
  // Both sets of sums defined before the first wgmma: a register of a set
  // written while the other's wgmmas run would serialize them.
  cuda::KeepOperands(p[0]);
  cuda::KeepOperands(p[1]);
  const bool last_in_one = StagesInSlots(pl.stages, stage) == 1;
  cuda::WgmmaWait<0>();
  cuda::KeepOperands(av[0]);
  cuda::KeepOperands(av[1]);
  cuda::KeepOperands(p[0]);
  cuda::KeepOperands(p[1]);
  if (last_in_one) {
    Fold<kN>(acc, p[1], scale[1]);
  } else {
    Fold<kN>(acc, p[0], scale[0]);
  }
  Finish<kN, 1>(a, pl, acc, last_block);
}

// ConsumeOverlap with the group's scale in the A fragments
// (LaunchSettings::int4_wgmma_scaled_from_rows): each pair q - z (exact)
// times the bf16 pair (s, s) of its row, s the fp16 scale rounded to bf16,
// so the wgmmas sum s (q - z) x into acc across stages and groups (no sums
// to scale; one set of outputs, so 128 x rows fit the registers). Stage s's
// wgmmas are issued behind stage s - 1's, still in flight, and only then
// does the warp wait for stage s - 1's (wgmma.wait_group 1): the
// dequantization of stage s + 1 can only follow that wait, so it runs
// while stage s's wgmmas do. (Waiting for s - 1 before issuing s, as
// ConsumeOverlap does, lets ptxas schedule the wait ahead of the
// dequantization, right after its shared-memory loads.) A weight is
// rounded twice, s and the product: within 2^-8 of s (q - z), where the
// other consumers are exact. One bf16x2 multiply a pair: s (q - z) in fp32
// rounded once (the prefill path's weights) takes four more instructions a
// pair, and these warps' instructions set the pace at 128 rows.
// kWaitFirst (LaunchSettings::int4_wgmma_scaled_wait_first, the comparison
// arm): ConsumeOverlap's order instead, stage s - 1's wgmmas waited for
// before stage s's are issued.
template <int kN, Int4Offsets kKind, bool kWaitFirst>
__device__ __forceinline__ void ConsumeScaled(const Args& a, const Place<kN, 1>& pl,
                                              int* last_block) {
  using C = Cfg<kN>;
  constexpr int S = C::kStages;
  const int32_t rtc = min(threadIdx.x >> 5, pl.g - 1);
  const uint32_t x_base = cuda::SmemAddr(pl.smem);
  float acc[kN / 2] = {};
  uint32_t av[2][kSteps][4];
  uint32_t sub[2] = {kMagic136, kMagic136};
  // Stage s in slot kSlot; after the first, stage s - 1's wgmmas are in
  // flight on entry.
  auto stage = [&](int32_t s, auto slot, auto first) {
    constexpr int kSlot = decltype(slot)::value;
    const int b = s % S;
    cuda::MbarrierWait(&pl.full[b], (s / S) & 1);
    const float2 sc = HalfPair(StageFragments<kN, kKind>(pl.smem, b, pl.g, rtc, sub, av[kSlot]));
    const __nv_bfloat162 rows[2] = {__float2bfloat162_rn(sc.x), __float2bfloat162_rn(sc.y)};
#pragma unroll
    for (int j = 0; j < kSteps; ++j) {
#pragma unroll
      for (int m = 0; m < 4; ++m) {  // m % 2: row gr or gr + 8
        av[kSlot][j][m] =
            MulBf16x2(av[kSlot][j][m], reinterpret_cast<const uint32_t&>(rows[m % 2]));
      }
    }
    if constexpr (kWaitFirst && !decltype(first)::value) {
      cuda::WgmmaWait<0>();  // stage s - 1's wgmmas done
      cuda::KeepOperands(av[1 - kSlot]);
      Release(pl, (s - 1) % S);
    }
    IssueStage<kN>(acc, av[kSlot], x_base + b * C::kXBytes, false);
    if constexpr (!kWaitFirst && !decltype(first)::value) {
      cuda::WgmmaWait<1>();               // stage s - 1's wgmmas done, stage s's in flight
      cuda::KeepOperands(av[1 - kSlot]);  // read by stage s - 1's wgmmas until here
      Release(pl, (s - 1) % S);
    }
  };
  cuda::KeepOperands(acc);  // zeros before the first fence
  StagesInSlots(pl.stages, stage);
  cuda::WgmmaWait<0>();
  cuda::KeepOperands(av[0]);
  cuda::KeepOperands(av[1]);
  cuda::KeepOperands(acc);
  Finish<kN, 1>(a, pl, acc, last_block);
}

// How a consumer warp takes its stages: Consume, ConsumeOverlap (clusters
// of 1), ConsumeDoubleSums (clusters of 1, groups of a stage, up to 64 x
// rows) or ConsumeScaled (clusters of 1).
// kScaledWaitFirst: ConsumeScaled<kWaitFirst> (the comparison arm).
enum class Consumer { kPlain, kOverlap, kDoubleSums, kScaled, kScaledWaitFirst };

template <int kN, Int4Offsets kKind, int kG, Consumer kConsumer>
__global__ void __launch_bounds__(kThreads, 1) Int4WgmmaKernel(const __grid_constant__ Args a) {
  static_assert(kConsumer == Consumer::kPlain || kG == 1,
                "ConsumeOverlap, ConsumeDoubleSums and ConsumeScaled release stages in their own "
                "block only");
  using C = Cfg<kN>;
  extern __shared__ unsigned char smem_raw[];
  __shared__ int last_block;
  // The stages 1024-byte aligned (the swizzle's), by an offset from smem_raw
  // so that the compiler still knows the pointer is shared memory (LDS, not
  // generic loads, for the codes and scales).
  const Place<kN, kG> pl(
      a, smem_raw + ((1024 - (reinterpret_cast<uintptr_t>(smem_raw) & 1023)) & 1023));
  if (threadIdx.x == 0) {
    for (int s = 0; s < C::kStages; ++s) {
      cuda::MbarrierInit(&pl.full[s], 1);
      cuda::MbarrierInit(&pl.empty[s], kConsumers / 32 * kG);
    }
    cuda::FenceMbarrierInit();
  }
  // The barriers initialized before any block of the cluster copies into
  // or arrives on them.
  if constexpr (kG == 1) {
    __syncthreads();
  } else {
    cuda::ClusterArriveRelaxed();
    cuda::ClusterWaitAcquire();
  }
  const int warp = threadIdx.x >> 5;
  if (warp >= kConsumers / 32) {  // the producer warpgroup: one lane works
    cuda::SetMaxRegisters<false, kProducerRegs>();
    if (warp == kConsumers / 32 && (threadIdx.x & 31) == 0) Produce<kN, kKind, kG>(a, pl);
  } else {
    cuda::SetMaxRegisters<true, kConsumerRegs>();
    cuda::GridDependencyWait();
    if constexpr (kConsumer == Consumer::kScaled || kConsumer == Consumer::kScaledWaitFirst) {
      ConsumeScaled<kN, kKind, kConsumer == Consumer::kScaledWaitFirst>(a, pl, &last_block);
    } else if constexpr (kConsumer == Consumer::kDoubleSums) {
      ConsumeDoubleSums<kN, kKind>(a, pl, &last_block);
    } else if constexpr (kConsumer == Consumer::kOverlap) {
      ConsumeOverlap<kN, kKind>(a, pl, &last_block);
    } else {
      Consume<kN, kKind, kG>(a, pl, &last_block);
    }
  }
  // No block leaves while another may still arrive on its barriers.
  if constexpr (kG > 1) {
    __syncwarp();
    cuda::ClusterArriveRelease();
    cuda::ClusterWaitAcquire();
  }
}

template <int kN, Int4Offsets kKind, int kG, Consumer kConsumer>
absl::Status Launch(Args a, int64_t splits, cudaStream_t stream) {
  using C = Cfg<kN>;
  static const absl::Status configured = [] {
    CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(Int4WgmmaKernel<kN, kKind, kG, kConsumer>,
                                              cudaFuncAttributeMaxDynamicSharedMemorySize,
                                              C::kSmemBytes));
    return absl::OkStatus();
  }();
  RETURN_IF_ERROR(configured);
  // x: boxes of 64 columns x kN / kG rows.
  RETURN_IF_ERROR(cuda::EncodeBf16TensorMap(&a.x_map, a.x, a.rows,
                                            int64_t{a.k_tiles} * kInt4TileCols, a.x_stride,
                                            kInt4TileCols, kN / kG, "Int4Gemm's x"));
  a.m_blocks = static_cast<int32_t>(cuda::CeilDiv(a.rows, kN));
  const int64_t tiles = cuda::CeilDiv(a.n_tiles, 8) * a.m_blocks;
  const int64_t k_stages = a.k_tiles / kStageTiles;
  a.split_tiles = static_cast<int32_t>(cuda::CeilDiv(k_stages, splits) * kStageTiles);
  a.splits = static_cast<int32_t>(cuda::CeilDiv(a.k_tiles, a.split_tiles));
  int64_t grid = tiles * a.splits;
  if (a.tail_parts > 1) {  // Int4GemmWgmmaTail's (clusters of 1): parts of whole stages
    a.tail_split_tiles = static_cast<int32_t>(cuda::CeilDiv(k_stages, a.tail_parts) * kStageTiles);
    grid = a.tail_from + (tiles - a.tail_from) * a.tail_parts;
  }
  CUDA_RETURN_IF_ERROR(cuda::LaunchPdlInClusters(Int4WgmmaKernel<kN, kKind, kG, kConsumer>,
                                                 dim3(static_cast<int>(grid)), dim3(kThreads),
                                                 C::kSmemBytes, stream, kG > 1 ? kG : 0, a));
  return absl::OkStatus();
}

// `consumer` where it applies: clusters of 1, ConsumeDoubleSums up to 64 x
// rows (else ConsumeOverlap).
template <int kN, Int4Offsets kKind>
absl::Status LaunchCluster(const Args& a, int32_t cluster, Consumer consumer, int64_t splits,
                           cudaStream_t stream) {
  if constexpr (kN >= 32) {  // a block's part of the rows: whole 8-row swizzle atoms
    if (cluster == 4) {
      return Launch<kN, kKind, 4, Consumer::kPlain>(a, splits, stream);
    }
  }
  if (cluster == 2) return Launch<kN, kKind, 2, Consumer::kPlain>(a, splits, stream);
  if (consumer == Consumer::kScaled) {
    return Launch<kN, kKind, 1, Consumer::kScaled>(a, splits, stream);
  }
  if (consumer == Consumer::kScaledWaitFirst) {
    return Launch<kN, kKind, 1, Consumer::kScaledWaitFirst>(a, splits, stream);
  }
  if constexpr (kN <= 64) {
    if (consumer == Consumer::kDoubleSums) {
      return Launch<kN, kKind, 1, Consumer::kDoubleSums>(a, splits, stream);
    }
  }
  if (consumer != Consumer::kPlain) {
    return Launch<kN, kKind, 1, Consumer::kOverlap>(a, splits, stream);
  }
  return Launch<kN, kKind, 1, Consumer::kPlain>(a, splits, stream);
}

template <Int4Offsets kKind>
absl::Status LaunchRows(const Args& a, int32_t tile_rows, int32_t cluster, Consumer consumer,
                        int64_t splits, cudaStream_t stream) {
  switch (tile_rows) {
    case 16:
      return LaunchCluster<16, kKind>(a, cluster, consumer, splits, stream);
    case 32:
      return LaunchCluster<32, kKind>(a, cluster, consumer, splits, stream);
    case 64:
      return LaunchCluster<64, kKind>(a, cluster, consumer, splits, stream);
    default:
      return LaunchCluster<128, kKind>(a, cluster, consumer, splits, stream);
  }
}

}  // namespace
#endif  // ONECARD_CUDA_SM90A

bool Int4GemmWgmmaBuilt() {
#if ONECARD_CUDA_SM90A
  return true;
#else
  return false;
#endif
}

absl::Status LaunchInt4GemmWgmma(const Int4GemmParams& p, int num_sms, cudaStream_t stream) {
#if ONECARD_CUDA_SM90A
  Args a{};
  static_cast<int4::LaunchArgs&>(a) = int4::MakeLaunchArgs(p);
  const LaunchSettings settings = GetLaunchSettings();
  a.staged_epilogue = settings.int4_wgmma_staged_epilogue;
  a.early_dependents = settings.int4_wgmma_early_dependents;
  const Int4WgmmaTail tail = Int4GemmWgmmaTail(p, settings, num_sms);
  a.tail_from =
      tail.parts > 1 ? static_cast<int32_t>(tail.whole) : std::numeric_limits<int32_t>::max();
  a.tail_parts = static_cast<int32_t>(tail.parts);
  const int32_t tile_rows = Int4GemmWgmmaRows(p, settings, num_sms);
  const int64_t splits = Int4GemmWgmmaSplits(p, tile_rows, num_sms);
  // The launch's own splits fit the workspace by construction; forced ones
  // are checked.
  if (p.wgmma_splits != 0) {
    RETURN_IF_ERROR(CheckInt4GemmWgmmaSplits(p, tile_rows, splits, num_sms));
  }
  const int32_t cluster = Int4GemmWgmmaCluster(p, settings, num_sms);
  // Double sums take groups of one stage: each stage's sums are scaled alone.
  const Consumer consumer =
      !settings.int4_wgmma_overlap ? Consumer::kPlain
      : Int4GemmWgmmaScaled(p, settings, num_sms)
          ? (settings.int4_wgmma_scaled_wait_first ? Consumer::kScaledWaitFirst : Consumer::kScaled)
      : settings.int4_wgmma_double_sums && p.w.group == kStageTiles * kInt4TileCols
          ? Consumer::kDoubleSums
          : Consumer::kOverlap;
  if (p.w.offset_kind == Int4Offsets::kSymmetric) {
    return LaunchRows<Int4Offsets::kSymmetric>(a, tile_rows, cluster, consumer, splits, stream);
  }
  return LaunchRows<Int4Offsets::kZero>(a, tile_rows, cluster, consumer, splits, stream);
#else
  (void)p, (void)num_sms, (void)stream;
  return absl::UnimplementedError(
      "Int4Gemm: the kWgmma kernel needs a build for sm_90a only (ONECARD_CUDA_GENCODE)");
#endif
}

}  // namespace onecard::engine
