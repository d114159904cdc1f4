// Int4GemmRef against an independent computation: the weight's values from
// the logical matrix (Int4Matrix::Value, not the packed layout the reference
// reads), a double-precision dot, and the epilogues written out here (the
// residual add's two roundings; gate/up pairs taken from the fused rows by
// hand). Shapes small enough for CI. And Int4DequantizeBf16Ref with an act
// order column map against DequantizeInt4, which undoes the map itself.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/kernels/bf16.h"
#include "engine/kernels/int4_dequant.h"
#include "engine/kernels/int4_gemm.h"
#include "engine/kernels/int4_matrix.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/kernels/kernel_test_util.h"
#include "tests/testing/int4_testing.h"
#include "tests/testing/rows_on_cores.h"

namespace onecard::engine {
namespace {

using onecard::testing::RandomInt4Matrix;

struct Fixture {
  Int4Matrix m;
  Int4Packed packed;
  std::vector<uint16_t> x;  // [rows, k] BF16
  Int4GemmParams p;
};

Fixture Make(int64_t n, int64_t k, int32_t group, Int4Offsets offsets, int32_t rows) {
  Fixture f;
  f.m = RandomInt4Matrix(n, k, group, offsets, static_cast<uint32_t>(n + k + rows));
  f.packed = MakeInt4Packed(n, k, group, offsets);
  EXPECT_TRUE(PackInt4Rows(f.m, ConcatRows(n, 0), n, &f.packed).ok());
  f.x = testing::ToBf16(testing::RandomFloats(rows * k, 11, -2.0f, 2.0f));
  f.p.w = {.codes = f.packed.codes.data(),
           .scales = f.packed.scales.data(),
           .offsets = f.packed.offsets.empty() ? nullptr : f.packed.offsets.data(),
           .n = n,
           .k = k,
           .group = group,
           .offset_kind = offsets};
  f.p.x = f.x.data();
  f.p.x_row_stride = k;
  f.p.rows = rows;
  return f;
}

double Dot(const Fixture& f, int32_t row, int64_t r) {
  double acc = 0;
  for (int64_t c = 0; c < f.m.k; ++c)
    acc += double{f.m.Value(r, c)} * Bf16ToFloat(f.x[row * f.m.k + c]);
  return acc;
}

TEST(Int4GemmRefTest, F32OutputIsTheDot) {
  for (const auto offsets : {Int4Offsets::kSymmetric, Int4Offsets::kZero, Int4Offsets::kFloat}) {
    Fixture f = Make(32, 256, 64, offsets, 3);
    std::vector<float> y(3 * 32);
    f.p.y = y.data();
    f.p.y_dtype = DType::kF32;
    ASSERT_TRUE(Int4GemmRef(f.p).ok());
    for (int32_t m = 0; m < 3; ++m) {
      for (int64_t r = 0; r < 32; ++r) {
        const double want = Dot(f, m, r);
        EXPECT_NEAR(y[m * 32 + r], want, 1e-5 * (1 + std::abs(want))) << m << "," << r;
      }
    }
  }
}

TEST(Int4GemmRefTest, AddRoundsTheProductThenTheSum) {
  Fixture f = Make(16, 128, 32, Int4Offsets::kFloat, 2);
  std::vector<uint16_t> y = testing::ToBf16(testing::RandomFloats(2 * 16, 5));
  const std::vector<uint16_t> before = y;
  f.p.y = y.data();
  f.p.add_to_y = true;
  ASSERT_TRUE(Int4GemmRef(f.p).ok());
  for (int i = 0; i < 32; ++i) {
    const float product = Bf16ToFloat(FloatToBf16(static_cast<float>(Dot(f, i / 16, i % 16))));
    EXPECT_NEAR(Bf16ToFloat(y[i]), Bf16ToFloat(FloatToBf16(product + Bf16ToFloat(before[i]))),
                1e-2 * std::abs(Bf16ToFloat(y[i])) + 1e-3)
        << i;
  }
}

// The GPU tests run the reference over shares of its rows, one a core
// (tests/testing/rows_on_cores.h): shares of every size give the whole
// call's bytes, with the residual added or RMSNorm before the product; and
// a share's error is the call's.
TEST(Int4GemmRefTest, SharesOfRowsGiveTheWholeCallsBytes) {
  for (const bool norm : {false, true}) {
    const int32_t rows = norm ? kInt4GemmMaxNormRows : 13;
    Fixture f = Make(48, 256, 64, Int4Offsets::kZero, rows);
    const std::vector<uint16_t> gamma = testing::ToBf16(testing::RandomFloats(256, 7, 0.5f, 1.5f));
    const std::vector<uint16_t> residual = testing::ToBf16(testing::RandomFloats(rows * 48, 5));
    if (norm) {
      f.p.prologue = GemvPrologue::kRmsNorm;
      f.p.norm_weight = gamma.data();
    }
    f.p.add_to_y = true;
    std::vector<uint16_t> whole = residual;
    f.p.y = whole.data();
    ASSERT_TRUE(Int4GemmRef(f.p).ok());
    for (int64_t threads : {2, 3, 5, 64}) {
      std::vector<uint16_t> shared = residual;
      f.p.y = shared.data();
      ASSERT_TRUE(onecard::testing::RowsOnCores(
                      f.p, 48 * 2, [](const Int4GemmParams& q) { return Int4GemmRef(q); }, threads)
                      .ok());
      EXPECT_EQ(shared, whole) << threads << " shares, norm " << norm;
    }
  }
  Fixture f = Make(48, 256, 64, Int4Offsets::kZero, 13);
  std::vector<uint16_t> y(13 * 48);
  f.p.y = y.data();
  const absl::Status st = onecard::testing::RowsOnCores(
      f.p, 96,
      [](const Int4GemmParams& q) {
        return q.rows == 5 ? absl::OkStatus() : absl::InternalError("a share failed");
      },
      3);
  EXPECT_THAT(st.message(), ::testing::HasSubstr("a share failed"));
}

TEST(Int4GemmRefTest, SiluMulPairsTheInterleavedRows) {
  Fixture f = Make(32, 64, 32, Int4Offsets::kZero, 1);
  std::vector<uint16_t> y(16);
  f.p.y = y.data();
  f.p.silu_mul_y = true;
  ASSERT_TRUE(Int4GemmRef(f.p).ok());
  for (int64_t j = 0; j < 16; ++j) {
    const int64_t gate_row = (j / 8) * 16 + j % 8, up_row = gate_row + 8;
    const float g = Bf16ToFloat(FloatToBf16(static_cast<float>(Dot(f, 0, gate_row))));
    const float u = Bf16ToFloat(FloatToBf16(static_cast<float>(Dot(f, 0, up_row))));
    const float want = g / (1.0f + std::exp(-g)) * u;
    EXPECT_NEAR(Bf16ToFloat(y[j]), want, 1e-2 * std::abs(want) + 1e-4) << j;
  }
}

TEST(Int4DequantRefTest, ActOrderColumnsGoBackToTheirPlaces) {
  const int64_t n = 32, k = 256;
  Int4Matrix m = RandomInt4Matrix(n, k, 64, Int4Offsets::kZero, 5);
  m.columns.resize(k);
  std::iota(m.columns.begin(), m.columns.end(), 0);
  std::mt19937 rng(3);
  std::shuffle(m.columns.begin(), m.columns.end(), rng);
  Int4Packed packed = MakeInt4Packed(n, k, 64, Int4Offsets::kZero);
  ASSERT_TRUE(PackInt4Rows(m, ConcatRows(n, 0), n, &packed).ok());
  std::vector<uint16_t> out(n * k);
  Int4DequantParams p{.w = {.codes = packed.codes.data(),
                            .scales = packed.scales.data(),
                            .offsets = packed.offsets.data(),
                            .n = n,
                            .k = k,
                            .group = 64,
                            .offset_kind = Int4Offsets::kZero},
                      .out = out.data(),
                      .columns = m.columns.data()};
  ASSERT_TRUE(Int4DequantizeBf16Ref(p).ok());
  const std::vector<float> want = DequantizeInt4(m);  // the source's column order
  for (int64_t i = 0; i < n * k; ++i) ASSERT_EQ(out[i], FloatToBf16(want[i])) << i;
}

TEST(Int4GemmRefTest, RefusesWhatTheKernelsDoNotTake) {
  Fixture f = Make(16, 64, 32, Int4Offsets::kSymmetric, 1);
  std::vector<float> y(16);
  f.p.y = y.data();
  f.p.y_dtype = DType::kF32;
  f.p.rows = kInt4GemmMaxRows + 1;
  EXPECT_EQ(Int4GemmRef(f.p).code(), absl::StatusCode::kUnimplemented);
  f.p.rows = 1;
  f.p.prologue = GemvPrologue::kSiluMul;
  EXPECT_EQ(Int4GemmRef(f.p).code(), absl::StatusCode::kUnimplemented);
  f.p.prologue = GemvPrologue::kNone;
  f.p.add_to_y = true;  // F32 y
  EXPECT_EQ(Int4GemmRef(f.p).code(), absl::StatusCode::kInvalidArgument);
  f.p.add_to_y = false;
  // Past kInt4MaxK columns (checked before any pointer is read).
  f.p.w.k = kInt4MaxK + 64;
  f.p.x_row_stride = f.p.w.k;
  const absl::Status too_wide = Int4GemmRef(f.p);
  EXPECT_EQ(too_wide.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(too_wide.message(), ::testing::HasSubstr("up to 4194240"));
}

TEST(Int4GemmRefTest, RefusesWhatAPathDoesNotTake) {
  Fixture f = Make(16, 64, 32, Int4Offsets::kSymmetric, 1);
  std::vector<float> y(16 * (kInt4GemmStreamMaxRows + 1));
  f.p.y = y.data();
  f.p.y_dtype = DType::kF32;
  f.p.path = Int4GemmPath::kStream;
  f.p.rows = kInt4GemmStreamMaxRows + 1;
  const absl::Status stream_rows = CheckInt4GemmParams(f.p, "op");
  EXPECT_EQ(stream_rows.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(stream_rows.message(), ::testing::HasSubstr("path kStream"));
  f.p.rows = 2;
  f.p.path = Int4GemmPath::kTiled;
  f.p.prologue = GemvPrologue::kRmsNorm;
  std::vector<uint16_t> norm(64, 0x3F80);
  f.p.norm_weight = norm.data();
  EXPECT_EQ(CheckInt4GemmParams(f.p, "op").code(), absl::StatusCode::kUnimplemented);
  f.p.path = Int4GemmPath::kAuto;
  EXPECT_TRUE(CheckInt4GemmParams(f.p, "op").ok());
  f.p.prologue = GemvPrologue::kNone;
  f.p.tile_rows = 48;
  const absl::Status tile = CheckInt4GemmParams(f.p, "op");
  EXPECT_EQ(tile.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(tile.message(), ::testing::HasSubstr("tile_rows=48"));
}

// The folded RMSNorm (Int4NormFold): a residual product's fold outputs are
// bf16(g y) and the sums of squares of y's 16-column tiles, written out here
// from its y; the normed product given them scales each row by r =
// rsqrt(mean(h^2) + eps) (a double-precision dot here), and comes within
// two bf16 roundings of RMSNorm then the product (Int4GemmRef's kRmsNorm
// prologue).
TEST(Int4GemmRefTest, FoldedNormIsRmsNormThenTheProduct) {
  constexpr int32_t kRows = 3;
  constexpr int64_t kHidden = 256;
  Fixture res = Make(kHidden, 128, 32, Int4Offsets::kFloat, kRows);  // o: y is the residual
  std::vector<uint16_t> h = testing::ToBf16(testing::RandomFloats(kRows * kHidden, 5));
  const std::vector<uint16_t> gamma =
      testing::ToBf16(testing::RandomFloats(kHidden, 7, 0.5f, 1.5f));
  std::vector<uint16_t> next_x(kRows * kHidden);
  std::vector<float> sums(kRows * kHidden / 16);
  res.p.y = h.data();
  res.p.add_to_y = true;
  res.p.fold_norm = {.weight = gamma.data(), .x = next_x.data(), .sum_sq = sums.data()};
  ASSERT_TRUE(Int4GemmRef(res.p).ok());
  for (int32_t m = 0; m < kRows; ++m) {
    for (int64_t t = 0; t < kHidden / 16; ++t) {
      double want = 0;
      for (int64_t c = 16 * t; c < 16 * t + 16; ++c) {
        const double v = Bf16ToFloat(h[m * kHidden + c]);
        want += v * v;
        EXPECT_EQ(next_x[m * kHidden + c],
                  FloatToBf16(Bf16ToFloat(gamma[c]) * Bf16ToFloat(h[m * kHidden + c])))
            << m << "," << c;
      }
      EXPECT_NEAR(sums[m * kHidden / 16 + t], want, 1e-6 * want) << m << "," << t;
    }
  }
  // The normed product (gate_up's place): folded, and RMSNorm in its prologue.
  Fixture normed = Make(64, kHidden, 64, Int4Offsets::kZero, kRows);
  std::vector<uint16_t> folded(kRows * 64), apart(kRows * 64);
  normed.p.x = next_x.data();
  normed.p.x_sum_sq = sums.data();
  normed.p.y = folded.data();
  ASSERT_TRUE(Int4GemmRef(normed.p).ok());
  normed.p.x = h.data();
  normed.p.x_sum_sq = nullptr;
  normed.p.prologue = GemvPrologue::kRmsNorm;
  normed.p.norm_weight = gamma.data();
  normed.p.y = apart.data();
  ASSERT_TRUE(Int4GemmRef(normed.p).ok());
  double squares = 0;
  for (uint16_t v : apart) squares += std::pow(Bf16ToFloat(v), 2);
  const double rms = std::sqrt(squares / static_cast<double>(apart.size()));
  for (int32_t m = 0; m < kRows; ++m) {
    double mean_sq = 0;
    for (int64_t c = 0; c < kHidden; ++c) mean_sq += std::pow(Bf16ToFloat(h[m * kHidden + c]), 2);
    const double r = 1.0 / std::sqrt(mean_sq / kHidden + normed.p.eps);
    for (int64_t o = 0; o < 64; ++o) {
      double dot = 0;
      for (int64_t c = 0; c < kHidden; ++c) {
        dot += double{normed.m.Value(o, c)} * Bf16ToFloat(next_x[m * kHidden + c]);
      }
      const float got = Bf16ToFloat(folded[m * 64 + o]);
      EXPECT_NEAR(got, r * dot, 1e-2 * std::abs(r * dot) + 1e-4 * rms) << m << "," << o;
      EXPECT_NEAR(got, Bf16ToFloat(apart[m * 64 + o]), 2e-2 * std::abs(got) + rms / 64)
          << m << "," << o;
    }
  }
}

// A folded RMSNorm: kStream or kAuto (never kTiled or kWgmma), up to 16
// rows, no prologue; the fold's outputs with a residual add into BF16 y.
TEST(Int4GemmRefTest, FoldsOnlyWhereKStreamTakesThem) {
  Fixture f = Make(64, 1024, 128, Int4Offsets::kSymmetric, 16);
  std::vector<uint16_t> y(17 * 64), next_x(17 * 64), gamma(64, 0x3F80);
  std::vector<float> sums(17 * 64), x_sums(17 * 64);
  f.p.y = y.data();
  f.p.add_to_y = true;
  f.p.fold_norm = {.weight = gamma.data(), .x = next_x.data(), .sum_sq = sums.data()};
  EXPECT_TRUE(CheckInt4GemmParams(f.p, "op").ok());
  EXPECT_FALSE(Int4GemmUsesTiled(f.p));
  EXPECT_FALSE(Int4GemmWgmmaFits(f.p));
  f.p.rows = 17;
  const absl::Status rows = CheckInt4GemmParams(f.p, "op");
  EXPECT_EQ(rows.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(rows.message(), ::testing::HasSubstr("fold_norm with rows=17"));
  f.p.rows = 4;
  f.p.path = Int4GemmPath::kTiled;
  EXPECT_THAT(CheckInt4GemmParams(f.p, "op").message(), ::testing::HasSubstr("off kStream"));
  f.p.path = Int4GemmPath::kAuto;
  f.p.add_to_y = false;
  const absl::Status no_add = CheckInt4GemmParams(f.p, "op");
  EXPECT_EQ(no_add.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(no_add.message(), ::testing::HasSubstr("fold_norm needs add_to_y"));
  f.p.add_to_y = true;
  f.p.fold_norm.sum_sq = nullptr;
  EXPECT_EQ(CheckInt4GemmParams(f.p, "op").code(), absl::StatusCode::kInvalidArgument);
  f.p.fold_norm = {};
  f.p.add_to_y = false;
  f.p.x_sum_sq = x_sums.data();
  EXPECT_TRUE(CheckInt4GemmParams(f.p, "op").ok());
  f.p.prologue = GemvPrologue::kRmsNorm;
  f.p.norm_weight = gamma.data();
  const absl::Status prologue = CheckInt4GemmParams(f.p, "op");
  EXPECT_EQ(prologue.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(prologue.message(), ::testing::HasSubstr("x_sum_sq with rows=4 and a prologue"));
  f.p.prologue = GemvPrologue::kNone;
  f.p.x_sum_sq = x_sums.data() + 1;
  EXPECT_THAT(CheckInt4GemmParams(f.p, "op").message(), ::testing::HasSubstr("16-byte aligned"));
}

// kAuto: the stream kernel up to 16 rows and with the RMSNorm prologue, the
// tiled one from 17 rows, its tile by the rows.
TEST(Int4GemmRefTest, PicksThePathByRows) {
  Int4GemmParams p;
  for (const auto [rows, tiled, tile_rows] :
       {std::tuple{1, false, 16}, std::tuple{16, false, 16}, std::tuple{17, true, 32},
        std::tuple{32, true, 32}, std::tuple{33, true, 64}, std::tuple{64, true, 64},
        std::tuple{65, true, 64}, std::tuple{128, true, 64}, std::tuple{256, true, 64}}) {
    p.rows = rows;
    EXPECT_EQ(Int4GemmUsesTiled(p), tiled) << rows;
    EXPECT_EQ(Int4GemmTiledRows(p), tile_rows) << rows;
  }
  p.rows = 3;
  p.path = Int4GemmPath::kTiled;
  p.tile_rows = 128;
  EXPECT_TRUE(Int4GemmUsesTiled(p));
  EXPECT_EQ(Int4GemmTiledRows(p), 128);
  p.rows = 40;
  p.path = Int4GemmPath::kStream;
  EXPECT_FALSE(Int4GemmUsesTiled(p));
}

// kGemv: kAuto takes it up to int4_gemv_max_rows rows where x's rows fit its
// shared memory, with or without the RMSNorm prologue (its weight 16-byte
// aligned), and no folded norm or trace; path kGemv elsewhere is refused,
// naming what it does not take.
TEST(Int4GemmRefTest, GemvWhereXFitsAndOnlyTheProductIsAsked) {
  Fixture f = Make(64, 8192, 128, Int4Offsets::kZero, 7);
  std::vector<uint16_t> y(7 * 64), gamma(8192, 0x3F80);
  std::vector<float> x_sums(7 * 8192 / 16);
  f.p.y = y.data();
  LaunchSettings s;
  s.int4_gemv_max_rows = 0;
  f.p.rows = 1;
  EXPECT_TRUE(Int4GemmGemvFits(f.p));
  EXPECT_FALSE(Int4GemmUsesGemv(f.p, s));
  s.int4_gemv_max_rows = 8;
  EXPECT_TRUE(Int4GemmUsesGemv(f.p, s));
  EXPECT_FALSE(Int4GemmUsesTiled(f.p));
  // 6 rows of 8192 columns: 6 * 8200 * 2 + 4096 = 102496 bytes; 7: 118896.
  f.p.rows = 6;
  EXPECT_EQ(Int4GemmGemvSmemBytes(6, 8192), 102496);
  EXPECT_TRUE(Int4GemmUsesGemv(f.p, s));
  f.p.rows = 7;
  EXPECT_FALSE(Int4GemmUsesGemv(f.p, s));
  f.p.path = Int4GemmPath::kGemv;
  EXPECT_TRUE(Int4GemmUsesGemv(f.p, s));  // forced, and refused by the checks
  absl::Status st = CheckInt4GemmParams(f.p, "op");
  EXPECT_EQ(st.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(st.message(), ::testing::HasSubstr("path kGemv does not take rows=7 k=8192"));
  EXPECT_THAT(st.message(), ::testing::HasSubstr("118896 here"));
  f.p.rows = 2;
  EXPECT_TRUE(CheckInt4GemmParams(f.p, "op").ok()) << CheckInt4GemmParams(f.p, "op");
  f.p.prologue = GemvPrologue::kRmsNorm;
  f.p.norm_weight = gamma.data();
  EXPECT_TRUE(Int4GemmGemvFits(f.p));
  EXPECT_TRUE(CheckInt4GemmParams(f.p, "op").ok()) << CheckInt4GemmParams(f.p, "op");
  f.p.norm_weight = gamma.data() + 1;  // 2 bytes past a 16-byte boundary
  EXPECT_FALSE(Int4GemmGemvFits(f.p));
  st = CheckInt4GemmParams(f.p, "op");
  EXPECT_THAT(st.message(), ::testing::HasSubstr("rows=2 k=8192 with norm_weight not 16-byte"));
  f.p.norm_weight = gamma.data();
  f.p.rows = 5;  // the prologue takes at most kInt4GemmMaxNormRows
  EXPECT_THAT(CheckInt4GemmParams(f.p, "op").message(), ::testing::HasSubstr("prologue"));
  f.p.rows = 2;
  f.p.prologue = GemvPrologue::kNone;
  f.p.x_sum_sq = x_sums.data();
  EXPECT_FALSE(Int4GemmGemvFits(f.p));
  f.p.x_sum_sq = nullptr;
  uint64_t trace = 0;
  f.p.trace = &trace;
  EXPECT_FALSE(Int4GemmGemvFits(f.p));
  EXPECT_THAT(CheckInt4GemmParams(f.p, "op").message(), ::testing::HasSubstr(" traced"));
  f.p.trace = nullptr;
  f.p.x = f.x.data() + 4;  // 8 bytes past a 16-byte boundary
  f.p.x_row_stride = 8192;
  EXPECT_FALSE(Int4GemmGemvFits(f.p));
  EXPECT_THAT(CheckInt4GemmParams(f.p, "op").message(),
              ::testing::HasSubstr("with x not 16-byte aligned"));
  f.p.x = f.x.data();
  f.p.path = Int4GemmPath::kAuto;
  f.p.rows = 1;
  s.int4_gemv_max_rows = 1;
  EXPECT_TRUE(Int4GemmUsesGemv(f.p, s));
  f.p.rows = 2;
  EXPECT_FALSE(Int4GemmUsesGemv(f.p, s));
}

// Past 64 rows kWgmma takes 128-row tiles, or 64-row ones where 128-row
// tiles would split K into parts of fewer than int4_wgmma_min_split_stages
// stages. The cases: the llama3-8b and -70b projections (group 128) on an
// H100's 132 SMs at 128 and 256 rows, each expecting the tiling that
// kernels-int4 measured faster there (bench/results, the 4-bit page).
TEST(Int4GemmRefTest, WgmmaTilesOf128RowsSplitOnlyIntoLongParts) {
  struct Case {
    const char* name;
    int64_t n, k;
    int32_t rows, tile;
  };
  for (const Case& c :
       {Case{"70b qkv", 10240, 8192, 128, 128}, Case{"70b o", 8192, 8192, 128, 64},
        Case{"70b gate_up", 57344, 8192, 128, 128}, Case{"70b down", 8192, 28672, 128, 128},
        Case{"8b qkv", 6144, 4096, 128, 64}, Case{"8b o", 4096, 4096, 128, 64},
        Case{"8b gate_up", 28672, 4096, 128, 128}, Case{"8b down", 4096, 14336, 128, 64},
        Case{"70b o", 8192, 8192, 256, 128}, Case{"8b qkv", 6144, 4096, 256, 128},
        Case{"8b o", 4096, 4096, 256, 64}, Case{"8b down", 4096, 14336, 256, 128}}) {
    Int4GemmParams p;
    p.w = {.n = c.n, .k = c.k, .group = 128, .offset_kind = Int4Offsets::kSymmetric};
    p.rows = c.rows;
    EXPECT_EQ(Int4GemmWgmmaRows(p, LaunchSettings{}, 132), c.tile) << c.name << ", " << c.rows;
    EXPECT_EQ(Int4GemmWgmmaRows(p, LaunchSettings{.int4_wgmma_min_split_stages = 0}, 132), 128)
        << c.name << ", " << c.rows;
    // The 70B o product splits in two at 128-row tiles (32 stages each).
    if (c.n == 8192 && c.k == 8192 && c.rows == 128) {
      EXPECT_EQ(Int4GemmWgmmaSplits(p, 128, 132), 2);
      EXPECT_EQ(Int4GemmWgmmaSplits(p, 64, 132), 1);
    }
  }
}

// Int4GemmAutoWgmma: kAuto's kWgmma from int4_wgmma_from_rows rows, and
// below it from int4_wgmma_split_from_rows rows only where the launch's
// 16-row tiles split K on the SMs (at most half as many tiles as SMs) and
// its grid (tiles x parts) takes at most int4_wgmma_split_max_grid_percent
// of them.
TEST(Int4GemmRefTest, AutoWgmmaBelowFromRowsOnlyWhereTheTilesSplitK) {
  LaunchSettings settings{.int4_wgmma_split_from_rows = 9};
  Int4GemmParams p;
  p.rows = 16;
  // (n, k) of the 70B, 8B and 123B projections, K's parts and the grid at
  // 16 rows on 132 SMs.
  const struct {
    int64_t n, k, parts, grid;
  } shapes[] = {
      {8192, 8192, 2, 128},    // 70B o: 64 tiles
      {8192, 28672, 2, 128},   // 70B down
      {10240, 8192, 1, 80},    // 70B qkv: 80 tiles, one wave, K whole
      {57344, 8192, 1, 448},   // 70B gate_up: 448 tiles
      {6144, 4096, 2, 96},     // 8B qkv: 48 tiles
      {4096, 4096, 4, 128},    // 8B o: 32 tiles
      {4096, 14336, 4, 128},   // 8B down
      {12288, 12288, 1, 96},   // 123B o: 96 tiles
      {14336, 12288, 1, 112},  // 123B qkv: 112 tiles
      {1024, 4096, 8, 64},     // 8 tiles, 8 parts at most (32 stages / 4)
  };
  for (const auto& s : shapes) {
    p.w = {.n = s.n, .k = s.k, .group = 128, .offset_kind = Int4Offsets::kSymmetric};
    EXPECT_EQ(Int4GemmWgmmaSplits(p, 16, 132), s.parts) << s.n << " x " << s.k;
    EXPECT_FALSE(Int4GemmAutoWgmma(p, LaunchSettings{}, 132)) << s.n << " x " << s.k;  // off
    for (int32_t percent : {100, 97, 96, 75, 72, 48, 1}) {
      settings.int4_wgmma_split_max_grid_percent = percent;
      EXPECT_EQ(Int4GemmAutoWgmma(p, settings, 132), s.parts > 1 && s.grid * 100 <= 132 * percent)
          << s.n << " x " << s.k << ", grids up to " << percent << " % of 132 SMs";
    }
  }
  settings.int4_wgmma_split_max_grid_percent = 100;
  p.w = {.n = 8192, .k = 8192, .group = 128, .offset_kind = Int4Offsets::kSymmetric};
  p.rows = 9;
  EXPECT_TRUE(Int4GemmAutoWgmma(p, settings, 132));
  p.rows = 8;  // below split_from_rows
  EXPECT_FALSE(Int4GemmAutoWgmma(p, settings, 132));
  p.rows = 16;
  EXPECT_FALSE(Int4GemmAutoWgmma(p, settings, 64));  // 64 tiles fill 64 SMs
  p.w.offset_kind = Int4Offsets::kFloat;             // kWgmma does not fit mins
  EXPECT_FALSE(Int4GemmAutoWgmma(p, settings, 132));
  p.w.offset_kind = Int4Offsets::kSymmetric;
  p.w.n = 57344;
  p.rows = 17;  // from int4_wgmma_from_rows: whether or not K splits
  EXPECT_TRUE(Int4GemmAutoWgmma(p, settings, 132));
  EXPECT_TRUE(Int4GemmAutoWgmma(p, LaunchSettings{}, 132));
  settings.int4_wgmma_from_rows = 0;
  EXPECT_FALSE(Int4GemmAutoWgmma(p, settings, 132));
}

// LaunchSettings::int4_wgmma_tail_split: only a last wave that leaves SMs
// idle is split, each of its tiles into as many parts as fill them (at least
// 4 stages a part); none where the tiles fit one wave, fill their waves, or
// the launch already splits, in clusters or by wgmma_splits.
TEST(Int4GemmRefTest, WgmmaTailSplitsTheLastWaveOnly) {
  const LaunchSettings on;  // served: the split on
  const LaunchSettings off{.int4_wgmma_tail_split = false};
  Int4GemmParams p;
  p.w = {.n = 57344, .k = 8192, .group = 128, .offset_kind = Int4Offsets::kSymmetric};
  p.rows = 128;  // 70B gate_up: 448 tiles of 128 x 128, 64 stages
  Int4WgmmaTail tail = Int4GemmWgmmaTail(p, on, 132);
  EXPECT_EQ(tail.whole, 396);  // three waves whole, 52 tiles in two parts each
  EXPECT_EQ(tail.parts, 2);
  EXPECT_EQ(Int4GemmWgmmaTail(p, off, 132).parts, 1);
  p.w.n = 140 * 128;  // 140 tiles: 8 in the last wave, 16 stages: 4 parts of 4
  p.w.k = 2048;
  tail = Int4GemmWgmmaTail(p, on, 132);
  EXPECT_EQ(tail.whole, 132);
  EXPECT_EQ(tail.parts, 4);
  p.w.k = 1152;  // 9 stages: parts of at least 4 stages, so 2 (5 and 4)
  EXPECT_EQ(Int4GemmWgmmaTail(p, on, 132).parts, 2);
  p.w.k = 896;  // 7 stages: no part of 4
  EXPECT_EQ(Int4GemmWgmmaTail(p, on, 132).parts, 1);
  p.w.k = 8192;
  p.w.n = 264 * 128;  // two whole waves
  EXPECT_EQ(Int4GemmWgmmaTail(p, on, 132).parts, 1);
  p.w.n = 10240;  // 70B qkv: 80 tiles, one wave
  EXPECT_EQ(Int4GemmWgmmaTail(p, on, 132).parts, 1);
  p.w.n = 57344;
  p.wgmma_splits = 2;
  p.path = Int4GemmPath::kWgmma;
  EXPECT_EQ(Int4GemmWgmmaTail(p, on, 132).parts, 1);
  p.wgmma_splits = 0;
  LaunchSettings clusters = on;
  clusters.int4_wgmma_cluster = 2;
  EXPECT_EQ(Int4GemmWgmmaTail(p, clusters, 132).parts, 1);
}

// Int4GemmParams::wgmma_splits forces K's parts on path kWgmma: each part
// at least 4 stages of 128 columns, the partial sums within the workspace;
// the rule for the tiles' rows still counts the launch's own splits.
TEST(Int4GemmRefTest, WgmmaSplitsForcedWithinTheStagesAndTheWorkspace) {
  Int4GemmParams p;
  p.w = {.n = 10240, .k = 8192, .group = 128, .offset_kind = Int4Offsets::kSymmetric};
  p.rows = 128;
  EXPECT_EQ(Int4GemmWgmmaSplits(p, 128, 132), 1);  // 80 tiles: no split of its own
  p.wgmma_splits = 3;
  EXPECT_EQ(Int4GemmWgmmaSplits(p, 128, 132), 3);
  EXPECT_EQ(Int4GemmWgmmaRows(p, LaunchSettings{}, 132), 128);
  EXPECT_TRUE(CheckInt4GemmWgmmaSplits(p, 128, 3, 132).ok());
  // 80 tiles x 4 parts of 64 KB: 320 slots; n = 10240 on 16 SMs holds 72.
  const absl::Status full = CheckInt4GemmWgmmaSplits(p, 128, 4, 16);
  EXPECT_EQ(full.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(full.message(), ::testing::HasSubstr("wgmma_splits=4"));
  EXPECT_THAT(full.message(), ::testing::HasSubstr("320 partial-sum slots"));
  EXPECT_TRUE(CheckInt4GemmWgmmaSplits(p, 128, 1, 16).ok());  // one part: no slots

  std::vector<uint16_t> x(128 * 8192), y(128 * 10240);
  p.x = x.data();
  p.x_row_stride = 8192;
  p.y = y.data();
  p.w.codes = x.data();  // only the checks read these parameters
  p.w.scales = x.data();
  p.path = Int4GemmPath::kWgmma;
  EXPECT_TRUE(CheckInt4GemmParams(p, "op").ok()) << CheckInt4GemmParams(p, "op");
  p.wgmma_splits = 17;  // 64 stages: at most 16 parts of 4
  absl::Status st = CheckInt4GemmParams(p, "op");
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), ::testing::HasSubstr("wgmma_splits=17"));
  EXPECT_THAT(st.message(), ::testing::HasSubstr("at most 16"));
  p.wgmma_splits = -1;
  st = CheckInt4GemmParams(p, "op");
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), ::testing::HasSubstr("wgmma_splits=-1"));
  p.wgmma_splits = 2;
  p.path = Int4GemmPath::kTiled;
  st = CheckInt4GemmParams(p, "op");
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), ::testing::HasSubstr("on path kWgmma"));
}

// kWgmma takes symmetric and zero-point groups of a multiple of 128 columns
// over k % 128 == 0, without a prologue, x 16-byte aligned; x tiles of the
// least of 16, 32, 64 and 128 rows that holds the rows, 128 past that (by
// rows alone: int4_wgmma_min_split_stages 0). Asked for where it does not
// fit, the checks refuse naming the group, k and what it takes.
TEST(Int4GemmRefTest, WgmmaTakesWholeStagesOfGroupsWithoutMins) {
  Fixture f = Make(256, 1024, 128, Int4Offsets::kZero, 40);
  std::vector<uint16_t> y(40 * 256);
  f.p.y = y.data();
  f.p.path = Int4GemmPath::kWgmma;
  EXPECT_TRUE(Int4GemmWgmmaFits(f.p));
  EXPECT_TRUE(CheckInt4GemmParams(f.p, "op").ok());
  EXPECT_FALSE(Int4GemmUsesTiled(f.p));
  // Tiles by rows alone (int4_wgmma_min_split_stages 0; the split rule:
  // WgmmaTilesOf128RowsSplitOnlyIntoLongParts).
  const LaunchSettings by_rows{.int4_wgmma_min_split_stages = 0};
  for (const auto [rows, tile] : {std::pair{1, 16}, std::pair{16, 16}, std::pair{17, 32},
                                  std::pair{40, 64}, std::pair{65, 128}, std::pair{256, 128}}) {
    f.p.rows = rows;
    EXPECT_EQ(Int4GemmWgmmaRows(f.p, by_rows, 132), tile) << rows;
  }
  f.p.tile_rows = 32;
  EXPECT_EQ(Int4GemmWgmmaRows(f.p, LaunchSettings{}, 132), 32);
  f.p.tile_rows = 0;
  f.p.rows = 40;
  // Clusters: the params' size, else the setting's; 1 where it does not
  // divide the row groups (256 rows: 2) or leaves a block under 8 x rows.
  const auto cluster_of = [&](int32_t setting) {
    return Int4GemmWgmmaCluster(f.p, LaunchSettings{.int4_wgmma_cluster = setting}, 132);
  };
  EXPECT_EQ(cluster_of(2), 2);
  EXPECT_EQ(cluster_of(4), 1);
  f.p.cluster = 1;
  EXPECT_EQ(cluster_of(2), 1);
  f.p.cluster = 2;
  f.p.rows = 16;
  EXPECT_EQ(cluster_of(1), 2);  // 16-row tiles: 8 rows a block
  f.p.rows = 40;
  f.p.cluster = 3;
  const absl::Status cluster = CheckInt4GemmParams(f.p, "op");
  EXPECT_EQ(cluster.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(cluster.message(), ::testing::HasSubstr("cluster=3"));
  f.p.cluster = 0;
  f.p.rows = 40;
  // Scaled weights: clusters of 1, the overlap, tiles of the setting's rows
  // and more (40 rows: 64-row tiles).
  LaunchSettings s{.int4_wgmma_cluster = 1, .int4_wgmma_scaled_from_rows = 64};
  EXPECT_TRUE(Int4GemmWgmmaScaled(f.p, s, 132));
  s.int4_wgmma_scaled_from_rows = 128;
  EXPECT_FALSE(Int4GemmWgmmaScaled(f.p, s, 132));
  s.int4_wgmma_scaled_from_rows = 0;
  EXPECT_FALSE(Int4GemmWgmmaScaled(f.p, s, 132));
  s.int4_wgmma_scaled_from_rows = 16;
  s.int4_wgmma_overlap = false;
  EXPECT_FALSE(Int4GemmWgmmaScaled(f.p, s, 132));
  s.int4_wgmma_overlap = true;
  s.int4_wgmma_cluster = 2;
  EXPECT_FALSE(Int4GemmWgmmaScaled(f.p, s, 132));
  const auto x_at = [&](int64_t offset) { f.p.x = f.x.data() + offset; };
  x_at(4);  // 8 bytes off
  EXPECT_FALSE(Int4GemmWgmmaFits(f.p));
  x_at(0);
  for (const auto& [k, group, offsets] :
       {std::tuple{1024, 64, Int4Offsets::kZero}, std::tuple{1024, 128, Int4Offsets::kFloat},
        std::tuple{1088, 1088, Int4Offsets::kSymmetric}}) {
    Fixture g = Make(256, k, group, offsets, 40);
    g.p.y = y.data();
    g.p.path = Int4GemmPath::kWgmma;
    EXPECT_FALSE(Int4GemmWgmmaFits(g.p)) << k << " " << group;
    const absl::Status st = CheckInt4GemmParams(g.p, "op");
    EXPECT_EQ(st.code(), absl::StatusCode::kUnimplemented) << k << " " << group;
    EXPECT_THAT(st.message(), ::testing::HasSubstr(absl::StrCat("group=", group, " k=", k)));
    g.p.path = Int4GemmPath::kAuto;
    EXPECT_TRUE(CheckInt4GemmParams(g.p, "op").ok());
  }
}

// Int4GemmParams::stream_cluster: 2, 4 or 8 on path kStream, up to 16 rows
// without a prologue, a block two k tiles or more; refusals name the field.
TEST(Int4GemmRefTest, StreamClusterTakesKStreamUpTo16RowsWithoutAPrologue) {
  Fixture f = Make(64, 1024, 128, Int4Offsets::kSymmetric, 16);  // 16 k tiles
  std::vector<uint16_t> y(16 * 64);
  f.p.y = y.data();
  f.p.path = Int4GemmPath::kStream;
  for (const int32_t g : {2, 4, 8}) {
    f.p.stream_cluster = g;
    EXPECT_TRUE(CheckInt4GemmParams(f.p, "op").ok()) << g;
  }
  f.p.stream_cluster = 3;
  const absl::Status size = CheckInt4GemmParams(f.p, "op");
  EXPECT_EQ(size.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(size.message(), ::testing::HasSubstr("stream_cluster=3"));
  f.p.stream_cluster = 2;
  f.p.path = Int4GemmPath::kAuto;
  const absl::Status path = CheckInt4GemmParams(f.p, "op");
  EXPECT_EQ(path.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(path.message(), ::testing::HasSubstr("off path kStream"));
  f.p.path = Int4GemmPath::kStream;
  f.p.rows = 17;
  std::vector<uint16_t> y17(17 * 64);
  f.p.y = y17.data();
  EXPECT_THAT(CheckInt4GemmParams(f.p, "op").message(), ::testing::HasSubstr("rows=17"));
  f.p.rows = 16;
  Fixture short_k = Make(64, 448, 64, Int4Offsets::kSymmetric, 1);  // 7 k tiles
  short_k.p.y = y.data();
  short_k.p.path = Int4GemmPath::kStream;
  short_k.p.stream_cluster = 4;
  const absl::Status tiles = CheckInt4GemmParams(short_k.p, "op");
  EXPECT_EQ(tiles.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(tiles.message(), ::testing::HasSubstr("stream_cluster=4"));
  EXPECT_THAT(tiles.message(), ::testing::HasSubstr("7 tiles"));
  short_k.p.stream_cluster = 2;
  EXPECT_TRUE(CheckInt4GemmParams(short_k.p, "op").ok());
}

// kStream's cluster split (LaunchSettings::int4_cluster_split_k): the largest
// of 8, 4 and 2 whose blocks fill at least 19/20 of the grid without passing
// it, each block two k tiles or more; else 0.
TEST(Int4GemmClusterSizeTest, FillsTheGridOrDeclines) {
  // 132 SMs: 264 blocks at up to 8 rows, 132 at 9-16.
  EXPECT_EQ(Int4GemmClusterSize(32, 64, 264), 8);    // llama3-8b o: 256 blocks
  EXPECT_EQ(Int4GemmClusterSize(32, 224, 264), 8);   // 8b down
  EXPECT_EQ(Int4GemmClusterSize(64, 128, 264), 4);   // 70b o
  EXPECT_EQ(Int4GemmClusterSize(64, 448, 264), 4);   // 70b down
  EXPECT_EQ(Int4GemmClusterSize(32, 64, 132), 4);    // 8b o at 16 rows
  EXPECT_EQ(Int4GemmClusterSize(64, 448, 132), 2);   // 70b down at 16 rows
  EXPECT_EQ(Int4GemmClusterSize(33, 64, 264), 8);    // exactly the grid
  EXPECT_EQ(Int4GemmClusterSize(48, 64, 264), 0);    // 8b qkv: 192 of 264 blocks at most
  EXPECT_EQ(Int4GemmClusterSize(80, 128, 264), 0);   // 70b qkv: 160
  EXPECT_EQ(Int4GemmClusterSize(224, 64, 264), 0);   // 8b gate_up: a row group a block
  EXPECT_EQ(Int4GemmClusterSize(448, 128, 264), 0);  // 70b gate_up: past the grid
  EXPECT_EQ(Int4GemmClusterSize(5, 9, 264), 0);      // SmolLM2's o
  EXPECT_EQ(Int4GemmClusterSize(32, 15, 264), 0);    // 8 blocks need 16 k tiles
  EXPECT_EQ(Int4GemmClusterSize(64, 7, 264), 0);     // 4 need 8
  EXPECT_EQ(Int4GemmClusterSize(126, 8, 264), 2);    // 252 blocks
  EXPECT_EQ(Int4GemmClusterSize(125, 8, 264), 0);    // 250 blocks: under 19/20
}

}  // namespace
}  // namespace onecard::engine
