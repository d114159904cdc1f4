// The device layout of 4-bit weights (W4A16), defined once for the packer
// (int4_matrix.cc), the reference (int4_gemm_ref.cc) and the CUDA kernels
// (int4_gemm.cu, int4_dequant.cu). Plain C++ (host and device inline).
//
// A weight W [n, k] (the HF layout: n outputs, k inputs) holds 4-bit codes q
// in 0..15 with, per row r and group of g consecutive columns, an fp16 scale
// s and an offset that makes the value
//   kSymmetric: w = s * (q - 8)               (GPTQ sym, GGUF Q4_0)
//   kZero:      w = s * (q - z), z in 0..127   (GPTQ / AWQ / compressed-tensors asym)
//   kFloat:     w = s * q + m,   m an fp16     (GGUF Q4_1: d * q + min)
// The three are kept apart so that no format is re-rounded on its way in.
// n % 16 == 0, k % 64 == 0, g % 32 == 0 and k % g == 0 (g == k: one scale a row).
//
// Codes: one 512-byte tile per 16 rows x 64 columns. Row tiles come in row
// groups of 8 (the last may hold fewer: g = min(8, n / 16 - 8 rg)), and a
// row group's tiles are ordered k tile first: [rg][k / 64][g][512 bytes]. So
// the 8 tiles of one k tile, and a run of k tiles of one row group (what one
// block of Int4Gemm reads per pipeline stage), are one contiguous stream.
// Within a tile, lane L = 4 * gr + t (gr 0..7, t 0..3) owns
// 16 bytes = words i = 0..3; word i covers the 16 columns 16 i .. 16 i + 15 of
// the tile and, of them, columns 16 i + 4 t + j (j = 0..3) of rows gr and gr + 8:
//
//     word bits   31..28  27..24  23..20  19..16  15..12  11..8   7..4    3..0
//     nibble        7       6       5       4       3       2       1       0
//     row         gr+8    gr      gr+8    gr      gr+8    gr      gr+8    gr
//     column j      3       3       1       1       2       2       0       0
//
// so (word >> 4 m) & 0x000f000f holds, in its two 16-bit halves, exactly the
// pair of the mma.m16n8k16 A fragment register a_m of lane L (PTX ISA:
// a0 = row gr, k-slots 2t and 2t+1; a1 = row gr+8; a2, a3 = slots 2t+8, 2t+9)
// when k-slots 2t, 2t+1, 2t+8, 2t+9 stand for columns 4t, 4t+1, 4t+2, 4t+3 of
// the 16: OR-ing in 0x43004300 makes two bf16 values 128 + q, exactly. The B
// fragment of the same lane is then x[n = gr][16 i + 4 t .. + 3], one 8-byte load.
//
// Scales: uint32 words [rg][k / group][g][8]: word (rg, gi, tile, gr) = the
// fp16 scales of rows 16 (8 rg + tile) + gr (low half) and + gr + 8 (high
// half) in group gi, so a lane reads the scales of both its rows with one
// load, and the groups a row group needs over a run of columns are one
// contiguous, 32-byte aligned run. Offsets (kZero: int16 z, kFloat: fp16 m)
// use the same layout; kSymmetric has none.
#ifndef ONECARD_ENGINE_KERNELS_INT4_LAYOUT_H_
#define ONECARD_ENGINE_KERNELS_INT4_LAYOUT_H_

#include <cstdint>

#include "engine/common/host_device.h"

namespace onecard::engine {

enum class Int4Offsets : uint8_t { kSymmetric, kZero, kFloat };

inline constexpr int kInt4TileRows = 16;
inline constexpr int kInt4TileCols = 64;
inline constexpr int kInt4TileBytes = kInt4TileRows * kInt4TileCols / 2;  // 512
inline constexpr int kInt4MinGroup = 32;
static_assert(kInt4TileBytes == 32 * 16, "a tile is one 16-byte load per lane of a warp");

// Where the code of W[r][c] lives: byte offset in the codes and the nibble
// (0 low, 1 high) of that byte.
struct Int4CodePos {
  int64_t byte;
  int shift;  // 0 or 4
};

// Tiles in row group rg of a weight of n_tiles row tiles.
ONECARD_HOST_DEVICE inline int64_t Int4GroupTiles(int64_t rg, int64_t n_tiles) {
  return n_tiles - 8 * rg < 8 ? n_tiles - 8 * rg : 8;
}

// Index of the tile of row tile rt and k tile kt.
ONECARD_HOST_DEVICE inline int64_t Int4TileIndex(int64_t rt, int64_t kt, int64_t k_tiles,
                                                 int64_t n_tiles) {
  const int64_t rg = rt / 8;
  return rg * 8 * k_tiles + kt * Int4GroupTiles(rg, n_tiles) + rt % 8;
}

ONECARD_HOST_DEVICE inline Int4CodePos Int4CodePosition(int64_t r, int64_t c, int64_t k,
                                                        int64_t n) {
  const int64_t rt = r / kInt4TileRows, kt = c / kInt4TileCols;
  const int row = static_cast<int>(r % kInt4TileRows);
  const int col = static_cast<int>(c % kInt4TileCols);
  const int gr = row % 8, upper = row / 8;  // rows gr and gr + 8
  const int word = col / 16, t = (col % 16) / 4, j = col % 4;
  // nibble = 4 * (j & 1) + 2 * (j >> 1) + upper (the table above)
  const int nibble = 4 * (j & 1) + 2 * (j >> 1) + upper;
  const int lane = 4 * gr + t;
  const int64_t tile = Int4TileIndex(rt, kt, k / kInt4TileCols, n / kInt4TileRows);
  return {tile * kInt4TileBytes + lane * 16 + word * 4 + nibble / 2, 4 * (nibble % 2)};
}

// Index of the 32-bit scale (or offset) word holding row r, group gi, and the
// half (0 low, 1 high) that is r's.
struct Int4ScalePos {
  int64_t word;
  int half;
};

ONECARD_HOST_DEVICE inline Int4ScalePos Int4ScalePosition(int64_t r, int64_t gi, int64_t num_groups,
                                                          int64_t n) {
  const int64_t rt = r / kInt4TileRows, rg = rt / 8;
  const int row = static_cast<int>(r % kInt4TileRows);
  const int64_t g = Int4GroupTiles(rg, n / kInt4TileRows);
  return {((rg * 8 * num_groups + gi * g + rt % 8) * 8) + row % 8, row / 8};
}

// prmt.b32's default mode (CUDA's __byte_perm): byte i of the result is
// byte (s >> 4 i) & 7 of the eight bytes lo (0-3), hi (4-7); selector
// nibbles 0..7 only.
ONECARD_HOST_DEVICE inline uint32_t Int4BytePerm(uint32_t lo, uint32_t hi, uint32_t s) {
#ifdef __CUDA_ARCH__
  return __byte_perm(lo, hi, s);
#else
  const uint64_t v = (uint64_t{hi} << 32) | lo;
  uint32_t out = 0;
  for (int i = 0; i < 4; ++i) {
    out |= static_cast<uint32_t>((v >> (8 * ((s >> (4 * i)) & 7))) & 0xFF) << (8 * i);
  }
  return out;
#endif
}

// Word i of lane L = 4 gr + t4 in column order, for kernels that read x in
// column order (wgmma's B from shared memory: int4_gemm_wgmma.cu). Above,
// the word's bytes 0..3 hold columns 16 i + 4 t4 + 0, 2, 1, 3 (the k-slots
// 2 t4, 2 t4 + 8, 2 t4 + 1, 2 t4 + 9 of the A fragment, a byte the column's
// codes of rows gr and gr + 8); the column-order word holds columns
// 16 i + 2 t4, + 8, + 1, + 9 there instead, so that (w >> 4 m) & 0x000f000f
// is still the A fragment's register a_m when slot s stands for column
// 16 i + s. Its bytes come from word i of lane 4 gr + t4 / 2 (lo: columns
// 2 t4, 2 t4 + 1) and of lane 4 gr + 2 + t4 / 2 (hi: 2 t4 + 8, + 9), bytes 0
// and 2 of each for even t4, 1 and 3 for odd.
ONECARD_HOST_DEVICE inline uint32_t Int4ColumnOrderWord(uint32_t lo, uint32_t hi, int t4) {
  return Int4BytePerm(lo, hi, (t4 & 1) != 0 ? 0x7351u : 0x6240u);
}

ONECARD_HOST_DEVICE constexpr int64_t Int4CodeBytes(int64_t n, int64_t k) { return n * k / 2; }

// Bytes of the scales, and of the offsets (0 for kSymmetric).
ONECARD_HOST_DEVICE constexpr int64_t Int4ScaleBytes(int64_t n, int64_t k, int64_t group) {
  return n * (k / group) * 2;
}
ONECARD_HOST_DEVICE constexpr int64_t Int4OffsetBytes(int64_t n, int64_t k, int64_t group,
                                                      Int4Offsets offsets) {
  return offsets == Int4Offsets::kSymmetric ? 0 : Int4ScaleBytes(n, k, group);
}

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_KERNELS_INT4_LAYOUT_H_
