// Int4GemmRef: the spec of Int4Gemm (see int4_gemm.h): the prologue through
// RmsNormRef (BF16), W's fp32 values from the packed layout (Int4Value), a
// plain fp32 dot per output (times x_sum_sq's r), the epilogue's roundings
// (SiluMulRef for the gate/up pairs), then a fold_norm's outputs. Also CheckInt4GemmParams and the
// workspace's layout, shared with the CUDA kernel. Tested by
// tests/engine/kernels/int4_gemm_ref_test.cc; the spec of tests/gpu/int4_gemm_test.cc.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/kernels/bf16.h"
#include "engine/kernels/int4_gemm.h"
#include "engine/kernels/int4_matrix.h"
#include "engine/kernels/ref_util.h"
#include "engine/kernels/rms_norm.h"
#include "engine/kernels/silu_mul.h"

namespace onecard::engine {
namespace {

absl::Status Error(absl::string_view op, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(op, ": ", what));
}

}  // namespace

void Int4WeightRowRef(const Int4WeightView& w, int64_t r, std::vector<float>* row) {
  const auto* codes = static_cast<const uint8_t*>(w.codes);
  const auto* scales = static_cast<const uint32_t*>(w.scales);
  const auto* offsets = static_cast<const uint32_t*>(w.offsets);
  const int64_t groups = w.k / w.group;
  row->resize(w.k);
  for (int64_t c = 0; c < w.k; ++c) {
    const Int4CodePos code = Int4CodePosition(r, c, w.k, w.n);
    const Int4ScalePos sp = Int4ScalePosition(r, c / w.group, groups, w.n);
    const auto half = [&](const uint32_t* words) {
      return words == nullptr ? uint16_t{0}
                              : static_cast<uint16_t>(words[sp.word] >> (16 * sp.half));
    };
    (*row)[c] = Int4Value(w.offset_kind, (codes[code.byte] >> code.shift) & 0xF, half(scales),
                          half(offsets));
  }
}

Int4GemmWorkspaceLayout Int4GemmWorkspace(int64_t n, int32_t num_sms) {
  const int64_t row_groups = (n + kInt4GemmRowGroup - 1) / kInt4GemmRowGroup;
  Int4GemmWorkspaceLayout l;
  l.slot_bytes = (row_groups + int64_t{num_sms} * kInt4GemmMaxBlocksPerSm) * kInt4GemmSlotBytes;
  l.counter_bytes = (n + kInt4TileRows - 1) / kInt4TileRows * 4;  // one a row tile
  l.total_bytes = (l.slot_bytes + l.counter_bytes + 255) / 256 * 256;
  return l;
}

int64_t Int4GemmWorkspaceBytes(int64_t max_n, int32_t num_sms) {
  return Int4GemmWorkspace(max_n, num_sms).total_bytes;
}

int32_t Int4GemmClusterSize(int64_t row_groups, int64_t k_tiles, int64_t capacity) {
  for (int32_t g = kInt4GemmMaxCluster; g >= 2; g /= 2) {
    const int64_t blocks = row_groups * g;
    if (blocks <= capacity && 20 * blocks >= 19 * capacity && k_tiles >= 2 * g) return g;
  }
  return 0;
}

bool Int4GemmUsesTiled(const Int4GemmParams& p) {
  switch (p.path) {
    case Int4GemmPath::kStream:
      return false;
    case Int4GemmPath::kTiled:
      return true;
    case Int4GemmPath::kWgmma:
    case Int4GemmPath::kGemv:
      return false;
    case Int4GemmPath::kAuto:
      break;
  }
  return p.rows >= kInt4GemmTiledFromRows && p.prologue == GemvPrologue::kNone &&
         !Int4GemmFoldsNorm(p);
}

bool Int4GemmGemvFits(const Int4GemmParams& p) {
  return p.rows >= 1 && p.rows <= kInt4GemmGemvMaxRows && !Int4GemmFoldsNorm(p) &&
         p.trace == nullptr && Int4GemmGemvSmemBytes(p.rows, p.w.k) <= kInt4GemmGemvMaxSmemBytes &&
         reinterpret_cast<uintptr_t>(p.x) % 16 == 0 &&
         (p.prologue == GemvPrologue::kNone ||
          reinterpret_cast<uintptr_t>(p.norm_weight) % 16 == 0);
}

bool Int4GemmUsesGemv(const Int4GemmParams& p, const LaunchSettings& settings) {
  if (p.path == Int4GemmPath::kGemv) return true;
  return p.path == Int4GemmPath::kAuto && p.rows <= settings.int4_gemv_max_rows &&
         Int4GemmGemvFits(p);
}

bool Int4GemmWgmmaFits(const Int4GemmParams& p) {
  return p.w.offset_kind != Int4Offsets::kFloat && p.w.group % kInt4WgmmaStageCols == 0 &&
         p.w.k % kInt4WgmmaStageCols == 0 && p.prologue == GemvPrologue::kNone &&
         !Int4GemmFoldsNorm(p) && reinterpret_cast<uintptr_t>(p.x) % 16 == 0;
}

int64_t Int4TileSplits(int64_t tiles, int64_t resident, int64_t k_stages, int64_t slots,
                       int64_t n_tiles) {
  int64_t splits = std::max<int64_t>(1, resident / tiles);
  splits = std::min(splits, std::max<int64_t>(1, k_stages / 4));
  splits = std::min(splits, slots / tiles);
  return tiles > n_tiles || splits < 1 ? 1 : splits;
}

namespace {

int64_t WgmmaTiles(const Int4GemmParams& p, int32_t tile_rows) {
  const int64_t row_groups = (p.w.n + kInt4GemmRowGroup - 1) / kInt4GemmRowGroup;
  return row_groups * ((p.rows + tile_rows - 1) / tile_rows);
}

// A block's partial sums: 256 consumer threads x tile_rows / 2 floats.
int64_t WgmmaSlots(const Int4GemmParams& p, int32_t tile_rows, int32_t num_sms) {
  return Int4GemmWorkspace(p.w.n, num_sms).slot_bytes / (int64_t{tile_rows} * 512);
}

int64_t AutoWgmmaSplits(const Int4GemmParams& p, int32_t tile_rows, int32_t num_sms) {
  return Int4TileSplits(WgmmaTiles(p, tile_rows), num_sms, p.w.k / kInt4WgmmaStageCols,
                        WgmmaSlots(p, tile_rows, num_sms), p.w.n / kInt4TileRows);
}

}  // namespace

int64_t Int4GemmWgmmaSplits(const Int4GemmParams& p, int32_t tile_rows, int32_t num_sms) {
  return p.wgmma_splits != 0 ? p.wgmma_splits : AutoWgmmaSplits(p, tile_rows, num_sms);
}

absl::Status CheckInt4GemmWgmmaSplits(const Int4GemmParams& p, int32_t tile_rows, int64_t splits,
                                      int32_t num_sms) {
  if (splits <= 1) return absl::OkStatus();
  const int64_t tiles = WgmmaTiles(p, tile_rows);
  const int64_t slots = WgmmaSlots(p, tile_rows, num_sms);
  if (tiles * splits > slots || tiles > p.w.n / kInt4TileRows) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Int4Gemm: wgmma_splits=", splits, " of ", tiles, " tiles of ", tile_rows, " x rows needs ",
        tiles * splits, " partial-sum slots and ", tiles, " counters; the workspace for n=", p.w.n,
        " on ", num_sms, " SMs holds ", slots, " and ", p.w.n / kInt4TileRows));
  }
  return absl::OkStatus();
}

Int4WgmmaTail Int4GemmWgmmaTail(const Int4GemmParams& p, const LaunchSettings& settings,
                                int32_t num_sms) {
  const int32_t tile_rows = Int4GemmWgmmaRows(p, settings, num_sms);
  const int64_t tiles = WgmmaTiles(p, tile_rows);
  Int4WgmmaTail tail{.whole = tiles};
  if (!settings.int4_wgmma_tail_split || p.wgmma_splits != 0) return tail;
  const int64_t last = tiles % num_sms;
  if (tiles <= num_sms || last == 0 || Int4GemmWgmmaCluster(p, settings, num_sms) != 1 ||
      Int4GemmWgmmaSplits(p, tile_rows, num_sms) != 1 || tiles > p.w.n / kInt4TileRows) {
    return tail;
  }
  const int64_t stages = p.w.k / kInt4WgmmaStageCols;
  int64_t parts = std::min({num_sms / last, stages / 4, WgmmaSlots(p, tile_rows, num_sms) / last});
  if (parts < 2) return tail;
  const int64_t per_part = (stages + parts - 1) / parts;  // stages
  tail.whole = tiles - last;
  tail.parts = (stages + per_part - 1) / per_part;
  return tail;
}

int32_t Int4GemmWgmmaRows(const Int4GemmParams& p, const LaunchSettings& settings,
                          int32_t num_sms) {
  if (p.tile_rows != 0) return p.tile_rows;
  if (p.rows <= 64) return p.rows <= 16 ? 16 : p.rows <= 32 ? 32 : 64;
  const int64_t splits = AutoWgmmaSplits(p, 128, num_sms);
  const int64_t split_stages = p.w.k / kInt4WgmmaStageCols / splits;
  return splits > 1 && split_stages < settings.int4_wgmma_min_split_stages ? 64 : 128;
}

bool Int4GemmAutoWgmma(const Int4GemmParams& p, const LaunchSettings& settings, int32_t num_sms) {
  if (!Int4GemmWgmmaFits(p)) return false;
  const int32_t from = settings.int4_wgmma_from_rows;
  if (from > 0 && p.rows >= from) return true;
  const int32_t split_from = settings.int4_wgmma_split_from_rows;
  if (split_from <= 0 || p.rows < split_from) return false;
  const int32_t tile_rows = Int4GemmWgmmaRows(p, settings, num_sms);
  const int64_t splits = AutoWgmmaSplits(p, tile_rows, num_sms);
  return splits > 1 && WgmmaTiles(p, tile_rows) * splits * 100 <=
                           int64_t{num_sms} * settings.int4_wgmma_split_max_grid_percent;
}

int32_t Int4GemmWgmmaCluster(const Int4GemmParams& p, const LaunchSettings& settings,
                             int32_t num_sms) {
  const int32_t g = p.cluster != 0 ? p.cluster : settings.int4_wgmma_cluster;
  const int64_t row_groups = (p.w.n + kInt4GemmRowGroup - 1) / kInt4GemmRowGroup;
  return g > 1 && row_groups % g == 0 && Int4GemmWgmmaRows(p, settings, num_sms) / g >= 8 ? g : 1;
}

bool Int4GemmWgmmaScaled(const Int4GemmParams& p, const LaunchSettings& settings, int32_t num_sms) {
  const int32_t from = settings.int4_wgmma_scaled_from_rows;
  return Int4GemmWgmmaCluster(p, settings, num_sms) == 1 && settings.int4_wgmma_overlap &&
         from > 0 && Int4GemmWgmmaRows(p, settings, num_sms) >= from;
}

int32_t Int4GemmTiledRows(const Int4GemmParams& p) {
  if (p.tile_rows != 0) return p.tile_rows;
  if (p.rows <= 16) return 16;
  if (p.rows <= 32) return 32;
  // 64 past 32 rows: 128-row tiles (one block an SM) were no faster over a
  // whole layer at 128 and 256 rows (kernels-int4 on the H200:
  // bench/results, 4-bit page).
  return 64;
}

absl::Status CheckInt4GemmParams(const Int4GemmParams& p, absl::string_view op) {
  const Int4WeightView& w = p.w;
  if (w.n <= 0 || w.n % kInt4TileRows != 0 || w.k <= 0 || w.k % kInt4TileCols != 0 ||
      w.k > kInt4MaxK || w.group < kInt4MinGroup || w.group % kInt4MinGroup != 0 ||
      w.k % w.group != 0) {
    return absl::UnimplementedError(
        absl::StrCat(op, ": weight n=", w.n, " k=", w.k, " group=", w.group,
                     " is not supported; supported: n % 16 == 0, k % 64 == 0 up to ", kInt4MaxK,
                     ", group a multiple of 32 dividing k"));
  }
  if (p.rows < 1 || p.rows > kInt4GemmMaxRows) {
    return absl::UnimplementedError(absl::StrCat(op, ": rows=", p.rows, " is not supported; ",
                                                 "supported: 1 to ", kInt4GemmMaxRows));
  }
  if (p.prologue == GemvPrologue::kSiluMul ||
      (p.prologue == GemvPrologue::kRmsNorm &&
       (p.rows > kInt4GemmMaxNormRows || p.path == Int4GemmPath::kTiled ||
        p.path == Int4GemmPath::kWgmma))) {
    return absl::UnimplementedError(absl::StrCat(
        op, ": prologue is not supported for ", p.rows, " rows on this path; supported: none, ",
        "or RMSNorm up to ", kInt4GemmMaxNormRows, " rows on the kStream, kGemv or kAuto path"));
  }
  if (Int4GemmFoldsNorm(p)) {
    const char* field = p.x_sum_sq != nullptr ? "x_sum_sq" : "fold_norm";
    if (p.rows > kInt4GemmFoldMaxRows || p.prologue != GemvPrologue::kNone ||
        (p.path != Int4GemmPath::kStream && p.path != Int4GemmPath::kAuto)) {
      return absl::UnimplementedError(absl::StrCat(
          op, ": ", field, " with rows=", p.rows,
          p.prologue == GemvPrologue::kNone ? "" : " and a prologue",
          p.path == Int4GemmPath::kStream || p.path == Int4GemmPath::kAuto ? "" : " off kStream",
          "; a folded RMSNorm takes up to ", kInt4GemmFoldMaxRows,
          " rows, no prologue, path kStream or kAuto"));
    }
    if (reinterpret_cast<uintptr_t>(p.x_sum_sq) % 16 != 0) {
      return Error(op, "x_sum_sq must be 16-byte aligned");
    }
    if (p.fold_norm.weight != nullptr &&
        (!p.add_to_y || p.y_dtype != DType::kBF16 || p.fold_norm.x == nullptr ||
         p.fold_norm.sum_sq == nullptr)) {
      return Error(op,
                   "fold_norm needs add_to_y into BF16 y and its x and sum_sq (the next "
                   "product's input and the sums of squares)");
    }
  }
  if (p.path == Int4GemmPath::kStream && p.rows > kInt4GemmStreamMaxRows) {
    return absl::UnimplementedError(
        absl::StrCat(op, ": rows=", p.rows, " is not supported on path kStream; supported: 1 to ",
                     kInt4GemmStreamMaxRows));
  }
  if (p.tile_rows != 0 && p.tile_rows != 16 && p.tile_rows != 32 && p.tile_rows != 64 &&
      p.tile_rows != 128) {
    return absl::UnimplementedError(absl::StrCat(op, ": tile_rows=", p.tile_rows,
                                                 " is not supported; supported: 0 (by rows), 16, "
                                                 "32, 64, 128"));
  }
  if (p.cluster != 0 && p.cluster != 1 && p.cluster != 2 && p.cluster != 4) {
    return absl::UnimplementedError(absl::StrCat(op, ": cluster=", p.cluster,
                                                 " is not supported; supported: 0 (the launch "
                                                 "setting), 1, 2, 4"));
  }
  if (p.stream_cluster != 0) {
    if (p.stream_cluster != 2 && p.stream_cluster != 4 && p.stream_cluster != 8) {
      return absl::UnimplementedError(absl::StrCat(op, ": stream_cluster=", p.stream_cluster,
                                                   " is not supported; supported: 0 (the launch "
                                                   "setting), 2, 4, 8"));
    }
    if (p.path != Int4GemmPath::kStream || p.rows > 16 || p.prologue != GemvPrologue::kNone) {
      return absl::UnimplementedError(
          absl::StrCat(op, ": stream_cluster=", p.stream_cluster, " with rows=", p.rows,
                       p.path == Int4GemmPath::kStream ? "" : " off path kStream",
                       p.prologue == GemvPrologue::kNone ? "" : " and a prologue",
                       "; a cluster split takes path kStream, up to 16 rows, no prologue"));
    }
    const int64_t k_tiles = (w.k + kInt4TileCols - 1) / kInt4TileCols;
    if (k_tiles < 2 * p.stream_cluster) {
      return absl::InvalidArgumentError(absl::StrCat(
          op, ": stream_cluster=", p.stream_cluster, " leaves a block fewer than two of k=", w.k,
          "'s ", k_tiles, " tiles of ", kInt4TileCols, " columns"));
    }
  }
  if (p.wgmma_splits != 0) {
    if (p.wgmma_splits < 0 || p.path != Int4GemmPath::kWgmma) {
      return absl::InvalidArgumentError(
          absl::StrCat(op, ": wgmma_splits=", p.wgmma_splits,
                       "; supported: 0 (the launch picks), or K's parts on path kWgmma"));
    }
    const int64_t most = std::max<int64_t>(1, w.k / kInt4WgmmaStageCols / 4);
    if (p.wgmma_splits > most) {
      return absl::InvalidArgumentError(absl::StrCat(
          op, ": wgmma_splits=", p.wgmma_splits, " leaves a part fewer than 4 of k=", w.k,
          "'s stages of ", kInt4WgmmaStageCols, " columns; at most ", most));
    }
  }
  if (p.path == Int4GemmPath::kWgmma) {
    if (!Int4GemmWgmmaFits(p)) {
      return absl::UnimplementedError(absl::StrCat(
          op, ": path kWgmma does not take group=", w.group, " k=", w.k,
          w.offset_kind == Int4Offsets::kFloat ? " with mins (kFloat)" : "",
          reinterpret_cast<uintptr_t>(p.x) % 16 == 0 ? "" : " with x not 16-byte aligned",
          "; supported: symmetric or zero-point groups of a multiple of 128 columns, k % 128 == 0, "
          "no prologue, x 16-byte aligned"));
    }
  }
  if (p.path == Int4GemmPath::kGemv && !Int4GemmGemvFits(p)) {
    return absl::UnimplementedError(absl::StrCat(
        op, ": path kGemv does not take rows=", p.rows, " k=", w.k,
        Int4GemmFoldsNorm(p) ? " with a folded RMSNorm" : "", p.trace != nullptr ? " traced" : "",
        reinterpret_cast<uintptr_t>(p.x) % 16 == 0 ? "" : " with x not 16-byte aligned",
        p.prologue != GemvPrologue::kNone && reinterpret_cast<uintptr_t>(p.norm_weight) % 16 != 0
            ? " with norm_weight not 16-byte aligned"
            : "",
        "; supported: 1 to ", kInt4GemmGemvMaxRows, " rows whose x fits ",
        kInt4GemmGemvMaxSmemBytes,
        " bytes of shared memory (rows * (k + 8) * 2 + 4096: ", Int4GemmGemvSmemBytes(p.rows, w.k),
        " here), no folded RMSNorm or trace, x and norm_weight 16-byte aligned"));
  }
  RETURN_IF_ERROR(
      ref::CheckGemmXAndEpilogue(op, w.k, p.x_row_stride, p.y_dtype, p.add_to_y, p.silu_mul_y));
  if (w.codes == nullptr || w.scales == nullptr || p.x == nullptr || p.y == nullptr ||
      (w.offset_kind != Int4Offsets::kSymmetric && w.offsets == nullptr) ||
      (p.prologue == GemvPrologue::kRmsNorm && p.norm_weight == nullptr)) {
    return Error(op, "a pointer it needs is null (codes, scales, offsets, x, y or norm_weight)");
  }
  return absl::OkStatus();
}

absl::Status Int4GemmRef(const Int4GemmParams& p) {
  RETURN_IF_ERROR(CheckInt4GemmParams(p, "Int4GemmRef"));
  const int64_t n = p.w.n, k = p.w.k;
  std::vector<uint16_t> xs(p.rows * k);  // x' (BF16)
  const auto* x = static_cast<const uint16_t*>(p.x);
  for (int32_t m = 0; m < p.rows; ++m) {
    if (p.prologue == GemvPrologue::kRmsNorm) {
      RETURN_IF_ERROR(RmsNormRef({.dtype = DType::kBF16,
                                  .x = x + m * p.x_row_stride,
                                  .weight = p.norm_weight,
                                  .out = xs.data() + m * k,
                                  .num_tokens = 1,
                                  .hidden = k,
                                  .eps = p.eps}));
    } else {
      std::copy(x + m * p.x_row_stride, x + m * p.x_row_stride + k, xs.data() + m * k);
    }
  }
  std::vector<float> row_scale(p.rows, 1.0f);  // x_sum_sq's r
  if (p.x_sum_sq != nullptr) {
    const int64_t tiles = k / kInt4TileRows;
    for (int32_t m = 0; m < p.rows; ++m) {
      double sum_sq = 0.0;
      for (int64_t t = 0; t < tiles; ++t) sum_sq += p.x_sum_sq[m * tiles + t];
      row_scale[m] = static_cast<float>(1.0 / std::sqrt(sum_sq / static_cast<double>(k) + p.eps));
    }
  }
  std::vector<float> dots(p.rows * n);  // [rows, n]
  std::vector<float> row;
  for (int64_t r = 0; r < n; ++r) {
    Int4WeightRowRef(p.w, r, &row);
    for (int32_t m = 0; m < p.rows; ++m) {
      float acc = 0.0f;
      for (int64_t c = 0; c < k; ++c) acc += row[c] * Bf16ToFloat(xs[m * k + c]);
      dots[m * n + r] = acc * row_scale[m];
    }
  }
  if (p.y_dtype == DType::kF32) {
    std::copy(dots.begin(), dots.end(), static_cast<float*>(p.y));
    return absl::OkStatus();
  }
  auto* y = static_cast<uint16_t*>(p.y);
  if (p.silu_mul_y) {  // de-interleave into [gate | up] rows, then SiluMulRef
    const int64_t inter = n / 2;
    std::vector<uint16_t> gate_up(p.rows * n);
    for (int32_t m = 0; m < p.rows; ++m) {
      for (int64_t r = 0; r < n; ++r) {
        const int64_t b = r / 16, j = r % 16;
        const int64_t dst = j < 8 ? 8 * b + j : inter + 8 * b + j - 8;
        gate_up[m * n + dst] = FloatToBf16(dots[m * n + r]);
      }
    }
    return SiluMulRef({.dtype = DType::kBF16,
                       .gate_up = gate_up.data(),
                       .out = y,
                       .num_tokens = p.rows,
                       .inter = inter});
  }
  for (int64_t o = 0; o < p.rows * n; ++o) {
    const float product = Bf16ToFloat(FloatToBf16(dots[o]));
    y[o] = FloatToBf16(p.add_to_y ? product + Bf16ToFloat(y[o]) : product);
  }
  if (p.fold_norm.weight != nullptr) {  // the next product's input and sums of squares
    const auto* g = static_cast<const uint16_t*>(p.fold_norm.weight);
    auto* x_next = static_cast<uint16_t*>(p.fold_norm.x);
    const int64_t tiles = n / kInt4TileRows;
    for (int32_t m = 0; m < p.rows; ++m) {
      for (int64_t t = 0; t < tiles; ++t) {
        double sum_sq = 0.0;
        for (int64_t c = t * kInt4TileRows; c < (t + 1) * kInt4TileRows; ++c) {
          const float h = Bf16ToFloat(y[m * n + c]);
          x_next[m * n + c] = FloatToBf16(Bf16ToFloat(g[c]) * h);
          sum_sq += static_cast<double>(h) * h;
        }
        p.fold_norm.sum_sq[m * tiles + t] = static_cast<float>(sum_sq);
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace onecard::engine
