// The AMX 4-bit kernel of HostLinearForward (engine/runtime/cpu/
// host_linear_amx.inc) over an emulated tile unit, so that its layouts (the
// A operands decoded from the device layout, x's B operands, the C tiles of
// one group each, the scales, the offsets, blocks and open groups) are
// checked on any processor with AVX-512 BF16, not only on one with AMX
// (where host_linear_test.cc runs the real one; the emulation in
// host_linear_amx_emulated.cc, the only part compiled for AVX-512 BF16:
// elsewhere every case skips). Against HostLinearRef (W decoded from
// the layout, sums in double) within the bound host_linear_test.cc uses,
// over groups of 32, 64, 128, 192, 320 and one a row, every offset kind,
// with and without a column map, and BF16 weights of short last tiles and
// runs, 1, 3, 8 and 11 rows; and row r of a call of several rows equals a
// one-row call bit for bit (group 0 below: the BF16 weight).
#include <cmath>
#include <cstdint>
#include <tuple>
#include <vector>

#include "engine/common/thread_pool.h"
#include "engine/kernels/int4_matrix.h"
#include "engine/runtime/cpu/cpu_linear.h"
#include "engine/runtime/cpu/host_linear.h"
#include "engine/runtime/cpu/host_linear_kernels.h"
#include "gtest/gtest.h"
#include "tests/engine/runtime/cpu/host_linear_amx_emulated.h"
#include "tests/engine/runtime/cpu/host_linear_testing.h"

namespace onecard::engine::host_linear {
namespace {

const Kernels& Emulated() { return EmulatedAmxKernels(); }

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
