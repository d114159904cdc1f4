// Fp8GemmRef against an independent computation: the activation codes are
// the nearest E4M3 values found by search over every finite code (not
// FloatToE4m3), the weight's values from DequantizeFp8 (the matrix, not the
// view), a double-precision dot of the dequantized operands, the epilogues
// written out here (the residual add's two roundings; gate and up rows n / 2
// apart). Shapes small enough for CI. And the refusals and the workspace's
// layout.
#include <cmath>
#include <limits>
#include <vector>

#include "engine/kernels/bf16.h"
#include "engine/kernels/fp8_gemm.h"
#include "engine/kernels/rms_norm.h"
#include "engine/kernels/silu_mul.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/kernels/kernel_test_util.h"
#include "tests/testing/fp8_testing.h"
#include "tests/testing/rows_on_cores.h"

namespace onecard::engine {
namespace {

using onecard::testing::RandomFp8Matrix;
using ::testing::HasSubstr;

// The finite E4M3 value nearest v (ties to the even code), +-448 beyond.
float NearestE4m3(float v) {
  float best = 0.0f;
  double best_err = std::numeric_limits<double>::infinity();
  for (int code = 0; code < 256; ++code) {
    if ((code & 0x7f) == 0x7f) continue;  // NaN
    const float c = E4m3ToFloat(static_cast<uint8_t>(code));
    const double err = std::abs(double{c} - double{v});
    if (err < best_err ||
        (err == best_err && (code & 1) == 0 && std::signbit(c) == std::signbit(v))) {
      best = c;
      best_err = err;
    }
  }
  return best;
}

struct Fixture {
  Fp8Matrix w;
  std::vector<uint16_t> x;  // [rows, x_row_stride] BF16
  Fp8GemmParams p;
};

Fixture Make(int64_t n, int64_t k, int32_t rows) {
  Fixture f;
  f.w = RandomFp8Matrix(n, k, Fp8Scales::kRow, static_cast<uint32_t>(n + k + rows));
  const int64_t stride = k + 8;
  f.x = testing::ToBf16(testing::RandomFloats(rows * stride, 11, -2.0f, 2.0f));
  f.p.w = {.codes = f.w.codes.data(), .scales = f.w.scales.data(), .n = n, .k = k};
  f.p.x = f.x.data();
  f.p.x_row_stride = stride;
  f.p.rows = rows;
  return f;
}

// x's row m as the kernel multiplies it: the codes' values times the scale.
std::vector<double> QuantizedRow(const Fixture& f, int32_t m) {
  const uint16_t* row = f.x.data() + m * f.p.x_row_stride;
  float amax = 0.0f;
  for (int64_t c = 0; c < f.w.k; ++c) amax = std::max(amax, std::abs(Bf16ToFloat(row[c])));
  const float scale = amax > 0.0f ? amax / 448.0f : 1.0f;
  std::vector<double> out(f.w.k);
  for (int64_t c = 0; c < f.w.k; ++c) {
    out[c] = double{NearestE4m3(Bf16ToFloat(row[c]) / scale)} * scale;
  }
  return out;
}

std::vector<double> Dots(const Fixture& f) {  // [rows, n]
  const std::vector<float> w = DequantizeFp8(f.w);
  std::vector<double> out(f.p.rows * f.w.n);
  for (int32_t m = 0; m < f.p.rows; ++m) {
    const std::vector<double> xq = QuantizedRow(f, m);
    for (int64_t j = 0; j < f.w.n; ++j) {
      double acc = 0;
      for (int64_t c = 0; c < f.w.k; ++c) acc += xq[c] * w[j * f.w.k + c];
      out[m * f.w.n + j] = acc;
    }
  }
  return out;
}

TEST(Fp8GemmRefTest, QuantizationPicksTheNearestCodeOfTheRowScale) {
  std::vector<uint16_t> x = testing::ToBf16(testing::RandomFloats(64, 3, -3.0f, 3.0f));
  x[5] = FloatToBf16(-1000.0f);  // the outlier sets the scale
  x[6] = FloatToBf16(1e-6f);     // far below the smallest subnormal code: 0
  std::vector<uint8_t> codes(64);
  const float scale = Fp8QuantizeActivationRow(x.data(), 64, codes.data());
  EXPECT_EQ(scale, 1000.0f / 448.0f);
  EXPECT_EQ(codes[5], 0xfe);  // -448
  EXPECT_EQ(codes[6], 0x00);
  for (int c = 0; c < 64; ++c) {
    EXPECT_EQ(E4m3ToFloat(codes[c]), NearestE4m3(Bf16ToFloat(x[c]) / scale)) << c;
  }
  const std::vector<uint16_t> zeros(32, 0);
  EXPECT_EQ(Fp8QuantizeActivationRow(zeros.data(), 32, codes.data()), 1.0f);
  for (int c = 0; c < 32; ++c) EXPECT_EQ(codes[c], 0) << c;
}

TEST(Fp8GemmRefTest, F32OutputIsTheDotOfTheQuantizedOperands) {
  Fixture f = Make(48, 96, 3);
  std::vector<float> y(3 * 48);
  f.p.y = y.data();
  f.p.y_dtype = DType::kF32;
  ASSERT_TRUE(Fp8GemmRef(f.p).ok());
  const std::vector<double> want = Dots(f);
  for (size_t o = 0; o < y.size(); ++o) {
    EXPECT_NEAR(y[o], want[o], 1e-5 * (1 + std::abs(want[o]))) << o;
  }
}

TEST(Fp8GemmRefTest, AddRoundsTheProductThenTheSum) {
  Fixture f = Make(32, 64, 2);
  std::vector<uint16_t> y = testing::ToBf16(testing::RandomFloats(2 * 32, 5));
  const std::vector<uint16_t> before = y;
  f.p.y = y.data();
  f.p.add_to_y = true;
  ASSERT_TRUE(Fp8GemmRef(f.p).ok());
  const std::vector<double> dots = Dots(f);
  for (size_t o = 0; o < y.size(); ++o) {
    const float product = Bf16ToFloat(FloatToBf16(static_cast<float>(dots[o])));
    const float want = Bf16ToFloat(FloatToBf16(product + Bf16ToFloat(before[o])));
    EXPECT_NEAR(Bf16ToFloat(y[o]), want, 1e-2 * std::abs(want) + 1e-3) << o;
  }
}

// Fp8GemmRef's BF16 y of f's weight over activations [rows, k] (packed).
std::vector<uint16_t> PlainY(const Fixture& f, const std::vector<uint16_t>& activations) {
  std::vector<uint16_t> y(f.p.rows * f.w.n);
  Fp8GemmParams q = f.p;
  q.x = activations.data();
  q.x_row_stride = f.w.k;
  q.y = y.data();
  EXPECT_TRUE(Fp8GemmRef(q).ok());
  return y;
}

// With norm_weight the activations are RmsNormRef's rows: the same y as
// Fp8GemmRef over x normalized first, bit for bit, and not x's own.
TEST(Fp8GemmRefTest, NormWeightNormalizesXFirst) {
  Fixture f = Make(48, 96, 3);
  const std::vector<uint16_t> norm = testing::ToBf16(testing::RandomFloats(96, 7, 0.5f, 1.5f));
  std::vector<uint16_t> normed(3 * 96);
  for (int32_t m = 0; m < 3; ++m) {
    ASSERT_TRUE(RmsNormRef({.dtype = DType::kBF16,
                            .x = f.x.data() + m * f.p.x_row_stride,
                            .weight = norm.data(),
                            .out = normed.data() + m * 96,
                            .num_tokens = 1,
                            .hidden = 96,
                            .eps = 1e-6f})
                    .ok());
  }
  std::vector<uint16_t> fused(3 * 48), plain(3 * 48);
  Fp8GemmParams p = f.p;
  p.y = fused.data();
  p.norm_weight = norm.data();
  p.eps = 1e-6f;
  ASSERT_TRUE(Fp8GemmRef(p).ok());
  const absl::StatusOr<std::vector<uint16_t>> row = Fp8GemmActivationRow(p, 1);
  ASSERT_TRUE(row.ok()) << row.status();
  EXPECT_EQ(*row, std::vector<uint16_t>(normed.begin() + 96, normed.begin() + 192));
  EXPECT_EQ(fused, PlainY(f, normed));
  Fp8GemmParams r = f.p;
  r.y = plain.data();
  ASSERT_TRUE(Fp8GemmRef(r).ok());
  EXPECT_NE(fused, plain);
}

// With silu_mul_x the activations are SiluMulRef's of x's [gate | up] rows:
// the same y as Fp8GemmRef over those, bit for bit; the stride must hold
// both halves, and the norm is not taken with it.
TEST(Fp8GemmRefTest, SiluMulXTakesGateAndUpHalves) {
  Fixture f = Make(48, 96, 3);
  std::vector<uint16_t> gate_up = testing::ToBf16(testing::RandomFloats(3 * 200, 9, -3.0f, 3.0f));
  std::vector<uint16_t> act(3 * 96);
  for (int32_t m = 0; m < 3; ++m) {
    ASSERT_TRUE(SiluMulRef({.dtype = DType::kBF16,
                            .gate_up = gate_up.data() + m * 200,
                            .out = act.data() + m * 96,
                            .num_tokens = 1,
                            .inter = 96})
                    .ok());
  }
  std::vector<uint16_t> fused(3 * 48);
  Fp8GemmParams p = f.p;
  p.x = gate_up.data();
  p.x_row_stride = 200;
  p.silu_mul_x = true;
  p.y = fused.data();
  ASSERT_TRUE(Fp8GemmRef(p).ok());
  EXPECT_EQ(fused, PlainY(f, act));
  p.x_row_stride = 184;  // >= k, < 2 k
  EXPECT_THAT(Fp8GemmRef(p).message(), HasSubstr("x_row_stride"));
  p.x_row_stride = 200;
  const std::vector<uint16_t> norm(96, 0x3F80);
  p.norm_weight = norm.data();
  EXPECT_THAT(Fp8GemmRef(p).message(), HasSubstr("silu_mul_x and norm_weight"));
}

TEST(Fp8GemmRefTest, SiluMulPairsRowsHalfTheWeightApart) {
  Fixture f = Make(32, 48, 2);
  std::vector<uint16_t> y(2 * 16);
  f.p.y = y.data();
  f.p.silu_mul_y = true;
  ASSERT_TRUE(Fp8GemmRef(f.p).ok());
  const std::vector<double> dots = Dots(f);
  for (int32_t m = 0; m < 2; ++m) {
    for (int64_t j = 0; j < 16; ++j) {
      const float g = Bf16ToFloat(FloatToBf16(static_cast<float>(dots[m * 32 + j])));
      const float u = Bf16ToFloat(FloatToBf16(static_cast<float>(dots[m * 32 + 16 + j])));
      const float want = g / (1.0f + std::exp(-g)) * u;
      EXPECT_NEAR(Bf16ToFloat(y[m * 16 + j]), want, 1e-2 * std::abs(want) + 1e-4) << m << "," << j;
    }
  }
}

// The GPU tests run the reference over shares of its rows, one a core
// (tests/testing/rows_on_cores.h): shares of every size give the whole
// call's bytes, with RMSNorm before the product and the residual added, and
// for fp32 y.
TEST(Fp8GemmRefTest, SharesOfRowsGiveTheWholeCallsBytes) {
  for (const bool f32 : {false, true}) {
    Fixture f = Make(48, 192, 11);
    const std::vector<uint16_t> gamma = testing::ToBf16(testing::RandomFloats(192, 7, 0.5f, 1.5f));
    const std::vector<uint16_t> residual = testing::ToBf16(testing::RandomFloats(11 * 48, 5));
    std::vector<uint16_t> whole16 = residual, shared16 = residual;
    std::vector<float> whole32(11 * 48), shared32(11 * 48);
    if (f32) {
      f.p.y_dtype = DType::kF32;
      f.p.y = whole32.data();
    } else {
      f.p.norm_weight = gamma.data();
      f.p.add_to_y = true;
      f.p.y = whole16.data();
    }
    const absl::Status whole = Fp8GemmRef(f.p);
    ASSERT_TRUE(whole.ok()) << whole;
    for (int64_t threads : {2, 4, 11}) {
      shared16 = residual;
      f.p.y = f32 ? static_cast<void*>(shared32.data()) : shared16.data();
      ASSERT_TRUE(onecard::testing::RowsOnCores(
                      f.p, 48 * (f32 ? 4 : 2), [](const Fp8GemmParams& q) { return Fp8GemmRef(q); },
                      threads)
                      .ok());
      if (f32) {
        EXPECT_EQ(shared32, whole32) << threads << " shares";
      } else {
        EXPECT_EQ(shared16, whole16) << threads << " shares";
      }
    }
  }
}

TEST(Fp8GemmRefTest, RefusesWhatTheKernelsDoNotTake) {
  Fixture f = Make(32, 64, 1);
  std::vector<float> y(32);
  f.p.y = y.data();
  f.p.y_dtype = DType::kF32;
  f.p.w.scales_kind = Fp8Scales::kBlock128;
  absl::Status st = Fp8GemmRef(f.p);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(st.message(), HasSubstr("block128"));
  EXPECT_THAT(st.message(), HasSubstr("Fp8DequantizeBf16"));
  f.p.w.scales_kind = Fp8Scales::kRow;
  f.p.w.k = 40;  // not a multiple of 16
  st = Fp8GemmRef(f.p);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(st.message(), HasSubstr("k=40"));
  f.p.w.k = 64;
  f.p.add_to_y = true;  // F32 y
  EXPECT_EQ(Fp8GemmRef(f.p).code(), absl::StatusCode::kInvalidArgument);
  f.p.add_to_y = false;
  f.p.rows = 0;
  EXPECT_THAT(Fp8GemmRef(f.p).message(), HasSubstr("rows 0"));
  f.p.rows = 1;
  f.p.x_row_stride = 60;
  EXPECT_THAT(Fp8GemmRef(f.p).message(), HasSubstr("x_row_stride 60"));
  f.p.x_row_stride = 72;
  f.p.w.n = 40;  // not a multiple of 16
  EXPECT_THAT(Fp8GemmRef(f.p).message(), HasSubstr("n=40"));
  f.p.w.n = 32;
  f.p.w.scales = nullptr;
  EXPECT_THAT(Fp8GemmRef(f.p).message(), HasSubstr("null"));
}

TEST(Fp8GemmRefTest, WorkspaceParts) {
  const Fp8GemmWorkspaceLayout l = Fp8GemmWorkspace(5, 200, 48);
  EXPECT_EQ(l.acc_row_stride, 208);
  EXPECT_EQ(l.codes_offset, 0);
  EXPECT_EQ(l.scales_offset, 256);  // 5 * 48 codes
  EXPECT_EQ(l.acc_offset, 512);
  EXPECT_EQ(l.total_bytes, 512 + 5 * 208 * 4 / 256 * 256 + 256);
  EXPECT_EQ(Fp8GemmWorkspaceBytes(5, 200, 48), l.total_bytes);
  EXPECT_GE(Fp8GemmWorkspaceBytes(300, 4096, 4112), Fp8GemmWorkspace(17, 1000, 4112).total_bytes);
}

}  // namespace
}  // namespace onecard::engine
