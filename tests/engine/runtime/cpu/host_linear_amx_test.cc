// The AMX 4-bit kernel of HostLinearForward (engine/runtime/cpu/
// host_linear_amx.inc) over an emulated tile unit, so that its layouts (the
// A operands decoded from the device layout, x's B operands, the C tiles of
// one group each, the scales, the offsets, blocks and open groups) are
// checked on any processor with AVX-512 BF16, not only on one with AMX
// (where host_linear_test.cc runs the real one). The emulation follows the
// instructions' definitions in Intel's SDM: LDTILECFG's rows and bytes a
// row, TILELOADD / TILESTORED row by row at a stride, and TDPBF16PS:
//   for m < rows(C), k < colsb(A) / 4, n < colsb(C) / 4:
//     C[m][n] += A[m].bf16[2k] * B[k].bf16[2n];
//     C[m][n] += A[m].bf16[2k + 1] * B[k].bf16[2n + 1]
// in fp32, round to nearest even, BF16 denormal inputs read as zero and
// denormal results written as zero. Against HostLinearRef (W decoded from
// the layout, sums in double) within the bound host_linear_test.cc uses,
// over groups of 32, 64, 128, 192, 320 and one a row, every offset kind,
// with and without a column map, and BF16 weights of short last tiles and
// runs, 1, 3, 8 and 11 rows; and row r of a call of several rows equals a
// one-row call bit for bit (group 0 below: the BF16 weight).
#include <immintrin.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <tuple>
#include <vector>

#include "engine/common/thread_pool.h"
#include "engine/kernels/int4_matrix.h"
#include "engine/runtime/cpu/cpu_linear.h"
#include "engine/runtime/cpu/host_linear.h"
#include "engine/runtime/cpu/host_linear_kernels.h"
#include "gtest/gtest.h"
#include "tests/engine/runtime/cpu/host_linear_testing.h"

namespace onecard::engine::host_linear {
namespace {

#include "engine/runtime/cpu/host_linear_amx.inc"

// A tile register: up to 16 rows of 64 bytes, as configured.
struct Tile {
  int rows = 0;
  int colsb = 0;
  uint8_t bytes[16][64];
};

// Eight tile registers, configured per thread.
struct EmulatedTiles {
  static inline thread_local Tile tiles[8];

  static void Configure(const TileConfig& config) {
    for (int t = 0; t < 8; ++t) {
      tiles[t].rows = config.tile_rows[t];
      tiles[t].colsb = config.colsb[t];
      std::memset(tiles[t].bytes, 0, sizeof(tiles[t].bytes));
    }
  }
  static void Release() {
    for (Tile& t : tiles) t = Tile{};
  }
  template <int T>
  static void Zero() {
    std::memset(tiles[T].bytes, 0, sizeof(tiles[T].bytes));
  }
  template <int T>
  static void Load(const void* base, int64_t stride) {
    for (int r = 0; r < tiles[T].rows; ++r) {
      std::memcpy(tiles[T].bytes[r], static_cast<const uint8_t*>(base) + r * stride,
                  tiles[T].colsb);
    }
  }
  template <int T>
  static void Store(void* base, int64_t stride) {
    for (int r = 0; r < tiles[T].rows; ++r) {
      std::memcpy(static_cast<uint8_t*>(base) + r * stride, tiles[T].bytes[r], tiles[T].colsb);
    }
  }
  // A BF16 element as fp32, denormals as zero.
  static float Bf16(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    if ((h & 0x7f80) == 0) h &= 0x8000;
    const uint32_t bits = uint32_t{h} << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  static float FlushDenormal(float f) { return std::fpclassify(f) == FP_SUBNORMAL ? 0.0f * f : f; }
  template <int C, int A, int B>
  static void Dot() {
    Tile& c = tiles[C];
    const Tile& a = tiles[A];
    const Tile& b = tiles[B];
    for (int m = 0; m < c.rows; ++m) {
      for (int k = 0; k < a.colsb / 4; ++k) {
        for (int n = 0; n < c.colsb / 4; ++n) {
          float acc;
          std::memcpy(&acc, c.bytes[m] + 4 * n, 4);
          const float p0 = Bf16(a.bytes[m] + 4 * k) * Bf16(b.bytes[k] + 4 * n);  // exact
          acc = FlushDenormal(acc + p0);
          const float p1 = Bf16(a.bytes[m] + 4 * k + 2) * Bf16(b.bytes[k] + 4 * n + 2);
          acc = FlushDenormal(acc + p1);
          std::memcpy(c.bytes[m] + 4 * n, &acc, 4);
        }
      }
    }
  }
};

const Kernels& Emulated() {
  static const Kernels kernels = AmxKernelsOver<EmulatedTiles>();
  return kernels;
}

bool Runs() { return CpuSupports(CpuIsa::kAvx512Bf16); }

// The emulated kernels against HostLinearRef on `rows` rows of x (dense: W
// in fp32, for the bound).
void ExpectEmulatedMatches(const HostWeight& w, const std::vector<float>& dense, int64_t rows,
                           uint32_t seed) {
  ASSERT_TRUE(CheckHostWeight(w, "w").ok());
  const std::vector<float> x = testing::Activations(rows * w.k, seed);
  std::vector<float> want(rows * w.n);
  HostLinearRef(w, x.data(), rows, want.data());
  const std::vector<float> bound = testing::Bounds(dense, w, x, rows);
  ThreadPool pool(3);
  HostLinearScratch scratch;
  std::vector<float> got(rows * w.n, std::nanf(""));
  ForwardWith(pool, w, x.data(), rows, got.data(), &scratch, Emulated());
  for (int64_t i = 0; i < rows * w.n; ++i) {
    ASSERT_NEAR(got[i], want[i], bound[i]) << "row " << i / w.n << " output " << i % w.n;
  }
}

// (n, k, group)
using Shape = std::tuple<int64_t, int64_t, int32_t>;
constexpr Shape kShapes[] = {{16, 64, 32},   {48, 192, 64},   {48, 960, 192},
                             {48, 960, 320}, {144, 4096, 32}, {144, 4096, 128},
                             {16, 512, 512}, {1040, 192, 64}, {272, 1024, 128}};

using Case = std::tuple<Shape, Int4Offsets, bool, int64_t>;

class HostLinearAmxTest : public ::testing::TestWithParam<Case> {};

TEST_P(HostLinearAmxTest, EmulatedMatchesReference) {
  if (!Runs()) GTEST_SKIP() << "the emulated kernel's decoding needs AVX-512 BF16";
  const auto [shape, offsets, act_order, rows] = GetParam();
  const auto [n, k, group] = shape;
  const testing::Int4Fixture f =
      testing::MakeInt4(n, k, group, offsets, act_order, static_cast<uint32_t>(n + k));
  ExpectEmulatedMatches(f.w, DequantizeInt4(f.m), rows, static_cast<uint32_t>(rows + group));
}

INSTANTIATE_TEST_SUITE_P(Shapes, HostLinearAmxTest,
                         ::testing::Combine(::testing::ValuesIn(kShapes),
                                            ::testing::Values(Int4Offsets::kSymmetric,
                                                              Int4Offsets::kZero,
                                                              Int4Offsets::kFloat),
                                            ::testing::Bool(), ::testing::Values(1, 3, 8, 11)));

// (n, k, rows): BF16 weights, short last tiles (n % 16) and runs (k % 32).
using Bf16Case = std::tuple<int64_t, int64_t, int64_t>;

class HostLinearAmxBf16Test : public ::testing::TestWithParam<Bf16Case> {};

TEST_P(HostLinearAmxBf16Test, EmulatedMatchesReference) {
  if (!Runs()) GTEST_SKIP() << "the emulated kernel's x layout needs AVX-512 BF16";
  const auto [n, k, rows] = GetParam();
  const testing::Bf16Fixture f = testing::MakeBf16(n, k, static_cast<uint32_t>(n * 7 + k));
  ExpectEmulatedMatches(f.w, testing::Dense(f), rows, static_cast<uint32_t>(rows + k));
}

INSTANTIATE_TEST_SUITE_P(Shapes, HostLinearAmxBf16Test,
                         ::testing::Combine(::testing::Values(1, 17, 144, 1040),
                                            ::testing::Values(7, 64, 100, 192, 4096),
                                            ::testing::Values(1, 3, 8, 11)));

TEST(HostLinearAmxInvarianceTest, EmulatedRowsAreBitwiseIndependent) {
  if (!Runs()) GTEST_SKIP() << "the emulated kernel's decoding needs AVX-512 BF16";
  const testing::Bf16Fixture bf16 = testing::MakeBf16(1040, 100, 84);
  const testing::Int4Fixture g32 = testing::MakeInt4(1040, 960, 32, Int4Offsets::kZero, true, 81);
  const testing::Int4Fixture g320 =
      testing::MakeInt4(1040, 960, 320, Int4Offsets::kFloat, false, 82);
  for (const HostWeight* w : {&g32.w, &g320.w, &bf16.w}) {
    const HostWeight& fw = *w;
    const int group = fw.group;
    constexpr int64_t kRows = 7;
    const std::vector<float> x = testing::Activations(kRows * fw.k, 71);
    ThreadPool three(3), one(1);
    HostLinearScratch scratch;
    std::vector<float> together(kRows * fw.n), on_one(kRows * fw.n);
    ForwardWith(three, fw, x.data(), kRows, together.data(), &scratch, Emulated());
    ForwardWith(one, fw, x.data(), kRows, on_one.data(), &scratch, Emulated());
    EXPECT_EQ(together, on_one) << "threads, group " << group;
    for (int64_t r = 0; r < kRows; ++r) {
      std::vector<float> alone(fw.n);
      ForwardWith(three, fw, x.data() + r * fw.k, 1, alone.data(), &scratch, Emulated());
      ASSERT_EQ(alone,
                std::vector<float>(together.begin() + r * fw.n, together.begin() + (r + 1) * fw.n))
          << "row " << r << ", group " << group;
    }
  }
}

}  // namespace
}  // namespace onecard::engine::host_linear
