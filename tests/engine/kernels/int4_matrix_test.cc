// Tests of the 4-bit weight layout and its host side (int4_layout.h,
// int4_matrix.h): code and scale positions against the layout's table, the
// packer's round trip, the fused weights' row maps, the value of each offset
// kind, the round-to-nearest quantizer against GPTQ's formulas worked by hand,
// and the shape checks.
#include "engine/kernels/int4_matrix.h"

#include <algorithm>
#include <cstring>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/common/fp16.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/int4_testing.h"

namespace onecard::engine {
namespace {

using onecard::testing::RandomInt4Matrix;

TEST(Int4LayoutTest, CodePositionsFollowTheTable) {
  // Row gr = 3 of the first tile, column 16 * 2 + 4 * 1 + 2 (word 2, t = 1,
  // j = 2): lane 4 * 3 + 1 = 13, nibble 2 (row gr, j = 2) -> byte 1 of word 2.
  Int4CodePos p = Int4CodePosition(3, 38, 128, 16);
  EXPECT_EQ(p.byte, 13 * 16 + 2 * 4 + 1);
  EXPECT_EQ(p.shift, 0);
  // Row gr + 8 = 11, j = 3: nibble 7, the high half of byte 3.
  p = Int4CodePosition(11, 39, 128, 16);
  EXPECT_EQ(p.byte, 13 * 16 + 2 * 4 + 3);
  EXPECT_EQ(p.shift, 4);
  // Row 8 + 0, column 1 (j = 1): nibble 5 -> byte 2, high half.
  p = Int4CodePosition(8, 1, 128, 16);
  EXPECT_EQ(p.byte, 2);
  EXPECT_EQ(p.shift, 4);
  // Row group 0 of a 2-tile, 128-wide weight: k tile 1 of row tile 1 is
  // tile 1 * 2 + 1 = 3 (a row group's tiles come k tile first).
  p = Int4CodePosition(16, 64, 128, 32);
  EXPECT_EQ(p.byte, 3 * kInt4TileBytes);
  // 10 row tiles: group 1 holds tiles 8 and 9 after group 0's 8 x 2 tiles;
  // k tile 1 of row tile 9 is tile 16 + 1 * 2 + 1 = 19.
  p = Int4CodePosition(9 * 16, 64, 128, 160);
  EXPECT_EQ(p.byte, 19 * kInt4TileBytes);
}

TEST(Int4LayoutTest, CodePositionsAreABijection) {
  const int64_t n = 160, k = 192;  // 10 row tiles: a partial row group
  std::set<std::pair<int64_t, int>> seen;
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t c = 0; c < k; ++c) {
      const Int4CodePos p = Int4CodePosition(r, c, k, n);
      ASSERT_GE(p.byte, 0);
      ASSERT_LT(p.byte, Int4CodeBytes(n, k));
      EXPECT_TRUE(seen.insert({p.byte, p.shift}).second) << r << "," << c;
    }
  }
  EXPECT_EQ(static_cast<int64_t>(seen.size()), n * k);
}

// Int4ColumnOrderWord against the matrix's own codes: for every lane, word
// and tile, nibble m of the column-order word is the code of row gr + 8 (m %
// 2) at column 16 i + 2 t4 + {0, 8, 1, 9}[m / 2] (the A fragment's k-slot
// read as the column itself).
TEST(Int4LayoutTest, ColumnOrderWordsHoldColumnsInOrder) {
  const int64_t n = 48, k = 192;
  const Int4Matrix m = RandomInt4Matrix(n, k, 64, Int4Offsets::kSymmetric, 5);
  Int4Packed packed = MakeInt4Packed(n, k, 64, Int4Offsets::kSymmetric);
  ASSERT_TRUE(PackInt4Rows(m, ConcatRows(n, 0), n, &packed).ok());
  auto word = [&](int64_t tile, int lane, int i) {
    uint32_t w;
    std::memcpy(&w, packed.codes.data() + tile * kInt4TileBytes + lane * 16 + i * 4, 4);
    return w;
  };
  constexpr int kSlotColumn[4] = {0, 8, 1, 9};
  for (int64_t rt = 0; rt < n / 16; ++rt) {
    for (int64_t kt = 0; kt < k / 64; ++kt) {
      const int64_t tile = Int4TileIndex(rt, kt, k / 64, n / 16);
      for (int lane = 0; lane < 32; ++lane) {
        const int gr = lane / 4, t4 = lane % 4;
        for (int i = 0; i < 4; ++i) {
          const uint32_t w = Int4ColumnOrderWord(word(tile, 4 * gr + t4 / 2, i),
                                                 word(tile, 4 * gr + 2 + t4 / 2, i), t4);
          for (int nib = 0; nib < 8; ++nib) {
            const int64_t r = rt * 16 + gr + 8 * (nib % 2);
            const int64_t c = kt * 64 + 16 * i + 2 * t4 + kSlotColumn[nib / 2];
            ASSERT_EQ((w >> (4 * nib)) & 0xF, m.q[r * k + c])
                << "tile " << tile << " lane " << lane << " word " << i << " nibble " << nib;
          }
        }
      }
    }
  }
}

TEST(Int4LayoutTest, ScaleWordsPairRowsOfATile) {
  // A 2-tile weight, 4 groups: rows 16 + 5 and 16 + 13 share word
  // (group 2 * 2 tiles + tile 1) * 8 + 5.
  const Int4ScalePos a = Int4ScalePosition(21, 2, 4, 32), b = Int4ScalePosition(29, 2, 4, 32);
  EXPECT_EQ(a.word, (2 * 2 + 1) * 8 + 5);
  EXPECT_EQ(b.word, a.word);
  EXPECT_EQ(a.half, 0);
  EXPECT_EQ(b.half, 1);
}

TEST(Int4MatrixTest, PackUnpackRoundTrip) {
  for (const auto offsets : {Int4Offsets::kSymmetric, Int4Offsets::kZero, Int4Offsets::kFloat}) {
    for (const int32_t group : {32, 64, 96, 192}) {
      const int64_t n = group == 96 ? 160 : 48;  // 10 tiles: a partial row group
      const Int4Matrix m = RandomInt4Matrix(n, 192, group, offsets, 7 + group);
      ASSERT_TRUE(m.Validate("w").ok()) << m.Validate("w");
      Int4Packed p = MakeInt4Packed(n, 192, group, offsets);
      ASSERT_TRUE(PackInt4Rows(m, ConcatRows(n, 0), n, &p).ok());
      const Int4Matrix back = UnpackInt4(p, n, 192, group, offsets);
      EXPECT_EQ(back.q, m.q);
      EXPECT_EQ(back.scales, m.scales);
      EXPECT_EQ(back.offset, m.offset);
    }
  }
}

TEST(Int4MatrixTest, FusedRowMaps) {
  EXPECT_EQ(ConcatRows(3, 16), (std::vector<int64_t>{16, 17, 18}));
  const std::vector<int64_t> gate = InterleavedGateUpRows(16, 0), up = InterleavedGateUpRows(16, 1);
  EXPECT_EQ(gate, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23}));
  EXPECT_EQ(up,
            (std::vector<int64_t>{8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31}));
  // Packing the parts of a fused weight puts each row where the map says.
  const Int4Matrix g = RandomInt4Matrix(16, 64, 32, Int4Offsets::kZero, 1);
  const Int4Matrix u = RandomInt4Matrix(16, 64, 32, Int4Offsets::kZero, 2);
  Int4Packed p = MakeInt4Packed(32, 64, 32, Int4Offsets::kZero);
  ASSERT_TRUE(PackInt4Rows(g, gate, 32, &p).ok());
  ASSERT_TRUE(PackInt4Rows(u, up, 32, &p).ok());
  const Int4Matrix fused = UnpackInt4(p, 32, 64, 32, Int4Offsets::kZero);
  for (int64_t c = 0; c < 64; ++c) {
    EXPECT_EQ(fused.Value(17, c), g.Value(9, c));
    EXPECT_EQ(fused.Value(26, c), u.Value(10, c));
  }
  EXPECT_FALSE(PackInt4Rows(g, ConcatRows(16, 20), 32, &p).ok());  // rows past the end
}

// With a pool, blocks of 64 rows go in parallel: the bytes are the ones the
// layout's own positions (UnpackInt4, Int4CodePosition) read back, for the
// fused row maps too; a map whose blocks share a tile runs on one thread.
TEST(Int4MatrixTest, PackInParallelGivesTheSameBytes) {
  ThreadPool pool(4);
  const int64_t n = 336, k = 256;  // 21 tiles: 5 whole blocks and a partial one
  const Int4Matrix m = RandomInt4Matrix(n, k, 64, Int4Offsets::kZero, 11);
  Int4Packed serial = MakeInt4Packed(n, k, 64, Int4Offsets::kZero);
  Int4Packed parallel = MakeInt4Packed(n, k, 64, Int4Offsets::kZero);
  ASSERT_TRUE(PackInt4Rows(m, ConcatRows(n, 0), n, &serial).ok());
  ASSERT_TRUE(PackInt4Rows(m, ConcatRows(n, 0), n, &parallel, &pool).ok());
  EXPECT_EQ(parallel.codes, serial.codes);
  EXPECT_EQ(parallel.scales, serial.scales);
  EXPECT_EQ(parallel.offsets, serial.offsets);
  EXPECT_EQ(UnpackInt4(parallel, n, k, 64, Int4Offsets::kZero).q, m.q);

  // Gate and up interleaved by 8 into 2n rows, each part in parallel.
  const Int4Matrix up = RandomInt4Matrix(n, k, 64, Int4Offsets::kZero, 12);
  Int4Packed fused = MakeInt4Packed(2 * n, k, 64, Int4Offsets::kZero);
  ASSERT_TRUE(PackInt4Rows(m, InterleavedGateUpRows(n, 0), 2 * n, &fused, &pool).ok());
  ASSERT_TRUE(PackInt4Rows(up, InterleavedGateUpRows(n, 1), 2 * n, &fused, &pool).ok());
  const Int4Matrix back = UnpackInt4(fused, 2 * n, k, 64, Int4Offsets::kZero);
  for (int64_t r = 0; r < n; ++r) {
    const int64_t g = (r / 8) * 16 + r % 8;
    for (int64_t c = 0; c < k; ++c) {
      ASSERT_EQ(back.q[g * k + c], m.q[r * k + c]) << r << "," << c;
      ASSERT_EQ(back.q[(g + 8) * k + c], up.q[r * k + c]) << r << "," << c;
    }
  }

  // Rows shifted by 8: blocks would share tiles, so one thread packs them.
  const Int4Matrix small = RandomInt4Matrix(128, k, 64, Int4Offsets::kSymmetric, 13);
  Int4Packed shifted = MakeInt4Packed(144, k, 64, Int4Offsets::kSymmetric);
  ASSERT_TRUE(PackInt4Rows(small, ConcatRows(128, 8), 144, &shifted, &pool).ok());
  const Int4Matrix s = UnpackInt4(shifted, 144, k, 64, Int4Offsets::kSymmetric);
  EXPECT_TRUE(std::equal(small.q.begin(), small.q.end(), s.q.begin() + 8 * k));
}

TEST(Int4MatrixTest, ResizeKeepsTheBytes) {
  Int4Packed p = MakeInt4Packed(32, 128, 64, Int4Offsets::kZero);
  p.codes[5] = 0x5A;
  p.scales[1] = 7;
  ResizeInt4Packed(&p, 16, 128, 64, Int4Offsets::kZero);
  EXPECT_EQ(p.codes.size(), 16u * 64);
  EXPECT_EQ(p.codes[5], 0x5A);
  EXPECT_EQ(p.scales[1], 7u);
  ResizeInt4Packed(&p, 48, 128, 32, Int4Offsets::kSymmetric);
  const Int4Packed fresh = MakeInt4Packed(48, 128, 32, Int4Offsets::kSymmetric);
  EXPECT_EQ(p.codes.size(), fresh.codes.size());
  EXPECT_EQ(p.scales.size(), fresh.scales.size());
  EXPECT_TRUE(p.offsets.empty());
  EXPECT_EQ(p.codes[5], 0x5A);
}

TEST(Int4MatrixTest, PackNeedsWholeTiles) {
  const Int4Matrix m = RandomInt4Matrix(16, 96, 32, Int4Offsets::kZero, 3);
  Int4Packed p = MakeInt4Packed(16, 96, 32, Int4Offsets::kZero);
  EXPECT_THAT(std::string(PackInt4Rows(m, ConcatRows(16, 0), 16, &p).message()),
              ::testing::HasSubstr("16 x 96 is not whole tiles of 16 x 64"));
}

TEST(Int4MatrixTest, ValueOfEachOffsetKind) {
  const uint16_t s = FloatToHalf(0.25f);
  EXPECT_EQ(Int4Value(Int4Offsets::kSymmetric, 3, s, 0), 0.25f * -5.0f);
  EXPECT_EQ(Int4Value(Int4Offsets::kZero, 3, s, 5), 0.25f * -2.0f);
  EXPECT_EQ(Int4Value(Int4Offsets::kZero, 15, s, 16), 0.25f * -1.0f);  // GPTQ v1's z = 16
  EXPECT_EQ(Int4Value(Int4Offsets::kFloat, 3, s, FloatToHalf(-1.5f)), 0.25f * 3.0f - 1.5f);
}

TEST(Int4MatrixTest, QuantizerFollowsGptqRoundToNearest) {
  // One group of 32: values -1 .. 0.9375 step 1/16 (absmax 1).
  std::vector<float> w(32);
  for (int i = 0; i < 32; ++i) w[i] = -1.0f + i / 16.0f;
  absl::StatusOr<Int4Matrix> sym = QuantizeInt4Rtn(w, 1, 32, 32, Int4Offsets::kSymmetric);
  ASSERT_TRUE(sym.ok()) << sym.status();
  // s = 2 * 1 / 15 rounded to fp16; q = clamp(round(w / s) + 8).
  const float s = HalfToFloat(FloatToHalf(2.0f / 15.0f));
  EXPECT_EQ(sym->scales[0], FloatToHalf(2.0f / 15.0f));
  for (int i = 0; i < 32; ++i) {
    const int want = std::clamp(static_cast<int>(std::nearbyint(w[i] / s)) + 8, 0, 15);
    EXPECT_EQ(sym->q[i], want) << i;
    EXPECT_LE(std::abs(sym->Value(0, i) - w[i]), s / 2 + 1e-6f) << i;
  }
  absl::StatusOr<Int4Matrix> asym = QuantizeInt4Rtn(w, 1, 32, 32, Int4Offsets::kZero);
  ASSERT_TRUE(asym.ok());
  const float sa = HalfToFloat(FloatToHalf(1.9375f / 15.0f));
  EXPECT_EQ(static_cast<int16_t>(asym->offset[0]), static_cast<int>(std::nearbyint(1.0f / sa)));
  for (int i = 0; i < 32; ++i) EXPECT_LE(std::abs(asym->Value(0, i) - w[i]), sa / 2 + 1e-6f) << i;
  EXPECT_FALSE(QuantizeInt4Rtn(w, 1, 32, 32, Int4Offsets::kFloat).ok());
}

TEST(Int4MatrixTest, ValidateNamesTheTensorAndTheField) {
  Int4Matrix m = RandomInt4Matrix(16, 64, 32, Int4Offsets::kZero, 3);
  m.n = 24;
  absl::Status st = m.Validate("blk.0.attn_q.weight");
  EXPECT_NE(st.message().find("blk.0.attn_q.weight"), std::string::npos) << st;
  EXPECT_NE(st.message().find("n = 24"), std::string::npos) << st;
  m.n = 16;
  m.group = 48;
  EXPECT_NE(m.Validate("w").message().find("group size 48"), std::string::npos);
  m.group = 32;
  ASSERT_TRUE(m.Validate("w").ok());
  // A code over 15 is found wherever it is: in an 8-code step or the tail.
  for (const size_t at : {size_t{0}, size_t{517}, m.q.size() - 1}) {
    Int4Matrix bad = m;
    bad.q[at] = 16;
    EXPECT_NE(bad.Validate("w").message().find(absl::StrCat("code 16 at ", at, " > 15")),
              std::string::npos)
        << at;
  }
  m.offset.pop_back();
  EXPECT_NE(m.Validate("w").message().find("offsets"), std::string::npos);
}

}  // namespace
}  // namespace onecard::engine
