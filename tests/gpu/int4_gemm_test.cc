// MatchesReference for Int4Gemm (W4A16) over awkward shapes: the projection
// widths of llama3-8b / 70b, Qwen2-72B's padded 29696 and SmolLM2's 576 and
// 960, groups of 32 (GGUF), 64, 96 (straddling the 64-column tiles), 128 and
// one a row, the three offset kinds, 1..256 rows on both kernels (every
// row-tile width each has), the RMSNorm prologue, the
// residual add, the SiLU·mul of interleaved gate/up rows and fp32 outputs.
// Each case runs twice on one workspace: the outputs must be identical bit
// for bit (the split-K sums are ordered) and the arrival counters left zero;
// kStream cases a third time with timeline stamps (Int4GemmParams::trace):
// the same output, each warp's four stamps in order and its SM one of the
// device's (kWgmma cases and those on kAuto with LaunchSettings::int4_wgmma_from_rows
// have no stamps). Cluster-split cases (Int4GemmParams::stream_cluster, or
// LaunchSettings::int4_cluster_split_k on shapes it leaves to stream-K) also
// check that the launch took the split they expect (Int4GemmClusterSplit)
// and, from the stamps, a block a row group and rank.
// Tolerance: the kernel rounds where the reference does (x', y), and sums in
// fp32 in another order (tensor cores over 128 + q, the scale once a group):
// BF16 outputs within Tolerance::For(BF16); fp32 outputs within 1e-3.
#include "engine/kernels/int4_gemm.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "engine/common/status_macros.h"
#include "engine/kernels/int4_dequant.h"
#include "engine/kernels/int4_matrix.h"
#include "engine/kernels/launch_settings.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/int4_device.h"
#include "tests/testing/all_close.h"
#include "tests/testing/int4_testing.h"
#include "tests/testing/rows_on_cores.h"

namespace onecard::testing {
namespace {

using engine::DType;
using engine::GemvPrologue;
using engine::Int4Offsets;

enum class Out { kBf16, kAdd, kSilu, kF32 };

// Int4GemmRef(p) with p's rows shared among the host's cores.
absl::Status Int4GemmRefOnCores(const engine::Int4GemmParams& p) {
  const int64_t y_row_bytes =
      (p.silu_mul_y ? p.w.n / 2 : p.w.n) * (p.y_dtype == DType::kF32 ? 4 : 2);
  return RowsOnCores(p, y_row_bytes,
                     [](const engine::Int4GemmParams& part) { return engine::Int4GemmRef(part); });
}

struct Int4Case {
  std::string name;
  int64_t n;
  int64_t k;
  int32_t group;
  Int4Offsets offsets;
  int32_t rows;
  GemvPrologue prologue;
  Out out;
  engine::Int4GemmPath path = engine::Int4GemmPath::kAuto;
  int32_t tile_rows = 0;
  // kSplit: a cluster split in clusters of stream_cluster blocks
  // (Int4GemmParams::stream_cluster); kFallback: with
  // LaunchSettings::int4_cluster_split_k, a shape the setting leaves to
  // stream-K (Int4GemmClusterSplit says which the launch takes).
  enum class Cluster { kOff, kSplit, kFallback } cluster = Cluster::kOff;
  // LaunchSettings::int4_wgmma_from_rows for the case (kAuto's kWgmma).
  int32_t wgmma_from_rows = 0;
  int32_t wgmma_cluster = 0;  // Int4GemmParams::cluster
  int32_t stream_cluster = 0;
  bool wgmma_overlap = false;          // LaunchSettings::int4_wgmma_overlap
  bool wgmma_double_sums = false;      // LaunchSettings::int4_wgmma_double_sums
  int32_t wgmma_scaled_from_rows = 0;  // LaunchSettings::int4_wgmma_scaled_from_rows
  int32_t wgmma_splits = 0;            // Int4GemmParams::wgmma_splits
  bool wgmma_tail_split = false;       // LaunchSettings::int4_wgmma_tail_split
  int32_t wgmma_split_from_rows = 0;   // LaunchSettings::int4_wgmma_split_from_rows
  // LaunchSettings::int4_wgmma_split_max_grid_percent
  int32_t wgmma_split_max_grid_percent = 100;
  bool expect_tail_parts = false;  // asserts Int4GemmWgmmaTail's parts > 1
  int32_t gemv_max_rows = 0;       // LaunchSettings::int4_gemv_max_rows
};

std::vector<Int4Case> Cases() {
  const auto sym = Int4Offsets::kSymmetric, zero = Int4Offsets::kZero, fl = Int4Offsets::kFloat;
  const auto none = GemvPrologue::kNone, norm = GemvPrologue::kRmsNorm;
  const auto kTiled = engine::Int4GemmPath::kTiled, kStream = engine::Int4GemmPath::kStream;
  const auto kWgmma = engine::Int4GemmPath::kWgmma, kAuto = engine::Int4GemmPath::kAuto;
  const auto kOff = Int4Case::Cluster::kOff;
  const auto kSplit = Int4Case::Cluster::kSplit, kFallback = Int4Case::Cluster::kFallback;
  std::vector<Int4Case> cases = {
      {"qkv70b_norm_r1", 10240, 8192, 128, sym, 1, norm, Out::kBf16},
      {"o70b_add_r3", 8192, 8192, 128, zero, 3, none, Out::kAdd},
      {"gateup8b_norm_silu_r1", 28672, 4096, 128, fl, 1, norm, Out::kSilu},
      {"down8b_add_r16", 4096, 14336, 128, sym, 16, none, Out::kAdd},
      {"down72b_padded_add_r2", 8192, 29696, 128, zero, 2, none, Out::kAdd},
      {"gate72b_padded_g64_r9", 29696, 5120, 64, sym, 9, none, Out::kBf16},
      {"per_channel_norm_r4", 4096, 4096, 4096, sym, 4, norm, Out::kBf16},
      {"smol_qkv_g32_norm_r1", 960, 576, 32, fl, 1, norm, Out::kBf16},
      {"smol_gateup_g32_silu_r4", 3072, 576, 32, fl, 4, norm, Out::kSilu},
      {"tiny_f32_r1", 16, 64, 32, zero, 1, none, Out::kF32},
      {"f32_r7", 2048, 4096, 128, fl, 7, none, Out::kF32},
      {"down70b_add_r1", 8192, 28672, 128, sym, 1, none, Out::kAdd},
      {"g96_straddle_zero_r5", 512, 1152, 96, zero, 5, none, Out::kBf16},
      {"gateup_silu_zero_r16", 8192, 4096, 128, zero, 16, none, Out::kSilu},
      {"up14336_r12", 14336, 4096, 128, sym, 12, none, Out::kBf16},
      {"k5120_g128_norm_r2", 5120, 5120, 128, fl, 2, norm, Out::kBf16},
      // SmolLM2's four projections (Q4_1: groups of 32 with mins) as the
      // runner calls them at 1 and 5 rows.
      {"smol_qkv_r5", 960, 576, 32, fl, 5, none, Out::kBf16},
      {"smol_o_add_r1", 576, 576, 32, fl, 1, none, Out::kAdd},
      {"smol_o_add_r5", 576, 576, 32, fl, 5, none, Out::kAdd},
      {"smol_gateup_silu_r1", 3072, 576, 32, fl, 1, norm, Out::kSilu},
      {"smol_gateup_silu_r5", 3072, 576, 32, fl, 5, none, Out::kSilu},
      {"smol_down_add_r1", 576, 1536, 32, fl, 1, none, Out::kAdd},
      {"smol_down_add_r5", 576, 1536, 32, fl, 5, none, Out::kAdd},
      // The middle steps: 17..64 rows.
      {"mid_sym_r17", 4096, 5120, 128, sym, 17, none, Out::kBf16},
      {"mid_zero_add_r33", 2048, 4096, 64, zero, 33, none, Out::kAdd},
      {"mid_float_silu_r64", 2048, 2048, 32, fl, 64, none, Out::kSilu},
      {"mid_sym_f32_r57", 1024, 4096, 128, sym, 57, none, Out::kF32},
      {"mid_g96_zero_add_r48", 512, 1152, 96, zero, 48, none, Out::kAdd},
      {"mid_zero_r64", 1536, 2048, 128, zero, 64, none, Out::kBf16},
      {"mid_per_channel_float_r40", 512, 1024, 1024, fl, 40, none, Out::kBf16},
      // kTiled past the stream kernel's rows: two x tiles, split-K (a split
      // cutting groups of 96 and a per-channel group), a partial row group
      // (11 row tiles), rows short of a tile, each forced tile height.
      {"tiled_sym_add_r128", 8192, 4096, 128, sym, 128, none, Out::kAdd},
      {"tiled_zero_silu_r256", 4096, 2048, 64, zero, 256, none, Out::kSilu},
      {"tiled_float_r100", 2048, 1536, 32, fl, 100, none, Out::kBf16},
      {"tiled_g96_zero_add_r77", 512, 1152, 96, zero, 77, none, Out::kAdd},
      {"tiled_partial_group_f32_r40", 176, 4096, 128, sym, 40, none, Out::kF32},
      {"tiled_per_channel_zero_r200", 512, 2048, 2048, zero, 200, none, Out::kBf16},
      {"tiled_g256_add_r64", 1024, 8192, 256, sym, 64, none, Out::kAdd},
      {"tiled128_sym_r129", 1024, 4096, 128, sym, 129, none, Out::kBf16, kTiled, 128},
      {"tiled128_float_silu_r90", 1024, 2048, 32, fl, 90, none, Out::kSilu, kTiled, 128},
      {"tiled16_zero_add_r16", 4096, 4096, 128, zero, 16, none, Out::kAdd, kTiled, 16},
      {"tiled16_float_r1", 960, 576, 32, fl, 1, none, Out::kBf16, kTiled, 16},
      {"tiled32_float_silu_r3", 3072, 576, 32, fl, 3, none, Out::kSilu, kTiled, 32},
      {"tiled64_sym_f32_r250", 256, 1024, 128, sym, 250, none, Out::kF32, kTiled, 64},
      // kStream's middle row tiles, now taken only when asked for.
      {"stream_sym_r33", 4096, 5120, 128, sym, 33, none, Out::kBf16, kStream},
      {"stream_float_silu_r64", 2048, 2048, 32, fl, 64, none, Out::kSilu, kStream},
      {"stream_zero_add_r20", 2048, 4096, 64, zero, 20, none, Out::kAdd, kStream},
      // Cluster splits (Int4GemmParams::stream_cluster): the 8B and 70B o /
      // down shapes in clusters of 8 and 4, 9-16 rows (one block an SM), a
      // partial last row group (253 row tiles), clusters of 2, each output
      // kind and offset kind, groups of 32; and shapes that
      // LaunchSettings::int4_cluster_split_k leaves to stream-K.
      {"cluster_o8b_add_r1", 4096, 4096, 128, sym, 1, none, Out::kAdd, kStream, 0, kSplit, 0, 0, 8},
      {"cluster_o70b_zero_add_r3", 8192, 8192, 128, zero, 3, none, Out::kAdd, kStream, 0, kSplit, 0,
       0, 4},
      {"cluster_down70b_add_r1", 8192, 28672, 128, sym, 1, none, Out::kAdd, kStream, 0, kSplit, 0,
       0, 4},
      {"cluster_down8b_float_add_r16", 4096, 14336, 128, fl, 16, none, Out::kAdd, kStream, 0,
       kSplit, 0, 0, 4},
      {"cluster_partial_zero_g32_r7", 4048, 4096, 32, zero, 7, none, Out::kBf16, kStream, 0, kSplit,
       0, 0, 8},
      {"cluster_silu_float_r2", 8192, 4096, 64, fl, 2, none, Out::kSilu, kStream, 0, kSplit, 0, 0,
       4},
      {"cluster_f32_r12", 4096, 4096, 128, sym, 12, none, Out::kF32, kStream, 0, kSplit, 0, 0, 2},
      {"cluster_fallback_smol_o_r1", 576, 576, 32, fl, 1, none, Out::kAdd, kStream, 0, kFallback},
      {"cluster_fallback_qkv8b_r1", 6144, 4096, 128, sym, 1, none, Out::kBf16, kStream, 0,
       kFallback},
      {"cluster_fallback_norm_r1", 4096, 4096, 128, sym, 1, norm, Out::kBf16, kStream, 0,
       kFallback},
      // kWgmma (Hopper's warpgroup MMA): 70B down and o at 128 rows (split
      // K), x tiles of 64 and 128 rows, rows short of a tile and past one
      // (two and three x tiles), a partial row group (11 row tiles), groups
      // of 256, 384 (splits cutting them) and one a row, zero points, each
      // output kind; on kAuto from LaunchSettings::int4_wgmma_from_rows, and
      // a weight it does not take (mins) left to kTiled there.
      {"wgmma_down70b_add_r128", 8192, 28672, 128, sym, 128, none, Out::kAdd, kWgmma},
      {"wgmma_o70b_zero_r64", 8192, 8192, 128, zero, 64, none, Out::kBf16, kWgmma},
      {"wgmma_zero_silu_r256", 4096, 2048, 128, zero, 256, none, Out::kSilu, kWgmma, 128},
      {"wgmma_partial_group_f32_r40", 176, 4096, 128, sym, 40, none, Out::kF32, kWgmma},
      {"wgmma_per_channel_zero_r100", 512, 2048, 2048, zero, 100, none, Out::kBf16, kWgmma},
      {"wgmma_g256_add_r64", 1024, 8192, 256, sym, 64, none, Out::kAdd, kWgmma},
      {"wgmma_g384_zero_add_r33", 512, 3072, 384, zero, 33, none, Out::kAdd, kWgmma},
      {"wgmma128_sym_r17", 1024, 4096, 128, sym, 17, none, Out::kBf16, kWgmma, 128},
      {"wgmma64_zero_silu_r129", 2048, 1024, 128, zero, 129, none, Out::kSilu, kWgmma, 64},
      // Clusters of 1 and 4 (the cases above: SetUp's 2), and 4 left
      // to 1 where it does not divide the row groups (2).
      {"wgmma_c1_down70b_add_r128", 8192, 28672, 128, sym, 128, none, Out::kAdd, kWgmma, 0, kOff, 0,
       1},
      {"wgmma_c1_zero_r33", 2048, 4096, 128, zero, 33, none, Out::kBf16, kWgmma, 128, kOff, 0, 1},
      {"wgmma_c4_silu_r64", 8192, 4096, 128, sym, 64, none, Out::kSilu, kWgmma, 0, kOff, 0, 4},
      {"wgmma_c4_zero_add_r200", 4096, 2048, 256, zero, 200, none, Out::kAdd, kWgmma, 0, kOff, 0,
       4},
      {"wgmma_c4_left_to_1_f32_r40", 176, 4096, 128, sym, 40, none, Out::kF32, kWgmma, 0, kOff, 0,
       4},
      // Tiles of 16 and 32 x rows, in clusters of 2 and 4 (8 rows a block),
      // and of 16 rows left to 1 block where 4 would leave 4 rows a block.
      {"wgmma16_sym_add_r16", 4096, 4096, 128, sym, 16, none, Out::kAdd, kWgmma, 16},
      {"wgmma32_zero_silu_r20", 2048, 2048, 128, zero, 20, none, Out::kSilu, kWgmma, 32, kOff, 0,
       4},
      {"wgmma16_c4_left_to_1_r3", 1024, 2048, 128, sym, 3, none, Out::kBf16, kWgmma, 16, kOff, 0,
       4},
      // ConsumeOverlap (clusters of 1): every tile, groups of one stage, two
      // (split-K cutting them), three and the whole row, an odd count of
      // stages (9), zero points, each output kind; and the same bytes as
      // without it.
      {"wgmma_ov_down70b_add_r128", 8192, 28672, 128, sym, 128, none, Out::kAdd, kWgmma, 0, kOff, 0,
       1, 0, true},
      {"wgmma_ov_zero_g256_r64", 1024, 8192, 256, zero, 64, none, Out::kBf16, kWgmma, 0, kOff, 0, 1,
       0, true},
      {"wgmma_ov_g384_zero_silu_r33", 2048, 3072, 384, zero, 33, none, Out::kSilu, kWgmma, 0, kOff,
       0, 1, 0, true},
      {"wgmma_ov16_partial_f32_r5", 176, 4096, 128, sym, 5, none, Out::kF32, kWgmma, 16, kOff, 0, 1,
       0, true},
      {"wgmma_ov32_per_channel_add_r20", 512, 2048, 2048, zero, 20, none, Out::kAdd, kWgmma, 32,
       kOff, 0, 1, 0, true},
      {"wgmma_ov_odd_stages_r40", 512, 1152, 128, sym, 40, none, Out::kBf16, kWgmma, 0, kOff, 0, 1,
       0, true},
      // ConsumeDoubleSums (groups of 128 columns, tiles of 16-64 rows): 70B
      // down at 64 rows (split K), an odd and an even count of stages in two
      // splits (9), a partial row group, zero points, each output kind; and
      // groups of 256 and tiles of 128 rows left to ConsumeOverlap. The same
      // bytes as without the overlap.
      {"wgmma_ds_down70b_add_r64", 8192, 28672, 128, sym, 64, none, Out::kAdd, kWgmma, 0, kOff, 0,
       1, 0, true, true},
      {"wgmma_ds32_zero_silu_r20", 2048, 2048, 128, zero, 20, none, Out::kSilu, kWgmma, 32, kOff, 0,
       1, 0, true, true},
      {"wgmma_ds16_partial_f32_r5", 176, 4096, 128, sym, 5, none, Out::kF32, kWgmma, 16, kOff, 0, 1,
       0, true, true},
      {"wgmma_ds_odd_stages_zero_r40", 512, 1152, 128, zero, 40, none, Out::kBf16, kWgmma, 0, kOff,
       0, 1, 0, true, true},
      {"wgmma_ds_g256_left_to_overlap_r64", 1024, 8192, 256, zero, 64, none, Out::kBf16, kWgmma, 0,
       kOff, 0, 1, 0, true, true},
      {"wgmma_ds128_left_to_overlap_r100", 2048, 2048, 128, sym, 100, none, Out::kAdd, kWgmma, 128,
       kOff, 0, 1, 0, true, true},
      // ConsumeScaled (the scale in the fragments): 70B down at 128 rows
      // (split K), groups of 256 and per-channel, zero points, an odd count
      // of stages, a partial row group, tiles of 16-128 rows, each output
      // kind; and a tile below the setting's rows left to ConsumeDoubleSums.
      {"wgmma_sc_down70b_add_r128", 8192, 28672, 128, sym, 128, none, Out::kAdd, kWgmma, 0, kOff, 0,
       1, 0, true, true, 128},
      {"wgmma_sc_zero_g256_r64", 1024, 8192, 256, zero, 64, none, Out::kBf16, kWgmma, 0, kOff, 0, 1,
       0, true, true, 16},
      {"wgmma_sc_per_channel_zero_silu_r100", 2048, 2048, 2048, zero, 100, none, Out::kSilu, kWgmma,
       0, kOff, 0, 1, 0, true, true, 16},
      {"wgmma_sc16_partial_f32_r5", 176, 4096, 128, sym, 5, none, Out::kF32, kWgmma, 16, kOff, 0, 1,
       0, true, true, 16},
      {"wgmma_sc32_odd_stages_zero_r20", 512, 1152, 128, zero, 20, none, Out::kBf16, kWgmma, 32,
       kOff, 0, 1, 0, true, true, 16},
      {"wgmma_sc128_left_to_ds_r40", 512, 1152, 128, sym, 40, none, Out::kAdd, kWgmma, 0, kOff, 0,
       1, 0, true, true, 128},
      // K in parts the launch would not pick (Int4GemmParams::wgmma_splits):
      // three under the scale in the fragments with a residual add, four of
      // zero-point groups with SiLU·mul.
      {"wgmma_split3_sc_add_r128", 1280, 8192, 128, sym, 128, none, Out::kAdd, kWgmma, 128, kOff, 0,
       1, 0, true, true, 128, 3},
      {"wgmma_split4_zero_silu_r100", 2048, 4096, 128, zero, 100, none, Out::kSilu, kWgmma, 128,
       kOff, 0, 1, 0, false, false, 0, 4},
      {"wgmma_auto_gateup8b_silu_r96", 28672, 4096, 128, sym, 96, none, Out::kSilu, kAuto, 0, kOff,
       17},
      // 70B o at 128 rows on kAuto: 64-row tiles where 128-row ones would
      // split K in short parts (Int4GemmWgmmaRows; on 132 SMs no split).
      {"wgmma_auto_o70b_add_r128", 8192, 8192, 128, sym, 128, none, Out::kAdd, kAuto, 0, kOff, 17},
      {"wgmma_auto_float_left_tiled_r96", 2048, 2048, 128, fl, 96, none, Out::kBf16, kAuto, 0, kOff,
       17},
  };
  // kAuto under int4_wgmma_split_from_rows 9, as served otherwise, each
  // taking kWgmma on 132 SMs: 70B o at 12 rows (64 tiles of 16 rows, K in 2
  // parts), 8B down at 13 (32 tiles, K in 4 parts), and 8B qkv at 15 under
  // int4_wgmma_split_max_grid_percent 75 (48 tiles, K in 2 parts: a grid of
  // 96 blocks).
  const auto split = [&](const char* name, int64_t n, int64_t k, int32_t rows, Out out,
                         int32_t max_grid_percent) {
    Int4Case c{name, n, k, 128, sym, rows, none, out, kAuto};
    c.wgmma_from_rows = 17;
    c.wgmma_cluster = 1;
    c.wgmma_overlap = c.wgmma_double_sums = c.wgmma_tail_split = true;
    c.wgmma_scaled_from_rows = 128;
    c.wgmma_split_from_rows = 9;
    c.wgmma_split_max_grid_percent = max_grid_percent;
    return c;
  };
  cases.push_back(split("wgmma_auto_split_o70b_add_r12", 8192, 8192, 12, Out::kAdd, 100));
  cases.push_back(split("wgmma_auto_split4_down8b_add_r13", 4096, 14336, 13, Out::kAdd, 100));
  cases.push_back(split("wgmma_auto_split_qkv8b_grid75_r15", 6144, 4096, 15, Out::kBf16, 75));
  // The last wave's tiles in parts (LaunchSettings::int4_wgmma_tail_split;
  // on 132 SMs): 140 tiles, the last 8 in 4 parts, under the scale in the
  // fragments with SiLU·mul; 136 tiles of zero points, the last 4 in 8
  // parts, with a residual add.
  // kGemv (1-8 rows): every offset kind and epilogue, groups of 32, 64, 96
  // (ending mid-tile), 128 and one a row, row groups of fewer than 8 tiles,
  // k tiles that leave warps short or idle (576 columns: 9 tiles over 8
  // warps), x's rows from 1 to 8, the RMSNorm prologue (up to 4 rows); and
  // kAuto taking it by the setting.
  const auto kGemv = engine::Int4GemmPath::kGemv;
  cases.insert(
      cases.end(),
      {
          {"gemv_qkv70b_r1", 10240, 8192, 128, sym, 1, none, Out::kBf16, kGemv},
          {"gemv_o70b_add_r1", 8192, 8192, 128, sym, 1, none, Out::kAdd, kGemv},
          {"gemv_down72b_padded_zero_add_r1", 8192, 29696, 128, zero, 1, none, Out::kAdd, kGemv},
          {"gemv_gateup_silu_zero_r3", 8192, 4096, 128, zero, 3, none, Out::kSilu, kGemv},
          {"gemv_gate72b_padded_g64_r2", 29696, 5120, 64, sym, 2, none, Out::kBf16, kGemv},
          {"gemv_smol_qkv_g32_r5", 960, 576, 32, fl, 5, none, Out::kBf16, kGemv},
          {"gemv_smol_gateup_silu_r7", 3072, 576, 32, fl, 7, none, Out::kSilu, kGemv},
          {"gemv_smol_down_add_r8", 576, 1536, 32, fl, 8, none, Out::kAdd, kGemv},
          {"gemv_g96_straddle_zero_add_r4", 512, 1152, 96, zero, 4, none, Out::kAdd, kGemv},
          {"gemv_per_channel_float_f32_r6", 2048, 4096, 4096, fl, 6, none, Out::kF32, kGemv},
          {"gemv_sym_g32_r8", 1024, 4096, 32, sym, 8, none, Out::kBf16, kGemv},
          {"gemv_tiny_f32_r1", 16, 64, 32, zero, 1, none, Out::kF32, kGemv},
          {"gemv_qkv70b_norm_r1", 10240, 8192, 128, sym, 1, norm, Out::kBf16, kGemv},
          {"gemv_gateup8b_norm_silu_zero_r2", 28672, 4096, 128, zero, 2, norm, Out::kSilu, kGemv},
          {"gemv_smol_qkv_g32_norm_r4", 960, 576, 32, fl, 4, norm, Out::kBf16, kGemv},
          {"gemv_k12288_g64_norm_r3", 1024, 12288, 64, sym, 3, norm, Out::kBf16, kGemv},
      });
  Int4Case gemv_auto{"gemv_auto_down8b_add_r1", 4096, 14336, 128, sym, 1, none, Out::kAdd};
  gemv_auto.gemv_max_rows = 8;
  cases.push_back(gemv_auto);
  for (Int4Case tail : {Int4Case{"wgmma_tail_sc_silu_r128", 17920, 2048, 128, sym, 128, none,
                                 Out::kSilu, kWgmma, 0, kOff, 0, 1, 0, true, true, 128, 0, true},
                        Int4Case{"wgmma_tail_zero_add_r100", 17408, 4096, 128, zero, 100, none,
                                 Out::kAdd, kWgmma, 0, kOff, 0, 1, 0, true, true, 128, 0, true}}) {
    tail.expect_tail_parts = true;
    cases.push_back(tail);
  }
  return cases;
}

// A kFallback case runs with LaunchSettings::int4_cluster_split_k,
// one with Int4Case::wgmma_from_rows with LaunchSettings::int4_wgmma_from_rows
// (0 otherwise: kAuto never takes kWgmma), and kWgmma's clusters are of 2
// blocks unless the case sets Int4Case::wgmma_cluster.
class Int4GemmTest : public ::testing::TestWithParam<Int4Case> {
 protected:
  void SetUp() override {
    saved_ = engine::GetLaunchSettings();
    engine::LaunchSettings s = saved_;
    s.int4_cluster_split_k = GetParam().cluster == Int4Case::Cluster::kFallback;
    s.int4_wgmma_from_rows = GetParam().wgmma_from_rows;
    s.int4_wgmma_cluster = 2;
    s.int4_wgmma_overlap = GetParam().wgmma_overlap;
    s.int4_wgmma_double_sums = GetParam().wgmma_double_sums;
    s.int4_wgmma_scaled_from_rows = GetParam().wgmma_scaled_from_rows;
    s.int4_wgmma_tail_split = GetParam().wgmma_tail_split;
    s.int4_wgmma_split_from_rows = GetParam().wgmma_split_from_rows;
    s.int4_wgmma_split_max_grid_percent = GetParam().wgmma_split_max_grid_percent;
    s.int4_gemv_max_rows = GetParam().gemv_max_rows;
    ASSERT_TRUE(engine::SetLaunchSettings(s).ok());
  }
  void TearDown() override { ASSERT_TRUE(engine::SetLaunchSettings(saved_).ok()); }

 private:
  engine::LaunchSettings saved_;
};

TEST_P(Int4GemmTest, MatchesReference) {
  const Int4Case& c = GetParam();
  const uint32_t seed = std::hash<std::string>()(c.name) & 0xffff;
  std::mt19937 rng = SeededRng(seed, 41);
  const engine::Int4Matrix m = RandomInt4Matrix(c.n, c.k, c.group, c.offsets, seed);
  ASSERT_TRUE(m.Validate(c.name).ok());
  engine::Int4Packed packed = engine::MakeInt4Packed(c.n, c.k, c.group, c.offsets);
  ASSERT_TRUE(engine::PackInt4Rows(m, engine::ConcatRows(c.n, 0), c.n, &packed).ok());
  const int64_t x_stride = c.k + 24;  // rows not packed
  std::vector<uint16_t> x = RandomBf16(c.rows * x_stride, rng, -2.0f, 2.0f);
  std::vector<uint16_t> norm = RandomBf16(c.k, rng, 0.5f, 1.5f);
  const int64_t y_cols = c.out == Out::kSilu ? c.n / 2 : c.n;
  std::vector<uint16_t> y16 = RandomBf16(c.rows * y_cols, rng);  // the residual when adding
  std::vector<float> y32(c.rows * y_cols, 0.0f);
  const bool f32 = c.out == Out::kF32;
  engine::Int4GemmParams p{.w = Int4View(packed, m),
                           .prologue = c.prologue,
                           .x = x.data(),
                           .x_row_stride = x_stride,
                           .norm_weight = norm.data(),
                           .eps = 1e-5f,
                           .y = f32 ? static_cast<void*>(y32.data()) : y16.data(),
                           .y_dtype = f32 ? DType::kF32 : DType::kBF16,
                           .add_to_y = c.out == Out::kAdd,
                           .silu_mul_y = c.out == Out::kSilu,
                           .rows = c.rows,
                           .path = c.path,
                           .tile_rows = c.tile_rows,
                           .cluster = c.wgmma_cluster,
                           .stream_cluster = c.stream_cluster,
                           .wgmma_splits = c.wgmma_splits};
  const std::vector<uint16_t> residual = y16;
  ASSERT_TRUE(Int4GemmRefOnCores(p).ok());

  const DeviceInt4 dw(packed, c.n);
  const int sms = dw.sms;
  DeviceBuf<uint16_t> dx(x), dnorm(norm), dy16(y16.size());
  DeviceBuf<float> dy32(y32.size());
  dw.Into(&p);
  p.x = dx.get();
  p.norm_weight = dnorm.get();
  p.y = f32 ? static_cast<void*>(dy32.get()) : dy16.get();
  const absl::StatusOr<engine::Int4GemmClusterPlan> plan = engine::Int4GemmClusterSplit(p);
  ASSERT_TRUE(plan.ok()) << plan.status();
  if (c.cluster != Int4Case::Cluster::kOff) {
    EXPECT_EQ(plan->size, c.stream_cluster)
        << "cluster size " << plan->size << " for " << plan->row_groups << " row groups of "
        << plan->k_tiles << " k tiles on a grid of " << plan->capacity
        << " blocks (Int4GemmClusterSize: "
        << engine::Int4GemmClusterSize(plan->row_groups, plan->k_tiles, plan->capacity)
        << "); clusters resident at once of 2, 4, 8 blocks: " << plan->resident[2] << ", "
        << plan->resident[4] << ", " << plan->resident[8];
  } else {
    EXPECT_EQ(plan->size, 0);
  }
  ExpectSameBytesTwice(
      [&] {
        if (c.out == Out::kAdd) dy16.Upload(residual);
      },
      [&] { return engine::Int4Gemm(p, nullptr); }, p.y, f32 ? y32.size() * 4 : y16.size() * 2);
  if (HasFatalFailure()) return;
  const std::vector<uint8_t> left = dw.workspace.Download();
  const int64_t counters = engine::Int4GemmWorkspace(c.n, sms).counter_bytes;
  EXPECT_TRUE(std::all_of(left.end() - counters, left.end(), [](uint8_t b) { return b == 0; }))
      << "arrival counters not left zero";
  if (c.gemv_max_rows > 0) {
    EXPECT_TRUE(engine::Int4GemmUsesGemv(p, engine::GetLaunchSettings())) << "kAuto not on kGemv";
  }
  const bool scaled = engine::Int4GemmWgmmaScaled(p, engine::GetLaunchSettings(), sms);
  if (c.wgmma_split_from_rows != 0) {
    EXPECT_TRUE(engine::Int4GemmAutoWgmma(p, engine::GetLaunchSettings(), sms))
        << "kAuto does not take kWgmma on " << sms << " SMs";
    EXPECT_EQ(engine::Int4GemmWgmmaTail(p, engine::GetLaunchSettings(), sms).parts, 1)
        << "a launch that splits K has no last wave in parts";
  }
  if (c.expect_tail_parts) {
    EXPECT_GT(engine::Int4GemmWgmmaTail(p, engine::GetLaunchSettings(), sms).parts, 1)
        << "the last wave is not split on " << sms << " SMs";
  }
  const std::vector<float> want = f32 ? y32 : ToFloats(y16);
  if (scaled) {
    // ConsumeScaled rounds each weight twice (s to bf16, then s (q - z)),
    // within 2^-8 of it: an output's error is a sum of k independent
    // roundings, about 2^-9 sqrt(2/3) of its terms' root sum of squares,
    // which the outputs' rms is about. The BF16 tolerance, its NMSE and an
    // absolute slack of 2^-5 the rms (some 19 standard deviations of that
    // error).
    double squares = 0;
    for (float v : want) squares += double{v} * v;
    const double rms = std::sqrt(squares / static_cast<double>(want.size()));
    Tolerance tol = Tolerance::For(DType::kBF16);
    tol.atol += rms / 32.0;
    EXPECT_ALL_CLOSE(f32 ? dy32.Download() : ToFloats(dy16.Download()), want, tol);
  } else if (f32) {
    EXPECT_ALL_CLOSE(dy32.Download(), want, (Tolerance{1e-3, 1e-3, 1e-7}));
  } else {
    EXPECT_ALL_CLOSE(ToFloats(dy16.Download()), want, Tolerance::For(DType::kBF16));
  }
  // Launches p again (y reset for a residual add): y's bytes as before, `how`
  // it ran naming a mismatch.
  auto again_same_bytes = [&](const char* how) {
    const std::vector<float> was32 = f32 ? dy32.Download() : std::vector<float>{};
    const std::vector<uint16_t> was16 = f32 ? std::vector<uint16_t>{} : dy16.Download();
    if (c.out == Out::kAdd) dy16.Upload(residual);
    ASSERT_TRUE(engine::Int4Gemm(p, nullptr).ok());
    ASSERT_CUDA_OK(cudaDeviceSynchronize());
    if (f32) {
      EXPECT_EQ(dy32.Download(), was32) << how;
    } else {
      EXPECT_EQ(dy16.Download(), was16) << how;
    }
  };
  if (c.path == engine::Int4GemmPath::kWgmma || c.wgmma_from_rows > 0) {
    // The staged epilogue writes the bytes of the direct one (its
    // comparison arm).
    engine::LaunchSettings s = engine::GetLaunchSettings();
    s.int4_wgmma_staged_epilogue = false;
    ASSERT_TRUE(engine::SetLaunchSettings(s).ok());
    again_same_bytes("with the direct epilogue");
    if (HasFatalFailure()) return;
    s.int4_wgmma_staged_epilogue = true;
    if (scaled) {  // and ConsumeScaled's other order the same sums
      s.int4_wgmma_scaled_wait_first = true;
      ASSERT_TRUE(engine::SetLaunchSettings(s).ok());
      again_same_bytes("waiting for a stage before the next");
      if (HasFatalFailure()) return;
      s.int4_wgmma_scaled_wait_first = false;
    }
    // The next kernel let launch before the wait: the same bytes.
    s.int4_wgmma_early_dependents = true;
    ASSERT_TRUE(engine::SetLaunchSettings(s).ok());
    again_same_bytes("letting the next kernel launch before the wait");
    if (HasFatalFailure()) return;
    s.int4_wgmma_early_dependents = false;
    ASSERT_TRUE(engine::SetLaunchSettings(s).ok());
  }
  if (c.wgmma_overlap && !scaled) {
    // ConsumeOverlap and ConsumeDoubleSums make Consume's sums in Consume's
    // order: the same bytes without the overlap (which takes both off).
    engine::LaunchSettings s = engine::GetLaunchSettings();
    s.int4_wgmma_overlap = false;
    ASSERT_TRUE(engine::SetLaunchSettings(s).ok());
    again_same_bytes("without the overlap");
    if (HasFatalFailure()) return;
  }
  if (engine::Int4GemmUsesGemv(p, engine::GetLaunchSettings()) || engine::Int4GemmUsesTiled(p) ||
      c.path == engine::Int4GemmPath::kWgmma || c.wgmma_from_rows > 0) {
    return;
  }
  // kStream again with its timeline stamps (Int4GemmParams::trace): the same
  // output bit for bit, and each launched warp's stamps in order.
  DeviceBuf<uint64_t> trace(engine::Int4GemmTraceWords(sms));
  ASSERT_CUDA_OK(cudaMemset(trace.get(), 0, trace.size() * 8));
  p.trace = trace.get();
  again_same_bytes("with a trace");
  if (HasFatalFailure()) return;
  const std::vector<uint64_t> stamps = trace.Download();
  constexpr int kWords = engine::kInt4GemmTraceStamps;
  int warps = 0;
  for (size_t i = 0; i + kWords <= stamps.size(); i += kWords) {
    if (stamps[i] == 0) continue;
    ++warps;
    for (int w = 0; w < 3; ++w) {
      EXPECT_LE(stamps[i + w], stamps[i + w + 1])
          << "warp record " << i / kWords << ", stamp " << w;
    }
    EXPECT_LT(stamps[i + 4], static_cast<uint64_t>(sms)) << "warp record " << i / kWords;
  }
  EXPECT_GT(warps, 0);
  EXPECT_EQ(warps % engine::kInt4GemmTraceWarps, 0) << "every consumer warp of a block writes";
  if (plan->size > 0) {  // a block a (row group, rank)
    const int64_t row_groups = (c.n + engine::kInt4GemmRowGroup - 1) / engine::kInt4GemmRowGroup;
    EXPECT_EQ(warps / engine::kInt4GemmTraceWarps, row_groups * plan->size);
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, Int4GemmTest, ::testing::ValuesIn(Cases()),
                         [](const auto& info) { return info.param.name; });

// Int4DequantizeBf16 against its reference: equal bit for bit (both compute
// each value in fp32 as Int4Value does and round once).
TEST(Int4DequantTest, MatchesReferenceExactly) {
  // The last flag: columns in act order (a shuffled column map).
  const std::tuple<int64_t, int64_t, int32_t, Int4Offsets, bool, bool> cases[] = {
      {960, 576, 32, Int4Offsets::kFloat, false, false},
      {3072, 576, 32, Int4Offsets::kFloat, true, false},
      {4096, 1152, 96, Int4Offsets::kZero, false, false},
      {2048, 4096, 128, Int4Offsets::kSymmetric, true, false},
      {512, 4096, 4096, Int4Offsets::kZero, false, false},
      {1024, 4096, 128, Int4Offsets::kZero, false, true},
      {3072, 576, 64, Int4Offsets::kSymmetric, true, true}};
  for (const auto& [n, k, group, offsets, gate_up, act_order] : cases) {
    SCOPED_TRACE(::testing::Message() << n << "x" << k << " g" << group << " gate_up " << gate_up
                                      << " act_order " << act_order);
    std::vector<int32_t> columns;
    if (act_order) {
      columns.resize(k);
      std::iota(columns.begin(), columns.end(), 0);
      std::mt19937 rng(k);
      std::shuffle(columns.begin(), columns.end(), rng);
    }
    const engine::Int4Matrix m = RandomInt4Matrix(n, k, group, offsets, n + k);
    engine::Int4Packed packed = engine::MakeInt4Packed(n, k, group, offsets);
    ASSERT_TRUE(engine::PackInt4Rows(m, engine::ConcatRows(n, 0), n, &packed).ok());
    std::vector<uint16_t> want(n * k);
    engine::Int4DequantParams p{
        .w = {.codes = packed.codes.data(),
              .scales = packed.scales.data(),
              .offsets = packed.offsets.empty() ? nullptr : packed.offsets.data(),
              .n = n,
              .k = k,
              .group = group,
              .offset_kind = offsets},
        .out = want.data(),
        .gate_up = gate_up,
        .columns = act_order ? columns.data() : nullptr};
    ASSERT_TRUE(engine::Int4DequantizeBf16Ref(p).ok());
    DeviceBuf<int32_t> dcolumns(std::max<size_t>(columns.size(), 1));
    if (act_order) {
      dcolumns.Upload(columns);
      p.columns = dcolumns.get();
    }
    DeviceBuf<uint8_t> dcodes(packed.codes);
    DeviceBuf<uint32_t> dscales(packed.scales),
        doffsets(std::max<size_t>(packed.offsets.size(), 1));
    if (!packed.offsets.empty()) doffsets.Upload(packed.offsets);
    DeviceBuf<uint16_t> dout(want.size());
    p.w.codes = dcodes.get();
    p.w.scales = dscales.get();
    p.w.offsets = packed.offsets.empty() ? nullptr : doffsets.get();
    p.out = dout.get();
    const absl::Status st = engine::Int4DequantizeBf16(p, nullptr);
    ASSERT_TRUE(st.ok()) << st;
    EXPECT_EQ(dout.Download(), want);
  }
}

// SmolLM2's four projections (groups of 32 with mins) launched back to back
// on one stream with programmatic dependent launch, three times over, on one
// workspace (as a decode step runs them: the residual adds accumulate), then
// the same captured in a CUDA graph and replayed: against the reference run
// the same way. Catches races between launches that one launch at a time
// cannot show.
TEST(Int4GemmChainTest, BackToBackLaunchesMatchReference) {
  struct Proj {
    int64_t n, k;
    GemvPrologue prologue;
    Out out;
  };
  const Proj projs[] = {{960, 576, GemvPrologue::kRmsNorm, Out::kBf16},
                        {576, 576, GemvPrologue::kNone, Out::kAdd},
                        {3072, 576, GemvPrologue::kRmsNorm, Out::kSilu},
                        {576, 1536, GemvPrologue::kNone, Out::kAdd}};
  for (const int32_t rows : {1, 5}) {
    SCOPED_TRACE(::testing::Message() << rows << " rows");
    std::mt19937 rng = SeededRng(rows, 43);
    std::vector<engine::Int4Packed> packed;
    std::vector<engine::Int4GemmParams> host, dev;
    std::vector<std::vector<uint16_t>> xs, ys;
    std::vector<std::unique_ptr<DeviceBuf<uint8_t>>> dcodes;
    std::vector<std::unique_ptr<DeviceBuf<uint32_t>>> dwords;
    std::vector<std::unique_ptr<DeviceBuf<uint16_t>>> dbufs;
    std::vector<uint16_t> norm = RandomBf16(1536, rng, 0.5f, 1.5f);
    DeviceBuf<uint16_t> dnorm(norm);
    int device = 0, sms = 0;
    ASSERT_CUDA_OK(cudaGetDevice(&device));
    ASSERT_CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    const int64_t ws_bytes = engine::Int4GemmWorkspaceBytes(3072, sms);
    DeviceBuf<uint8_t> ws(ws_bytes);
    ASSERT_CUDA_OK(cudaMemset(ws.get(), 0, ws_bytes));
    packed.reserve(4);
    xs.reserve(4);
    ys.reserve(4);
    for (int i = 0; i < 4; ++i) {
      const Proj& pr = projs[i];
      const engine::Int4Matrix m =
          RandomInt4Matrix(pr.n, pr.k, 32, Int4Offsets::kFloat, 100 + i + rows);
      packed.push_back(engine::MakeInt4Packed(pr.n, pr.k, 32, Int4Offsets::kFloat));
      ASSERT_TRUE(engine::PackInt4Rows(m, engine::ConcatRows(pr.n, 0), pr.n, &packed[i]).ok());
      xs.push_back(RandomBf16(rows * pr.k, rng, -2.0f, 2.0f));
      ys.push_back(RandomBf16(rows * (pr.out == Out::kSilu ? pr.n / 2 : pr.n), rng));
      engine::Int4GemmParams p{.w = {.codes = packed[i].codes.data(),
                                     .scales = packed[i].scales.data(),
                                     .offsets = packed[i].offsets.data(),
                                     .n = pr.n,
                                     .k = pr.k,
                                     .group = 32,
                                     .offset_kind = Int4Offsets::kFloat},
                               .prologue = rows <= 4 ? pr.prologue : GemvPrologue::kNone,
                               .x = xs[i].data(),
                               .x_row_stride = pr.k,
                               .norm_weight = norm.data(),
                               .y = ys[i].data(),
                               .add_to_y = pr.out == Out::kAdd,
                               .silu_mul_y = pr.out == Out::kSilu,
                               .rows = rows,
                               .workspace = ws.get(),
                               .workspace_bytes = ws_bytes};
      host.push_back(p);
      dcodes.push_back(std::make_unique<DeviceBuf<uint8_t>>(packed[i].codes));
      dwords.push_back(std::make_unique<DeviceBuf<uint32_t>>(packed[i].scales));
      dwords.push_back(std::make_unique<DeviceBuf<uint32_t>>(packed[i].offsets));
      dbufs.push_back(std::make_unique<DeviceBuf<uint16_t>>(xs[i]));
      dbufs.push_back(std::make_unique<DeviceBuf<uint16_t>>(ys[i]));
      p.w.codes = dcodes.back()->get();
      p.w.scales = dwords[2 * i]->get();
      p.w.offsets = dwords[2 * i + 1]->get();
      p.x = dbufs[2 * i]->get();
      p.y = dbufs[2 * i + 1]->get();
      p.norm_weight = dnorm.get();
      dev.push_back(p);
    }
    cudaStream_t stream;
    ASSERT_CUDA_OK(cudaStreamCreate(&stream));
    auto launch_all = [&]() -> absl::Status {
      for (int rep = 0; rep < 3; ++rep) {
        for (const engine::Int4GemmParams& p : dev) RETURN_IF_ERROR(engine::Int4Gemm(p, stream));
      }
      return absl::OkStatus();
    };
    for (int rep = 0; rep < 3; ++rep) {
      for (const engine::Int4GemmParams& p : host) ASSERT_TRUE(Int4GemmRefOnCores(p).ok());
    }
    ASSERT_TRUE(launch_all().ok());
    ASSERT_CUDA_OK(cudaStreamSynchronize(stream));
    for (int i = 0; i < 4; ++i) {
      EXPECT_ALL_CLOSE(ToFloats(dbufs[2 * i + 1]->Download()), ToFloats(ys[i]),
                       Tolerance::For(DType::kBF16))
          << "projection " << i << ", eager";
    }
    // The same as a graph: the outputs start again from the residuals.
    std::vector<std::vector<uint16_t>> start(4);
    for (int i = 0; i < 4; ++i) {
      start[i] = RandomBf16(ys[i].size(), rng);
      dbufs[2 * i + 1]->Upload(start[i]);
      host[i].y = start[i].data();
    }
    for (int rep = 0; rep < 3; ++rep) {
      for (const engine::Int4GemmParams& p : host) ASSERT_TRUE(Int4GemmRefOnCores(p).ok());
    }
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    ASSERT_CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    const absl::Status captured = launch_all();
    ASSERT_CUDA_OK(cudaStreamEndCapture(stream, &graph));
    ASSERT_TRUE(captured.ok()) << captured;
    ASSERT_CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
    ASSERT_CUDA_OK(cudaGraphLaunch(exec, stream));
    ASSERT_CUDA_OK(cudaStreamSynchronize(stream));
    for (int i = 0; i < 4; ++i) {
      EXPECT_ALL_CLOSE(ToFloats(dbufs[2 * i + 1]->Download()), ToFloats(start[i]),
                       Tolerance::For(DType::kBF16))
          << "projection " << i << ", graph";
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(stream);
  }
}

TEST(Int4GemmErrorTest, NamesTheUnsupportedShape) {
  engine::Int4GemmParams p;
  p.w = {.codes = &p, .scales = &p, .n = 40, .k = 64, .group = 32};
  p.x = &p;
  p.y = &p;
  p.x_row_stride = 64;
  p.rows = 1;
  const absl::Status st = engine::Int4Gemm(p, nullptr);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(st.message().find("n=40"), std::string::npos) << st;
  p.w.n = 48;
  p.rows = engine::kInt4GemmMaxRows + 1;
  EXPECT_EQ(engine::Int4Gemm(p, nullptr).code(), absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace onecard::testing
