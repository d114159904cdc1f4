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
//   run (ConsumeOverlap: two stages' fragments in registers); with
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
//   order and writes y. Or, with LaunchSettings::int4_wgmma_stream_k and the
//   scale in the fragments, stream-K: a block an SM, each a contiguous share
//   of the tiles x stages, walked segment by segment (a tile's part each)
//   through the same stage buffers; a tile cut between blocks is summed in
//   k order by its last part to arrive (Int4WgmmaShareStart).
// Compiled where every target has wgmma (ONECARD_CUDA_SM90A).
// Tested by tests/gpu/int4_gemm_test.cc against Int4GemmRef.
#include "engine/kernels/int4_gemm_internal.h"

#if ONECARD_CUDA_SM90A
#include <algorithm>
#include <type_traits>

#include "engine/kernels/cuda_check.h"
#include "engine/kernels/cuda_common.cuh"
#include "engine/kernels/cuda_ptx.cuh"
#include "engine/kernels/cuda_tensor_map.h"
#include "engine/kernels/cuda_wgmma.cuh"
#include "engine/kernels/int4_codes.cuh"
#include "engine/kernels/int4_gemm_wgmma.cuh"
#include "engine/kernels/launch_settings.h"
#endif

namespace onecard::engine {

#if ONECARD_CUDA_SM90A
namespace int4_wgmma {
namespace {

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

// The bf16 pair a b, rounded once.
__device__ __forceinline__ uint32_t MulBf16x2(uint32_t a, uint32_t b) {
  uint32_t out;
  asm("mul.rn.bf16x2 %0, %1, %2;\n" : "=r"(out) : "r"(a), "r"(b));
  return out;
}

// ConsumeOverlap with the group's scale in the A fragments
// (LaunchSettings::int4_wgmma_scaled_from_rows): each pair q - z (exact)
// times the bf16 pair (s, s) of its row, s the fp16 scale rounded to bf16,
// so the wgmmas sum s (q - z) x into acc across stages and groups, and a
// warpgroup's tensor work waits at a stage only for stage s - 1's wgmmas
// before it issues stage s's (no sums to scale; one set of outputs, so 128
// x rows fit the registers). A weight is rounded twice, s and the product:
// within 2^-8 of s (q - z), where the other consumers are exact. One
// bf16x2 multiply a pair: s (q - z) in fp32 rounded once (the prefill path's
// weights) takes four more instructions a pair, and these warps' instructions
// set the pace at 128 rows. With kShares (stream-K, Place<kN, 1, true>) the
// block's share segment by segment: a segment's stages, then its last stage
// released (the producer is filling the next segment's) and its Finish.
template <int kN, Int4Offsets kKind, bool kShares>
__device__ __forceinline__ void ConsumeScaled(const Args& a,
                                              const Place<kN, 1, kShares>& first_place,
                                              int* last_block) {
  using C = Cfg<kN>;
  constexpr int S = C::kStages;
  const uint32_t x_base = cuda::SmemAddr(first_place.smem);
  uint32_t av[2][kSteps][4];
  uint32_t sub[2] = {kMagic136, kMagic136};
  // A tile's stages, or each segment of the share in turn (its stage s the
  // block's (j0 + s)-th).
  for (int32_t it = first_place.it;;) {
    const Place<kN, 1, kShares> pl(a, first_place.smem, it);
    const int32_t rtc = min(threadIdx.x >> 5, pl.g - 1);
    float acc[kN / 2] = {};
    // Stage s in slot kSlot; after the first, stage s - 1's wgmmas are in
    // flight on entry.
    auto stage = [&](int32_t s, auto slot, auto first) {
      constexpr int kSlot = decltype(slot)::value;
      const int32_t j = pl.j0 + s;
      const int b = j % S;
      cuda::MbarrierWait(&pl.full[b], (j / S) & 1);
      const float2 sc = HalfPair(StageFragments<kN, kKind>(pl.smem, b, pl.g, rtc, sub, av[kSlot]));
      const __nv_bfloat162 rows[2] = {__float2bfloat162_rn(sc.x), __float2bfloat162_rn(sc.y)};
#pragma unroll
      for (int jj = 0; jj < kSteps; ++jj) {
#pragma unroll
        for (int m = 0; m < 4; ++m) {  // m % 2: row gr or gr + 8
          av[kSlot][jj][m] =
              MulBf16x2(av[kSlot][jj][m], reinterpret_cast<const uint32_t&>(rows[m % 2]));
        }
      }
      if constexpr (!decltype(first)::value) {
        cuda::WgmmaWait<0>();
        cuda::KeepOperands(av[1 - kSlot]);  // read by stage s - 1's wgmmas until here
        cuda::KeepOperands(acc);
      }
      IssueStage<kN>(acc, av[kSlot], x_base + b * C::kXBytes, false);
      if constexpr (!decltype(first)::value) Release(pl, (j - 1) % S);
    };
    cuda::KeepOperands(acc);  // zeros before the first fence
    StagesInSlots(pl.stages, stage);
    cuda::WgmmaWait<0>();
    cuda::KeepOperands(av[0]);
    cuda::KeepOperands(av[1]);
    cuda::KeepOperands(acc);
    if constexpr (!kShares) {
      Finish<kN, 1>(a, pl, acc, last_block);
      return;
    }
    Release(pl, (pl.j0 + pl.stages - 1) % S);  // the producer's, for a later segment
    Finish<kN, 1>(a, pl, acc, last_block);
    it = pl.NextIt();
    if (it >= pl.ShareEnd(a)) return;
  }
}

// How a consumer warp takes its stages: Consume, ConsumeOverlap (clusters
// of 1), ConsumeDoubleSums (clusters of 1, groups of a stage, up to 64 x
// rows) or ConsumeScaled (clusters of 1).
enum class Consumer { kPlain, kOverlap, kDoubleSums, kScaled, kScaledShares };

template <int kN, Int4Offsets kKind, int kG, Consumer kConsumer>
__global__ void __launch_bounds__(kThreads, 1) Int4WgmmaKernel(const __grid_constant__ Args a) {
  static_assert(kConsumer == Consumer::kPlain || kG == 1,
                "ConsumeOverlap, ConsumeDoubleSums and ConsumeScaled release stages in their own "
                "block only");
  using C = Cfg<kN>;
  extern __shared__ unsigned char smem_raw[];
  __shared__ int last_block;
  const Place<kN, kG, kConsumer == Consumer::kScaledShares> pl(
      a, reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) &
                                          ~uintptr_t{1023}));
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
    if constexpr (kConsumer == Consumer::kScaled || kConsumer == Consumer::kScaledShares) {
      ConsumeScaled<kN, kKind, kConsumer == Consumer::kScaledShares>(a, pl, &last_block);
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
  a.k_stages = a.k_tiles / kStageTiles;
  a.split_tiles = static_cast<int32_t>(cuda::CeilDiv(a.k_stages, splits) * kStageTiles);
  a.splits = static_cast<int32_t>(cuda::CeilDiv(a.k_tiles, a.split_tiles));
  int64_t grid = tiles * a.splits;
  if (a.sk_blocks > 0) {  // stream-K: ConsumeScaled walks a share's segments
    if (kConsumer != Consumer::kScaledShares) {
      return absl::InternalError("Int4Gemm: stream-K shares on a kWgmma consumer without them");
    }
    a.split_tiles = a.k_tiles;
    a.splits = 1;
    a.sk_iters = static_cast<int32_t>(tiles * a.k_stages);
    grid = a.sk_blocks;
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
  if (consumer == Consumer::kScaledShares) {
    return Launch<kN, kKind, 1, Consumer::kScaledShares>(a, splits, stream);
  }
  if (consumer == Consumer::kScaled) {
    return Launch<kN, kKind, 1, Consumer::kScaled>(a, splits, stream);
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
}  // namespace int4_wgmma
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
  int4_wgmma::Args a{};
  static_cast<int4::LaunchArgs&>(a) = int4::MakeLaunchArgs(p);
  const LaunchSettings settings = GetLaunchSettings();
  const int32_t tile_rows = Int4GemmWgmmaRows(p, settings, num_sms);
  const int64_t splits = Int4GemmWgmmaSplits(p, tile_rows, num_sms);
  // The launch's own splits fit the workspace by construction; forced ones
  // are checked.
  if (p.wgmma_splits != 0) {
    RETURN_IF_ERROR(CheckInt4GemmWgmmaSplits(p, tile_rows, splits, num_sms));
  }
  RETURN_IF_ERROR(CheckInt4GemmWgmmaStreamK(p, settings, num_sms));
  a.sk_blocks = static_cast<int32_t>(Int4GemmWgmmaStreamKBlocks(p, settings, num_sms));
  const int32_t cluster = Int4GemmWgmmaCluster(p, settings, num_sms);
  // Double sums take groups of one stage: each stage's sums are scaled alone.
  const int4_wgmma::Consumer consumer =
      !settings.int4_wgmma_overlap                ? int4_wgmma::Consumer::kPlain
      : a.sk_blocks > 0                           ? int4_wgmma::Consumer::kScaledShares
      : Int4GemmWgmmaScaled(p, settings, num_sms) ? int4_wgmma::Consumer::kScaled
      : settings.int4_wgmma_double_sums && p.w.group == int4_wgmma::kStageTiles * kInt4TileCols
          ? int4_wgmma::Consumer::kDoubleSums
          : int4_wgmma::Consumer::kOverlap;
  if (p.w.offset_kind == Int4Offsets::kSymmetric) {
    return int4_wgmma::LaunchRows<Int4Offsets::kSymmetric>(a, tile_rows, cluster, consumer, splits,
                                                           stream);
  }
  return int4_wgmma::LaunchRows<Int4Offsets::kZero>(a, tile_rows, cluster, consumer, splits,
                                                    stream);
#else
  (void)p, (void)num_sms, (void)stream;
  return absl::UnimplementedError(
      "Int4Gemm: the kWgmma kernel needs a build for sm_90a only (ONECARD_CUDA_GENCODE)");
#endif
}

}  // namespace onecard::engine
