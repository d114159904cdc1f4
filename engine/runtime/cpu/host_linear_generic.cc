// The portable kernels of HostLinearForward (host_linear_kernels.h): plain
// loops over the same lanes as the AVX-512 ones, the layout's index math
// through int4_layout.h. A 4-bit group's lane sums are summed, then scaled:
// sum += s * (sum of (q - 8) x) + c * (sum of x). Also x's layouts in fp32
// lanes, column by column through FloatToBf16.
// Tested by tests/engine/runtime/cpu/host_linear_test.cc.
#include <cstring>

#include "engine/common/fp16.h"
#include "engine/kernels/bf16.h"
#include "engine/kernels/int4_layout.h"
#include "engine/runtime/cpu/host_linear_kernels.h"

namespace onecard::engine::host_linear {
namespace {

// Row `row`'s half of a scale (or offset) word.
uint16_t Half(const uint32_t* words, int64_t row, int64_t gi, int64_t groups, int64_t n) {
  const Int4ScalePos pos = Int4ScalePosition(row, gi, groups, n);
  return static_cast<uint16_t>(words[pos.word] >> (16 * pos.half));
}

// The group's offset coefficient c (w = s (q - 8) + c).
float OffsetCoefficient(const Int4Args& a, float s, int64_t row, int64_t gi, int64_t groups) {
  switch (a.offset_term) {
    case OffsetTerm::kNone:
      return 0.0f;
    case OffsetTerm::kZero:
      return s *
             static_cast<float>(8 - static_cast<int16_t>(Half(a.offsets, row, gi, groups, a.n)));
    case OffsetTerm::kFloat:
      return 8.0f * s + HalfToFloat(Half(a.offsets, row, gi, groups, a.n));
  }
  return 0.0f;
}

struct TileSums {
  float lanes[2][kTileRows][kMaxRows][kLanes];  // [half of a 64-column tile][row][x row][lane]
  float total[kTileRows][kMaxRows];
};

// Adds tile line kt's products into the lane sums.
void AddLine(const Int4Args& a, const uint8_t* tile, int64_t kt, TileSums* s) {
  const int rows = a.rows;
  for (int gr = 0; gr < 8; ++gr) {
    for (int d = 0; d < kLanes; ++d) {
      uint32_t word;
      std::memcpy(&word, tile + 64 * gr + 4 * d, sizeof(word));
      const int half = a.group == 32 && d % 4 >= 2 ? 1 : 0;
      for (int m = 0; m < 8; ++m) {
        const float q = static_cast<float>(static_cast<int>((word >> (4 * m)) & 0xF) - 8);
        const float* x = a.x_lanes + (kt * 4 + kInt4NibbleColumn[m]) * rows * kLanes + d;
        float(&lanes)[kMaxRows][kLanes] = s->lanes[half][gr + 8 * (m & 1)];
        for (int r = 0; r < rows; ++r) lanes[r][d] += q * x[r * kLanes];
      }
    }
  }
}

// Scales the lane sums of the group(s) ending with k tile kt into the totals.
void CloseGroups(const Int4Args& a, int64_t rt, int64_t kt, TileSums* s) {
  const int64_t groups = a.k / a.group;
  for (int half = 0; half < (a.group == 32 ? 2 : 1); ++half) {
    const int64_t gi = a.group == 32 ? 2 * kt + half : kt * kTileCols / a.group;
    for (int row = 0; row < kTileRows; ++row) {
      const int64_t w_row = rt * kTileRows + row;
      const float scale = HalfToFloat(Half(a.scales, w_row, gi, groups, a.n));
      const float c = OffsetCoefficient(a, scale, w_row, gi, groups);
      for (int r = 0; r < a.rows; ++r) {
        float lane_sum = 0.0f;
        for (int d = 0; d < kLanes; ++d) lane_sum += s->lanes[half][row][r][d];
        float& total = s->total[row][r];
        total += scale * lane_sum;
        if (a.offset_term != OffsetTerm::kNone) total += c * a.x_sums[r * groups + gi];
      }
    }
  }
}

void Int4Tiles(const Int4Args& a, int64_t tile_begin, int64_t tile_end) {
  const int64_t k_tiles = a.k / kTileCols, n_tiles = a.n / kTileRows;
  TileSums s;
  for (int64_t rt = tile_begin; rt < tile_end; ++rt) {
    std::memset(s.total, 0, sizeof(s.total));
    for (int64_t kt = 0; kt < k_tiles; ++kt) {
      if (kt * kTileCols % a.group == 0) std::memset(s.lanes, 0, sizeof(s.lanes));
      AddLine(a, a.codes + Int4TileIndex(rt, kt, k_tiles, n_tiles) * kTileBytes, kt, &s);
      if ((kt + 1) * kTileCols % a.group == 0) CloseGroups(a, rt, kt, &s);
    }
    for (int r = 0; r < a.rows; ++r) {
      for (int row = 0; row < kTileRows; ++row) {
        a.y[r * a.y_stride + rt * kTileRows + row] = s.total[row][r];
      }
    }
  }
}

// One BF16 weight row against every row of x: lanes of even and odd columns.
void Bf16Row(const Bf16Args& a, int64_t o) {
  const int64_t runs = (a.k + kBf16RunCols - 1) / kBf16RunCols;
  float lanes[kMaxRows][2][kLanes] = {};
  const uint16_t* w = a.w + o * a.k;
  for (int64_t c = 0; c < runs; ++c) {
    const float* xc = a.x_lanes + c * 2 * a.rows * kLanes;
    for (int p = 0; p < 2; ++p) {
      for (int d = 0; d < kLanes; ++d) {
        const int64_t col = c * kBf16RunCols + 2 * d + p;
        if (col >= a.k) break;
        const uint32_t bits = static_cast<uint32_t>(w[col]) << 16;
        float v;
        std::memcpy(&v, &bits, sizeof(v));
        for (int r = 0; r < a.rows; ++r) lanes[r][p][d] += v * xc[(p * a.rows + r) * kLanes + d];
      }
    }
  }
  for (int r = 0; r < a.rows; ++r) {
    float sum = 0.0f;
    for (int d = 0; d < kLanes; ++d) sum += lanes[r][0][d] + lanes[r][1][d];
    a.y[r * a.y_stride + o] = sum;
  }
}

void Bf16Tiles(const Bf16Args& a, int64_t tile_begin, int64_t tile_end) {
  const int64_t end = tile_end * kTileRows < a.n ? tile_end * kTileRows : a.n;
  for (int64_t o = tile_begin * kTileRows; o < end; ++o) Bf16Row(a, o);
}

// Row r's columns [col, col + count) of x, gathered and rounded to BF16 bits.
void RoundedBits(const XArgs& a, int r, int64_t col, int count, uint16_t* bits) {
  for (int c = 0; c < count; ++c) {
    const int64_t stored = col + c;
    if (stored >= a.k) {
      bits[c] = 0;
      continue;
    }
    bits[c] = FloatToBf16(a.x[r * a.k + (a.columns == nullptr ? stored : a.columns[stored])]);
  }
}

// The half sums of row r's k tile kt (its rounded bits), column by column.
void HalfSums(const XArgs& a, int r, int64_t kt, const uint16_t (&bits)[kTileCols]) {
  if (a.half_sums == nullptr) return;
  for (int h = 0; h < 2; ++h) {
    float sum = 0.0f;
    for (int c = 32 * h; c < 32 * h + 32; ++c) sum += Bf16ToFloat(bits[c]);
    a.half_sums[r * (a.k / 32) + 2 * kt + h] = sum;
  }
}

// Column (within the tile) of lane d = 4 t + i, position j: 16 i + 4 t + j.
int LaneColumn(int d, int j) { return 16 * (d % 4) + 4 * (d / 4) + j; }

void Int4Lanes(const XArgs& a, int64_t begin, int64_t end) {
  uint16_t bits[kTileCols];
  for (int64_t kt = begin; kt < end; ++kt) {
    for (int r = 0; r < a.rows; ++r) {
      RoundedBits(a, r, kt * kTileCols, kTileCols, bits);
      for (int j = 0; j < 4; ++j) {
        float* v = a.lanes + ((kt * 4 + j) * a.rows + r) * kLanes;
        for (int d = 0; d < kLanes; ++d) v[d] = Bf16ToFloat(bits[LaneColumn(d, j)]);
      }
      HalfSums(a, r, kt, bits);
    }
  }
}

void Bf16Lanes(const XArgs& a, int64_t begin, int64_t end) {
  uint16_t bits[kBf16RunCols];
  for (int64_t c = begin; c < end; ++c) {
    for (int r = 0; r < a.rows; ++r) {
      RoundedBits(a, r, c * kBf16RunCols, kBf16RunCols, bits);
      for (int p = 0; p < 2; ++p) {
        float* v = a.lanes + ((c * 2 + p) * a.rows + r) * kLanes;
        for (int d = 0; d < kLanes; ++d) v[d] = Bf16ToFloat(bits[2 * d + p]);
      }
    }
  }
}

const Kernels kGenericKernels = {.int4 = &Int4Tiles,
                                 .bf16 = &Bf16Tiles,
                                 .int4_layout = XLayout::kF32Lanes,
                                 .int4_x = &Int4Lanes,
                                 .bf16_x = &Bf16Lanes};

}  // namespace

const Kernels& GenericKernels() { return kGenericKernels; }

}  // namespace onecard::engine::host_linear
