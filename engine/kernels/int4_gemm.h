// Int4Gemm: y = x' W^T for 4-bit W (int4_layout.h) and BF16 activations
// (W4A16), for the decode and middle steps of the CUDA runner (1..256 rows;
// larger steps dequantize W to BF16 for cuBLAS: int4_dequant.h), with the
// GEMV's fusions:
//   prologue kRmsNorm: x' = RmsNorm(x) * norm_weight, rounded to BF16
//   add_to_y:          y = bf16(bf16(x' W^T) + y)            (the residual add)
//   silu_mul_y:        W's rows are gate and up interleaved by 8
//                      (InterleavedGateUpRows); y [rows, n / 2] =
//                      bf16(silu(bf16(gate)) * bf16(up))
//   y_dtype kF32:      y = x' W^T in fp32
//   fold_norm, x_sum_sq (Int4NormFold): the RMSNorm between a residual
//                      product and the next product folded into the two
// The kernels share one arithmetic (tensor cores over exact 128 + q codes, one
// scale a group applied to the fp32 sums):
//   kStream (int4_gemm.cu): a warp a 16-row tile of W against every row of
//     x, a producer warp streaming W with the copy engine; for the HBM floor
//     of decode, up to kInt4GemmStreamMaxRows rows.
//   kTiled (int4_gemm_tiled.cu): blocks of 128 W rows x tile_rows x rows, a
//     warp 32 W rows x tile_rows / 2 x rows, cp.async stages; for the
//     tensor-core rate of the middle steps.
//   kWgmma (int4_gemm_wgmma.cu; builds for sm_90a only): blocks of 128 W
//     rows x 16-128 x rows on Hopper's warpgroup MMA, stages by the copy
//     engine (codes) and TMA (x); groups of a multiple of 128 without mins
//     only (Int4GemmWgmmaFits).
//   kGemv (int4_gemm_gemv.cu): up to kInt4GemmGemvMaxRows rows, the FP8
//     Gemv's form: a block a 16-row tile of W at a time, its warps an eighth
//     of k each, every lane's codes loaded straight into registers a chunk
//     ahead; no workspace (Int4GemmGemvFits).
// kAuto takes kGemv up to LaunchSettings::int4_gemv_max_rows rows where it
// fits (Int4GemmUsesGemv), kStream up to kInt4GemmTiledFromRows - 1 rows, then kTiled
// (Int4GemmTiledRows picks its tile); kWgmma where it is built and
// Int4GemmAutoWgmma says so (from LaunchSettings::int4_wgmma_from_rows rows,
// and from int4_wgmma_split_from_rows where the launch splits K).
// Reference: Int4GemmRef (int4_gemm_ref.cc): the prologue through
// RmsNormRef, W's fp32 values (Int4Value), a plain fp32 dot per output (times
// x_sum_sq's r), the epilogue's roundings, then fold_norm's outputs. The kernels sum in fp32 in
// another order, so outputs agree to the BF16 rounding of y; kWgmma's 128-row tiles, where
// LaunchSettings::int4_wgmma_scaled_from_rows takes them (served), round each
// weight to bf16 first (within 2^-8).
// Supported: W n % 16 == 0, k % 64 == 0 (k <= kInt4MaxK), groups of 32 * j dividing k (or k),
// every Int4Offsets kind; 1 <= rows <= kInt4GemmMaxRows; x_row_stride % 8 == 0;
// kRmsNorm only up to kInt4GemmMaxNormRows rows (more: RmsNorm first), on kStream;
// a folded RMSNorm up to kInt4GemmFoldMaxRows rows, on kStream.
// Tested by tests/gpu/int4_gemm_test.cc (MatchesReference) and, for the
// reference, tests/engine/kernels/int4_gemm_ref_test.cc.
#ifndef ONECARD_ENGINE_KERNELS_INT4_GEMM_H_
#define ONECARD_ENGINE_KERNELS_INT4_GEMM_H_

#include <array>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/common/dtype.h"
#include "engine/kernels/gemv.h"
#include "engine/kernels/int4_layout.h"
#include "engine/kernels/launch_settings.h"
#include "engine/kernels/stream.h"

namespace onecard::engine {

inline constexpr int32_t kInt4GemmMaxRows = 256;
inline constexpr int32_t kInt4GemmStreamMaxRows = 64;
inline constexpr int32_t kInt4GemmTiledFromRows = 17;
inline constexpr int32_t kInt4GemmMaxNormRows = 4;
inline constexpr int32_t kInt4GemmFoldMaxRows = 16;
// Columns up to 2^22 - 64 (the kernel finds a column's group in fp32).
inline constexpr int64_t kInt4MaxK = (int64_t{1} << 22) - 64;

// A packed 4-bit weight where the kernel reads it (int4_layout.h).
struct Int4WeightView {
  const void* codes = nullptr;    // Int4CodeBytes(n, k)
  const void* scales = nullptr;   // uint32 [n / 16][8][k / group]
  const void* offsets = nullptr;  // same layout; null for kSymmetric
  int64_t n = 0;
  int64_t k = 0;
  int32_t group = 0;
  Int4Offsets offset_kind = Int4Offsets::kSymmetric;
};

// The RMSNorm before a product folded into the residual product ahead of it
// and into the product itself (kStream, up to kInt4GemmFoldMaxRows rows):
// RmsNorm(h) W^T = r (g . h) W^T with r = rsqrt(mean(h^2) + eps) one scalar
// a row, so no launch normalizes h in between. The residual product
// (add_to_y, its y the new residual h) also writes the next product's input
// g . h and h's sums of squares a 16-column tile; the next product
// (Int4GemmParams::x_sum_sq) sums a row's tiles and scales the row's sums by
// r before its epilogue. Against RmsNorm then the product, only the
// roundings differ: bf16(g h) for bf16(g (h r)), and r applied in fp32.
struct Int4NormFold {
  const void* weight = nullptr;  // BF16 [n]: g, the next RMSNorm's weight
  void* x = nullptr;             // BF16 [rows, n]: bf16(g[c] * y[m][c]), y as stored
  float* sum_sq = nullptr;       // [rows, n / 16]: tile t's sum of y[m][16 t + i]^2
};

// Which kernel runs a launch (see above); kAuto but for comparisons.
enum class Int4GemmPath : uint8_t { kAuto, kStream, kTiled, kWgmma, kGemv };

struct Int4GemmParams {
  Int4WeightView w;
  GemvPrologue prologue = GemvPrologue::kNone;  // kNone or kRmsNorm
  const void* x = nullptr;                      // BF16 [rows, x_row_stride], k values a row
  int64_t x_row_stride = 0;
  const void* norm_weight = nullptr;  // BF16 [k], kRmsNorm only
  float eps = 1e-5f;
  void* y = nullptr;             // [rows, n] (silu_mul_y: [rows, n / 2]) of y_dtype
  DType y_dtype = DType::kBF16;  // kBF16 or kF32
  bool add_to_y = false;         // BF16 y only
  bool silu_mul_y = false;       // BF16 y only, not with add_to_y
  int32_t rows = 0;
  // With add_to_y (BF16 y, no prologue, up to kInt4GemmFoldMaxRows rows on
  // kStream or kAuto): the next product's folded RMSNorm input
  // (Int4NormFold); a null weight writes none.
  Int4NormFold fold_norm;
  // No prologue, up to kInt4GemmFoldMaxRows rows on kStream or kAuto: row
  // m's sums are scaled by rsqrt(s / k + eps) before the epilogue, s the sum
  // of the k / 16 floats at x_sum_sq + m * k / 16 (an Int4NormFold's sum_sq,
  // x its x). Null: none.
  const float* x_sum_sq = nullptr;
  Int4GemmPath path = Int4GemmPath::kAuto;
  // kTiled: x rows a block, 16, 32, 64 or 128; kWgmma: the same; 0 picks
  // by rows (Int4GemmTiledRows, Int4GemmWgmmaRows).
  int32_t tile_rows = 0;
  // kWgmma: blocks a thread block cluster, 1, 2 or 4, sharing x's stages by
  // TMA multicast (each block copies its part of the rows for all); 0:
  // LaunchSettings::int4_wgmma_cluster (Int4GemmWgmmaCluster).
  int32_t cluster = 0;
  // kStream up to 16 rows without a prologue: a cluster split in clusters of
  // this many blocks (2, 4 or 8; a block at least two k tiles), whether or
  // not its blocks fill the grid and its clusters are resident at once (for
  // tests and benches); 0: LaunchSettings::int4_cluster_split_k decides
  // (Int4GemmClusterSize).
  int32_t stream_cluster = 0;
  // kWgmma: K in this many parts, a block each (each at least 4 stages of
  // 128 columns; the workspace must hold their partial sums:
  // CheckInt4GemmWgmmaSplits), for tests and benches; 0 picks
  // (Int4GemmWgmmaSplits).
  int32_t wgmma_splits = 0;
  // Split-K partial sums and arrival counters (Int4GemmWorkspaceBytes; zero
  // when first used; every launch leaves its counters zero again, the partial
  // sums are rewritten before they are read). Not needed by the reference.
  // One workspace serves one stream at a time.
  void* workspace = nullptr;
  int64_t workspace_bytes = 0;
  // kStream only, for timelines (onecard-bench-cuda's timeline-int4): each
  // launched block's consumer warp w writes trace[(block * kInt4GemmTraceWarps
  // + w) * kInt4GemmTraceStamps + {0, 1, 2, 3, 4}] = the block's start, the
  // warp's first stage landed, its last stage computed (before its last
  // segment's split-K sums and epilogue) and its end, in the GPU's global
  // timer's ns, then the SM the block ran on (%smid) (device memory of
  // Int4GemmTraceWords words; blocks with no work write nothing). Null: none.
  uint64_t* trace = nullptr;
};

// The consumer warps of a kStream block, and the trace's words for a device
// of num_sms SMs (every block a launch may have).
inline constexpr int kInt4GemmTraceWarps = 8;
inline constexpr int kInt4GemmTraceStamps = 5;  // words a warp writes
inline int64_t Int4GemmTraceWords(int32_t num_sms) {
  // 4: kInt4GemmMaxBlocksPerSm
  return int64_t{num_sms} * 4 * kInt4GemmTraceWarps * kInt4GemmTraceStamps;
}

// The workspace (int4_gemm.cu): partial-sum slots of kInt4GemmSlotBytes from
// its start, one per (row group of 128 weight rows, resident block) pair for
// grids of up to kInt4GemmMaxBlocksPerSm blocks an SM; an int32 arrival
// counter per 16-row tile at its end, tile t's the (t + 1)-th int32 from the
// end, so that weights of any n the workspace was sized for find their
// counters at the same addresses and never in another launch's slots.
// kTiled splits K only while its blocks fill the slots of n and its output
// tiles (128 W rows x tile_rows x rows) number at most n / 16: a split's
// partial sums in the slots, one counter per output tile.
inline constexpr int kInt4GemmRowGroup = 128;
inline constexpr int kInt4GemmMaxBlocksPerSm = 4;
inline constexpr int64_t kInt4GemmSlotBytes = 256 * 8 * 4 * 4;  // threads x n8 tiles x floats
struct Int4GemmWorkspaceLayout {
  int64_t slot_bytes = 0;     // the slots of n
  int64_t counter_bytes = 0;  // the counters of n
  int64_t total_bytes = 0;    // both, 256-byte aligned
};
Int4GemmWorkspaceLayout Int4GemmWorkspace(int64_t n, int32_t num_sms);
// Workspace for weights of up to max_n rows on a device of num_sms SMs.
int64_t Int4GemmWorkspaceBytes(int64_t max_n, int32_t num_sms);

// The cluster size G of kStream's cluster split
// (LaunchSettings::int4_cluster_split_k) for a weight of row_groups row
// groups (of kInt4GemmRowGroup rows) and k_tiles k tiles (of kInt4TileCols
// columns) on a grid of `capacity` resident blocks: the largest of 8 (the
// portable cluster size), 4 and 2 (a block finishes 8 / G of a row group's 8
// row tiles) whose row_groups x G blocks fit the grid and leave at most a
// twentieth of it idle, each block at least two k tiles; 0 when none does
// (the launch keeps stream-K's shares).
inline constexpr int32_t kInt4GemmMaxCluster = 8;
int32_t Int4GemmClusterSize(int64_t row_groups, int64_t k_tiles, int64_t capacity);

// The checks both implementations make: Unimplemented naming what is
// supported for a shape or option outside the set above, InvalidArgument for
// inconsistent parameters; `op` starts the message.
absl::Status CheckInt4GemmParams(const Int4GemmParams& params, absl::string_view op);

// Whether a launch takes part in a folded RMSNorm (fold_norm or x_sum_sq).
inline bool Int4GemmFoldsNorm(const Int4GemmParams& p) {
  return p.fold_norm.weight != nullptr || p.x_sum_sq != nullptr;
}
// kGemv: the rows it takes, and the shared memory of a block (x's rows of k
// columns, each padded by kInt4GemmGemvXPad values so that rows start on
// other banks, then the 8 warps' sums, 16 bytes a lane), at most
// kInt4GemmGemvMaxSmemBytes (two blocks an SM).
inline constexpr int32_t kInt4GemmGemvMaxRows = 8;
inline constexpr int64_t kInt4GemmGemvMaxSmemBytes = 110 * 1024;
inline constexpr int64_t kInt4GemmGemvXPad = 8;
constexpr int64_t Int4GemmGemvSmemBytes(int64_t rows, int64_t k) {
  return rows * (k + kInt4GemmGemvXPad) * 2 + 8 * 32 * 16;
}
// Whether kGemv can run params (checked ones): up to kInt4GemmGemvMaxRows
// rows, x's rows in its shared memory (Int4GemmGemvSmemBytes), no folded
// RMSNorm or trace, x (and a prologue's norm_weight) 16-byte aligned. The
// RMSNorm prologue (up to kInt4GemmMaxNormRows rows) it runs on its staged x.
bool Int4GemmGemvFits(const Int4GemmParams& params);
// Whether Int4Gemm runs kGemv for params (checked ones) under `settings`:
// path kGemv, or kAuto up to settings.int4_gemv_max_rows rows where it fits.
bool Int4GemmUsesGemv(const Int4GemmParams& params, const LaunchSettings& settings);
// Whether a launch runs kTiled, and the x rows of its blocks.
bool Int4GemmUsesTiled(const Int4GemmParams& params);
int32_t Int4GemmTiledRows(const Int4GemmParams& params);
// Whether kWgmma can run params (checked ones): symmetric or zero-point
// groups of a multiple of 128 columns, k % 128 == 0, no prologue or folded
// RMSNorm, x 16-byte aligned; and the x rows of its blocks.
bool Int4GemmWgmmaFits(const Int4GemmParams& params);
// Whether kAuto takes kWgmma for params (checked ones) under `settings` on
// num_sms SMs, where the build holds it: where it fits (Int4GemmWgmmaFits)
// from settings.int4_wgmma_from_rows rows, or from
// settings.int4_wgmma_split_from_rows rows where its tiles split K and its
// grid (tiles x parts, Int4GemmWgmmaSplits at Int4GemmWgmmaRows' tile)
// takes at most settings.int4_wgmma_split_max_grid_percent of the SMs.
bool Int4GemmAutoWgmma(const Int4GemmParams& params, const LaunchSettings& settings,
                       int32_t num_sms);
// kWgmma's stages: 128 columns of W (two k tiles) each.
inline constexpr int32_t kInt4WgmmaStageCols = 128;
// The K splits of an output tile of kTiled and kWgmma: while `tiles` output
// tiles leave some of `resident` blocks idle, each split at least 4 of
// k_stages stages, at most `slots` partial-sum slots over all tiles; 1 where
// the tiles outnumber the n_tiles arrival counters.
int64_t Int4TileSplits(int64_t tiles, int64_t resident, int64_t k_stages, int64_t slots,
                       int64_t n_tiles);
// The blocks an output tile of a kWgmma launch of params in tiles of
// tile_rows x rows takes on num_sms SMs: params.wgmma_splits, else while
// the tiles leave SMs idle (one block an SM, the workspace's slots:
// Int4TileSplits).
int64_t Int4GemmWgmmaSplits(const Int4GemmParams& params, int32_t tile_rows, int32_t num_sms);
// InvalidArgument naming wgmma_splits where the workspace of a launch on
// num_sms SMs (Int4GemmWorkspace) cannot hold the partial sums of `splits`
// parts of every tile of tile_rows x rows, or its counters the tiles.
absl::Status CheckInt4GemmWgmmaSplits(const Int4GemmParams& params, int32_t tile_rows,
                                      int64_t splits, int32_t num_sms);
// kWgmma's last wave in parts (LaunchSettings::int4_wgmma_tail_split): a
// launch whose output tiles (one block each, K whole, clusters of 1, no
// forced wgmma_splits) outnumber the SMs, one block an SM, runs
// tiles % num_sms of them alone in a last wave; those take `parts` blocks
// each, K cut in parts of at least 4 stages (within the workspace's slots),
// so the last wave fills the SMs it would leave idle. Tiles [whole, tiles)
// are split; parts 1: none.
struct Int4WgmmaTail {
  int64_t whole = 0;
  int64_t parts = 1;
};
Int4WgmmaTail Int4GemmWgmmaTail(const Int4GemmParams& params, const LaunchSettings& settings,
                                int32_t num_sms);
// The x rows of kWgmma's tiles: params.tile_rows, else 16, 32 or 64 for up
// to that many rows; past 64, 128, or 64 where 128-row tiles would split K
// into parts of fewer than settings.int4_wgmma_min_split_stages stages.
int32_t Int4GemmWgmmaRows(const Int4GemmParams& params, const LaunchSettings& settings,
                          int32_t num_sms);
// The cluster size of a kWgmma launch: params.cluster, else
// settings.int4_wgmma_cluster, and 1 where it does not divide the weight's
// row groups (of kInt4GemmRowGroup rows) or would leave a block fewer than 8
// of its tile's x rows to copy.
int32_t Int4GemmWgmmaCluster(const Int4GemmParams& params, const LaunchSettings& settings,
                             int32_t num_sms);
// Whether a kWgmma launch takes the scale into its bf16 weights (within 2^-8
// of the exact ones) under `settings`: clusters of 1 (Int4GemmWgmmaCluster),
// int4_wgmma_overlap, and tiles of at least int4_wgmma_scaled_from_rows rows.
bool Int4GemmWgmmaScaled(const Int4GemmParams& params, const LaunchSettings& settings,
                         int32_t num_sms);

absl::Status Int4GemmRef(const Int4GemmParams& params);
// Row r of W in fp32 (Int4Value of each code, in stored column order), as the
// references read it (Int4GemmRef, HostLinearRef).
void Int4WeightRowRef(const Int4WeightView& w, int64_t r, std::vector<float>* row);
absl::Status Int4Gemm(const Int4GemmParams& params, cudaStream_t stream);
// What Int4Gemm's launch for params takes under the current launch settings
// (Int4GemmClusterSplit): `size`, Int4GemmParams::stream_cluster where set,
// else Int4GemmClusterSize's where LaunchSettings::int4_cluster_split_k asks
// for a cluster split and the device holds that many clusters resident at
// once, else 0 (stream-K's shares, kTiled or kWgmma); and, where a cluster
// split was asked for and considered, what decided it: the weight's row groups and k tiles, the
// grid's resident blocks (`capacity`) and the clusters of each size 2, 4
// and 8 the device holds resident at once (`resident[g]`).
struct Int4GemmClusterPlan {
  int32_t size = 0;
  int64_t row_groups = 0;
  int64_t k_tiles = 0;
  int64_t capacity = 0;
  std::array<int32_t, kInt4GemmMaxCluster + 1> resident{};
};
// Launches nothing.
absl::StatusOr<Int4GemmClusterPlan> Int4GemmClusterSplit(const Int4GemmParams& params);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_KERNELS_INT4_GEMM_H_
