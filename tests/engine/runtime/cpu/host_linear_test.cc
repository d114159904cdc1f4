// Tests of HostLinearForward (engine/runtime/cpu/host_linear.h): every kernel
// set the processor runs against HostLinearRef (W decoded from the device
// layout, sums in double) over awkward shapes: 4-bit n = 16..1040 (more than
// eight row groups, the last one partial), k = 64..4096, groups of 32, 64,
// 128, groups that straddle the kernels' blocks, and one group a row, every
// offset kind, with and without an act-order column map; BF16 of odd sizes
// (k not a multiple of 32, n not of 16); 1, 3, 8 and 11 rows (two passes).
// Outputs start poisoned. Also: the reference against the logical
// Int4Matrix; bitwise batch and thread-count invariance; x rounded to BF16;
// CheckHostWeight.
#include "engine/runtime/cpu/host_linear.h"

#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "engine/kernels/bf16.h"
#include "engine/kernels/int4_matrix.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/kernels/kernel_test_util.h"
#include "tests/engine/runtime/cpu/host_linear_testing.h"
#include "tests/testing/int4_testing.h"

namespace onecard::engine {
namespace {

using testing::Activations;
using testing::Bf16Fixture;
using testing::Bounds;
using testing::Dense;
using ::testing::HasSubstr;
using testing::Int4Fixture;
using testing::MakeBf16;
using testing::MakeInt4;

// dense: W [n, k] in fp32 in x's column order (for the bound).
void ExpectMatchesReference(const HostWeight& w, const std::vector<float>& dense, int64_t rows,
                            uint32_t seed) {
  const std::vector<float> x = Activations(rows * w.k, seed);
  std::vector<float> want(rows * w.n);
  HostLinearRef(w, x.data(), rows, want.data());
  const std::vector<float> bound = Bounds(dense, w, x, rows);
  ThreadPool pool(3);
  for (CpuIsa isa : SupportedCpuIsas()) {
    std::vector<float> got = testing::Poisoned(rows * w.n);
    HostLinearScratch scratch;
    HostLinearForward(pool, w, x.data(), rows, got.data(), &scratch, isa);
    for (int64_t i = 0; i < rows * w.n; ++i) {
      ASSERT_NEAR(got[i], want[i], bound[i])
          << CpuIsaName(isa) << " row " << i / w.n << " output " << i % w.n;
    }
  }
}

// (n, k, group)
using Int4Shape = std::tuple<int64_t, int64_t, int32_t>;
constexpr Int4Shape kInt4Shapes[] = {
    {16, 64, 32},      {16, 64, 64},    {48, 192, 32},    {48, 192, 64},   {48, 192, 192},
    {48, 960, 192},    {48, 960, 320},  {16, 4096, 64},   {144, 4096, 32}, {144, 4096, 128},
    {144, 4096, 4096}, {1040, 192, 64}, {1040, 4096, 128}};

// (shape, offsets, act order, rows)
using Int4Case = std::tuple<Int4Shape, Int4Offsets, bool, int64_t>;

class HostLinearInt4Test : public ::testing::TestWithParam<Int4Case> {};

TEST_P(HostLinearInt4Test, MatchesReference) {
  const auto [shape, offsets, act_order, rows] = GetParam();
  const auto [n, k, group] = shape;
  const Int4Fixture f = MakeInt4(n, k, group, offsets, act_order, static_cast<uint32_t>(n + k));
  ASSERT_TRUE(CheckHostWeight(f.w, "w").ok());
  ExpectMatchesReference(f.w, DequantizeInt4(f.m), rows, static_cast<uint32_t>(rows + group));
}

INSTANTIATE_TEST_SUITE_P(Shapes, HostLinearInt4Test,
                         ::testing::Combine(::testing::ValuesIn(kInt4Shapes),
                                            ::testing::Values(Int4Offsets::kSymmetric,
                                                              Int4Offsets::kZero,
                                                              Int4Offsets::kFloat),
                                            ::testing::Bool(), ::testing::Values(1, 3, 8, 11)));

// (n, k, rows)
using Bf16Case = std::tuple<int64_t, int64_t, int64_t>;

class HostLinearBf16Test : public ::testing::TestWithParam<Bf16Case> {};

TEST_P(HostLinearBf16Test, MatchesReference) {
  const auto [n, k, rows] = GetParam();
  const Bf16Fixture f = MakeBf16(n, k, static_cast<uint32_t>(n * 7 + k));
  ASSERT_TRUE(CheckHostWeight(f.w, "w").ok());
  ExpectMatchesReference(f.w, Dense(f), rows, static_cast<uint32_t>(rows + k));
}

INSTANTIATE_TEST_SUITE_P(Shapes, HostLinearBf16Test,
                         ::testing::Combine(::testing::Values(1, 17, 144, 1040),
                                            ::testing::Values(7, 64, 100, 192, 4096),
                                            ::testing::Values(1, 3, 8, 11)));

// The reference's weights are the logical matrix's (Int4Matrix::Value, the
// column map undone by DequantizeInt4), not only the layout read back.
TEST(HostLinearRefTest, DecodesTheLogicalMatrix) {
  for (const auto offsets : {Int4Offsets::kSymmetric, Int4Offsets::kZero, Int4Offsets::kFloat}) {
    for (bool act_order : {false, true}) {
      const Int4Fixture f = MakeInt4(144, 256, 64, offsets, act_order, 5);
      const std::vector<float> want = DequantizeInt4(f.m);
      std::vector<float> basis(f.w.k, 0.0f), column(f.w.n);
      for (int64_t c = 0; c < f.w.k; ++c) {  // W e_c: column c of W in x's order
        basis[c] = 1.0f;
        HostLinearRef(f.w, basis.data(), 1, column.data());
        basis[c] = 0.0f;
        for (int64_t o = 0; o < f.w.n; ++o) {
          ASSERT_EQ(column[o], want[o * f.w.k + c])
              << static_cast<int>(offsets) << " " << act_order;
        }
      }
    }
  }
}

// Row r of a many-row call equals a one-row call on row r, bit for bit, and
// 1 and 3 threads agree bit for bit, on every ISA; kAmxBf16's one-row 4-bit
// calls are kAvx512Bf16's (host_linear.h), so there row r is compared with a
// two-row call of it twice, and a one-row call with kAvx512Bf16's.
void ExpectInvariant(const HostWeight& w) {
  for (int64_t rows : {5, 11}) {
    const std::vector<float> x = Activations(rows * w.k, 71);
    ThreadPool one(1), three(3);
    for (CpuIsa isa : SupportedCpuIsas()) {
      HostLinearScratch scratch;
      std::vector<float> together(rows * w.n), on_one(rows * w.n);
      HostLinearForward(three, w, x.data(), rows, together.data(), &scratch, isa);
      HostLinearForward(one, w, x.data(), rows, on_one.data(), &scratch, isa);
      EXPECT_EQ(together, on_one) << CpuIsaName(isa) << " threads";
      const bool amx_int4 = isa == CpuIsa::kAmxBf16 && w.format == HostWeight::Format::kInt4;
      const int64_t copies = amx_int4 ? 2 : 1;
      for (int64_t r = 0; r < rows; ++r) {
        std::vector<float> xr;
        for (int64_t c = 0; c < copies; ++c) {
          xr.insert(xr.end(), x.begin() + r * w.k, x.begin() + (r + 1) * w.k);
        }
        std::vector<float> alone(copies * w.n);
        HostLinearForward(three, w, xr.data(), copies, alone.data(), &scratch, isa);
        alone.resize(w.n);
        ASSERT_EQ(alone,
                  std::vector<float>(together.begin() + r * w.n, together.begin() + (r + 1) * w.n))
            << CpuIsaName(isa) << " row " << r << " of " << rows;
        if (!amx_int4) continue;
        std::vector<float> one(w.n), avx(w.n);
        HostLinearForward(three, w, xr.data(), 1, one.data(), &scratch, isa);
        HostLinearForward(three, w, xr.data(), 1, avx.data(), &scratch, CpuIsa::kAvx512Bf16);
        ASSERT_EQ(one, avx) << "row " << r;
      }
    }
  }
}

TEST(HostLinearInvarianceTest, Int4BatchAndThreads) {
  ExpectInvariant(MakeInt4(1040, 512, 32, Int4Offsets::kZero, true, 81).w);
  ExpectInvariant(MakeInt4(1040, 960, 320, Int4Offsets::kFloat, false, 82).w);
  ExpectInvariant(MakeInt4(144, 256, 128, Int4Offsets::kSymmetric, false, 83).w);
}

TEST(HostLinearInvarianceTest, Bf16BatchAndThreads) {
  ExpectInvariant(MakeBf16(1040, 100, 84).w);
  ExpectInvariant(MakeBf16(33, 512, 85).w);
}

// x that is not BF16 is rounded to it first, on every ISA.
TEST(HostLinearTest, RoundsXToBf16) {
  const Int4Fixture int4 = MakeInt4(144, 256, 32, Int4Offsets::kZero, true, 95);
  const Bf16Fixture bf16 = MakeBf16(33, 100, 96);
  for (const HostWeight* w : {&int4.w, &bf16.w}) {
    const std::vector<float> x = testing::RandomFloats(3 * w->k, 97);
    std::vector<float> rounded = x;
    for (float& v : rounded) v = Bf16ToFloat(FloatToBf16(v));
    ASSERT_NE(x, rounded);
    ThreadPool pool(2);
    for (CpuIsa isa : SupportedCpuIsas()) {
      HostLinearScratch scratch;
      std::vector<float> got(3 * w->n), want(3 * w->n);
      HostLinearForward(pool, *w, x.data(), 3, got.data(), &scratch, isa);
      HostLinearForward(pool, *w, rounded.data(), 3, want.data(), &scratch, isa);
      EXPECT_EQ(got, want) << CpuIsaName(isa);
    }
  }
}

TEST(HostLinearTest, NoRowsWritesNothing) {
  const Int4Fixture f = MakeInt4(16, 64, 32, Int4Offsets::kSymmetric, false, 91);
  ThreadPool pool(2);
  HostLinearScratch scratch;
  std::vector<float> y = {1.0f};
  HostLinearForward(pool, f.w, nullptr, 0, y.data(), &scratch);
  EXPECT_EQ(y[0], 1.0f);
}

std::string CheckError(const HostWeight& w) {
  return std::string(CheckHostWeight(w, "proj").message());
}

TEST(CheckHostWeightTest, Int4NamesTheWeightAndTheProblem) {
  const Int4Fixture good = MakeInt4(32, 128, 64, Int4Offsets::kZero, false, 101);
  ASSERT_TRUE(CheckHostWeight(good.w, "layers.0.mlp.down").ok());
  HostWeight w = good.w;
  w.n = 40;
  EXPECT_EQ(CheckHostWeight(w, "proj").code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(CheckError(w), HasSubstr("n % 16 == 0"));
  w = good.w;
  w.k = 96;
  EXPECT_THAT(CheckError(w), HasSubstr("k % 64 == 0"));
  w = good.w;
  w.group = 48;
  EXPECT_THAT(CheckError(w), HasSubstr("group size 48"));
  // A multiple of 32 whose groups end in the middle of a k tile: refused,
  // not summed across its ends.
  w = MakeInt4(48, 192, 64, Int4Offsets::kZero, false, 102).w;
  w.group = 96;
  EXPECT_EQ(CheckHostWeight(w, "proj").code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(CheckError(w), HasSubstr("group size 96 is not supported; supported: 32, or a "
                                       "multiple of 64, dividing k = 192"));
  EXPECT_FALSE(HostLinearTakesGroup(96));
  EXPECT_FALSE(HostLinearTakesGroup(160));
  EXPECT_TRUE(HostLinearTakesGroup(32));
  EXPECT_TRUE(HostLinearTakesGroup(192));
  EXPECT_TRUE(HostLinearTakesGroup(4096));
  w = good.w;
  w.group = 256;  // does not divide k = 128
  EXPECT_THAT(CheckError(w), HasSubstr("dividing k = 128"));
  w = good.w;
  w.scales = nullptr;
  EXPECT_EQ(CheckHostWeight(w, "proj").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(CheckError(w), HasSubstr("scales must not be null"));
  w = good.w;
  w.offsets = nullptr;
  EXPECT_THAT(CheckError(w), HasSubstr("offsets must be given"));
  w = good.w;
  w.offset_kind = Int4Offsets::kSymmetric;  // offsets given
  EXPECT_THAT(CheckError(w), HasSubstr("offsets must be given"));
  std::vector<int32_t> columns = testing::Shuffled(128, 3);
  columns[5] = columns[6];
  w = good.w;
  w.columns = columns.data();
  EXPECT_THAT(CheckError(w), HasSubstr("not a permutation"));
  columns[5] = 128;
  EXPECT_THAT(CheckError(w), HasSubstr("not a permutation"));
  EXPECT_THAT(CheckError(w), HasSubstr("host weight proj"));
}

TEST(CheckHostWeightTest, Bf16NamesTheWeightAndTheProblem) {
  const Int4Fixture int4 = MakeInt4(32, 128, 64, Int4Offsets::kZero, false, 101);
  const Bf16Fixture bf16 = MakeBf16(3, 5, 102);
  ASSERT_TRUE(CheckHostWeight(bf16.w, "lm_head").ok());
  HostWeight w = bf16.w;
  w.k = 0;
  EXPECT_THAT(CheckError(w), HasSubstr("must be positive"));
  w = bf16.w;
  w.scales = int4.w.scales;
  EXPECT_THAT(CheckError(w), HasSubstr("no scales"));
  w = bf16.w;
  w.data = nullptr;
  EXPECT_THAT(CheckError(w), HasSubstr("data must not be null"));
  EXPECT_THAT(CheckError(w), HasSubstr("host weight proj"));
}

}  // namespace
}  // namespace onecard::engine
