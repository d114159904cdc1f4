// MatchesReference for Int4Gemm's folded RMSNorm (Int4NormFold; kStream, up
// to 16 rows, one and two n8 tiles, stream-K and cluster splits): a residual
// product's three outputs (y, the next product's input bf16(g y) and the
// sums of squares of y a 16-column tile) and a normed product's row scales
// (x_sum_sq) before each epilogue kind. Each case runs twice on one
// workspace: every output identical bit for bit, the arrival counters left
// zero. Besides the reference, the fold's outputs are checked against the
// launch's own y: the next input exactly bf16(g y), the sums within fp32's
// summation error of y's squares.
// Tolerance: y, the next input and the normed product's outputs within
// Tolerance::For(BF16) (the kernel sums in fp32 in another order; the next
// input follows y's rounding); a tile's sum of squares within 1e-5 of its
// size against y's own squares, 1e-2 against the reference's (whose y may
// differ by an ulp).
#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "engine/kernels/bf16.h"
#include "engine/kernels/int4_gemm.h"
#include "engine/kernels/int4_matrix.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/int4_device.h"
#include "tests/testing/all_close.h"
#include "tests/testing/int4_testing.h"
#include "tests/testing/rows_on_cores.h"

namespace onecard::testing {
namespace {

using engine::DType;
using engine::Int4Offsets;

// kFold: a residual add writing the fold's outputs; the others: a normed
// product scaling its rows by x_sum_sq's r, then that epilogue.
enum class Out { kFold, kBf16, kSilu, kF32 };

struct FoldCase {
  std::string name;
  int64_t n;
  int64_t k;
  int32_t group;
  Int4Offsets offsets;
  int32_t rows;
  Out out;
  int32_t stream_cluster = 0;  // Int4GemmParams::stream_cluster (path kStream)
};

std::vector<FoldCase> Cases() {
  const auto sym = Int4Offsets::kSymmetric, zero = Int4Offsets::kZero, fl = Int4Offsets::kFloat;
  return {
      // The residual products (o, down) of llama3-8b / 70b and SmolLM2.
      {"fold_o8b_r1", 4096, 4096, 128, sym, 1, Out::kFold},
      {"fold_down70b_zero_r3", 8192, 28672, 128, zero, 3, Out::kFold},
      {"fold_smol_o_float_r5", 576, 576, 32, fl, 5, Out::kFold},
      {"fold_down8b_r16", 4096, 14336, 128, sym, 16, Out::kFold},
      {"fold_g64_float_r9", 2048, 5120, 64, fl, 9, Out::kFold},
      {"fold_cluster_o8b_r1", 4096, 4096, 128, sym, 1, Out::kFold, 8},
      {"fold_cluster_down70b_zero_r12", 8192, 28672, 128, zero, 12, Out::kFold, 4},
      // The normed products (qkv, gate_up) and each other epilogue.
      {"scale_qkv8b_r1", 6144, 4096, 128, sym, 1, Out::kBf16},
      {"scale_gateup8b_silu_r1", 28672, 4096, 128, sym, 1, Out::kSilu},
      {"scale_smol_qkv_float_r5", 960, 576, 32, fl, 5, Out::kBf16},
      {"scale_gateup_zero_silu_r16", 8192, 4096, 128, zero, 16, Out::kSilu},
      {"scale_qkv70b_r11", 10240, 8192, 128, sym, 11, Out::kBf16},
      {"scale_f32_float_r7", 2048, 4096, 128, fl, 7, Out::kF32},
      {"scale_per_channel_r4", 4096, 4096, 4096, sym, 4, Out::kBf16},
      {"scale_cluster_r2", 4096, 4096, 128, sym, 2, Out::kBf16, 4},
  };
}

// Int4GemmRef over shares of p's rows (RowsOnCores), the fold's buffers and
// x_sum_sq moved to each share's first row too (a share's first row from
// where its x starts).
absl::Status RefOnCores(const engine::Int4GemmParams& p, int64_t y_row_bytes) {
  return RowsOnCores(p, y_row_bytes, [&](engine::Int4GemmParams part) {
    const int64_t begin =
        (static_cast<const uint16_t*>(part.x) - static_cast<const uint16_t*>(p.x)) / p.x_row_stride;
    if (p.fold_norm.weight != nullptr) {
      part.fold_norm.x = static_cast<uint16_t*>(p.fold_norm.x) + begin * p.w.n;
      part.fold_norm.sum_sq = p.fold_norm.sum_sq + begin * p.w.n / 16;
    }
    if (p.x_sum_sq != nullptr) part.x_sum_sq = p.x_sum_sq + begin * p.w.k / 16;
    return engine::Int4GemmRef(part);
  });
}

class Int4GemmFoldTest : public ::testing::TestWithParam<FoldCase> {};

TEST_P(Int4GemmFoldTest, MatchesReference) {
  const FoldCase& c = GetParam();
  const bool fold = c.out == Out::kFold, f32 = c.out == Out::kF32;
  const uint32_t seed = std::hash<std::string>()(c.name) & 0xffff;
  std::mt19937 rng = SeededRng(seed, 47);
  const engine::Int4Matrix m = RandomInt4Matrix(c.n, c.k, c.group, c.offsets, seed);
  engine::Int4Packed packed = engine::MakeInt4Packed(c.n, c.k, c.group, c.offsets);
  ASSERT_TRUE(engine::PackInt4Rows(m, engine::ConcatRows(c.n, 0), c.n, &packed).ok());
  const int64_t x_stride = c.k + 24;
  std::vector<uint16_t> x = RandomBf16(c.rows * x_stride, rng, -2.0f, 2.0f);
  const int64_t y_cols = c.out == Out::kSilu ? c.n / 2 : c.n;
  std::vector<uint16_t> y16 = RandomBf16(c.rows * y_cols, rng);  // the residual when folding
  std::vector<float> y32(c.rows * y_cols, 0.0f);
  std::vector<uint16_t> gamma = RandomBf16(c.n, rng, 0.5f, 1.5f);
  std::vector<uint16_t> next_x(fold ? c.rows * c.n : 0);
  std::vector<float> sum_sq(fold ? c.rows * c.n / 16 : 0);
  // A normed product's x_sum_sq: the sums of squares of a residual row's
  // tiles (values in [-4, 4]).
  std::vector<float> x_sum_sq(fold ? 0 : c.rows * c.k / 16);
  std::uniform_real_distribution<float> h(-4.0f, 4.0f);
  for (float& s : x_sum_sq) {
    for (int i = 0; i < 16; ++i) s += std::pow(h(rng), 2.0f);
  }
  engine::Int4GemmParams p{
      .w = Int4View(packed, m),
      .x = x.data(),
      .x_row_stride = x_stride,
      .eps = 1e-5f,
      .y = f32 ? static_cast<void*>(y32.data()) : y16.data(),
      .y_dtype = f32 ? DType::kF32 : DType::kBF16,
      .add_to_y = fold,
      .silu_mul_y = c.out == Out::kSilu,
      .rows = c.rows,
      .path = c.stream_cluster > 0 ? engine::Int4GemmPath::kStream : engine::Int4GemmPath::kAuto,
      .stream_cluster = c.stream_cluster};
  if (fold) {
    p.fold_norm = {.weight = gamma.data(), .x = next_x.data(), .sum_sq = sum_sq.data()};
  } else {
    p.x_sum_sq = x_sum_sq.data();
  }
  ASSERT_FALSE(engine::Int4GemmUsesTiled(p));
  const std::vector<uint16_t> residual = y16;
  ASSERT_TRUE(RefOnCores(p, y_cols * (f32 ? 4 : 2)).ok());

  const DeviceInt4 dw(packed, c.n);
  DeviceBuf<uint16_t> dx(x), dgamma(gamma), dy16(y16.size()),
      dnext(std::max<size_t>(1, next_x.size()));
  DeviceBuf<float> dy32(y32.size()), dsums(std::max<size_t>(1, sum_sq.size())),
      dx_sums(std::max<size_t>(1, x_sum_sq.size()));
  if (!fold) dx_sums.Upload(x_sum_sq);
  dw.Into(&p);
  p.x = dx.get();
  p.y = f32 ? static_cast<void*>(dy32.get()) : dy16.get();
  if (fold) {
    p.fold_norm = {.weight = dgamma.get(), .x = dnext.get(), .sum_sq = dsums.get()};
  } else {
    p.x_sum_sq = dx_sums.get();
  }
  const absl::StatusOr<engine::Int4GemmClusterPlan> plan = engine::Int4GemmClusterSplit(p);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->size, c.stream_cluster);

  std::vector<uint16_t> got_y[2], got_next[2];
  std::vector<float> got_y32[2], got_sums[2];
  for (int run = 0; run < 2; ++run) {
    if (fold) dy16.Upload(residual);
    const absl::Status st = engine::Int4Gemm(p, nullptr);
    ASSERT_TRUE(st.ok()) << st;
    ASSERT_CUDA_OK(cudaDeviceSynchronize());
    if (f32) {
      got_y32[run] = dy32.Download();
    } else {
      got_y[run] = dy16.Download();
    }
    if (fold) {
      got_next[run] = dnext.Download();
      got_sums[run] = dsums.Download();
    }
  }
  EXPECT_EQ(got_y[0], got_y[1]) << "two runs differ";
  EXPECT_EQ(got_y32[0], got_y32[1]) << "two runs differ";
  EXPECT_EQ(got_next[0], got_next[1]) << "two runs differ";
  EXPECT_EQ(got_sums[0], got_sums[1]) << "two runs differ";
  const std::vector<uint8_t> left = dw.workspace.Download();
  const int64_t counters = engine::Int4GemmWorkspace(c.n, dw.sms).counter_bytes;
  EXPECT_TRUE(std::all_of(left.end() - counters, left.end(), [](uint8_t b) { return b == 0; }))
      << "arrival counters not left zero";

  if (f32) {
    EXPECT_ALL_CLOSE(got_y32[0], y32, (Tolerance{1e-3, 1e-3, 1e-7}));
  } else {
    EXPECT_ALL_CLOSE(ToFloats(got_y[0]), ToFloats(y16), Tolerance::For(DType::kBF16));
  }
  if (!fold) return;
  EXPECT_ALL_CLOSE(ToFloats(got_next[0]), ToFloats(next_x), Tolerance::For(DType::kBF16));
  int wrong_next = 0, wrong_sums = 0;
  for (int32_t r = 0; r < c.rows; ++r) {
    for (int64_t t = 0; t < c.n / 16; ++t) {
      double own = 0;  // of the launch's own y
      for (int64_t col = 16 * t; col < 16 * t + 16; ++col) {
        const float yv = engine::Bf16ToFloat(got_y[0][r * c.n + col]);
        own += double{yv} * yv;
        const uint16_t want = engine::FloatToBf16(engine::Bf16ToFloat(gamma[col]) * yv);
        if (got_next[0][r * c.n + col] != want && ++wrong_next <= 5) {
          ADD_FAILURE() << "next input row " << r << " column " << col << ": "
                        << got_next[0][r * c.n + col] << " for bf16(g y) " << want;
        }
      }
      const float got = got_sums[0][r * c.n / 16 + t];
      const bool near_own = std::abs(got - own) <= 1e-5 * own + 1e-6;
      const bool near_ref = std::abs(got - sum_sq[r * c.n / 16 + t]) <= 1e-2 * own + 1e-3;
      if ((!near_own || !near_ref) && ++wrong_sums <= 5) {
        ADD_FAILURE() << "sum of squares row " << r << " tile " << t << ": " << got
                      << " for y's own " << own << ", the reference's " << sum_sq[r * c.n / 16 + t];
      }
    }
  }
  EXPECT_EQ(wrong_next, 0);
  EXPECT_EQ(wrong_sums, 0);
}

INSTANTIATE_TEST_SUITE_P(Cases, Int4GemmFoldTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<FoldCase>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace onecard::testing
