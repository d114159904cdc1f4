// MatchesReference for Fp8Gemm (W8A8 through cuBLASLt) over awkward shapes:
// 1, 5, 17, 64, 128 and 300 rows; n of 48, 208, 528, 1008, 3008, 4144 (not
// multiples of 128); k of 16, 48, 576, 1040,
// 4096 and 4112 (4096 + 16); x rows strided; activations uniform, with one
// huge value a row (the rest quantized to a few codes, subnormals and
// zeros), with all-zero rows (scale 1), or spread over 34 decades (codes at
// 448 and flushed to zero in one row); weight scales with outliers (x 1e4
// and x 1e-4 rows); every epilogue (BF16, residual add, SiLU-mul of the
// stacked gate/up halves, fp32). Each case checks the activation codes and
// scales in the workspace against the reference's bit for bit, runs twice
// (identical bytes), checks the product before the epilogue (the fp32 sums
// the kernel leaves in its workspace, times both scales) within 2^-9 of the
// sum of the products' magnitudes (times the scales) of the reference's
// (Hopper's FP8 tensor cores add in a narrower format between promotions to
// fp32, so sums that cancel differ by more than BF16 rounding), and y against
// the spec's epilogue applied to those products (BF16 rounding, the residual
// add, SiLU-mul; fp32 exactly); no output is NaN or infinite. Also:
// Fp8DequantizeBf16 equal to its reference bit for bit, a graph capture of
// a prepared shape, and the refusals.
#include "engine/kernels/fp8_gemm.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "engine/kernels/fp8_dequant.h"
#include "engine/kernels/fp8_matmul.h"
#include "engine/kernels/launch_settings.h"
#include "engine/kernels/silu_mul.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/testing/all_close.h"
#include "tests/testing/fp8_testing.h"
#include "tests/testing/rows_on_cores.h"

namespace onecard::testing {
namespace {

using engine::DType;
using engine::Fp8Scales;

enum class Out { kBf16, kAdd, kSilu, kF32 };
enum class XKind { kUniform, kOutlier, kZeroRows, kWide };
enum class WKind { kPlain, kScaleOutliers };

struct Fp8Case {
  std::string name;
  int32_t rows;
  int64_t n;
  int64_t k;
  XKind x;
  WKind w;
  Out out;
  bool norm = false;    // norm_weight: x normalized in the activations' pass
  bool silu_x = false;  // silu_mul_x: x holds [gate | up], SiLU·mul in that pass
};

std::vector<Fp8Case> Cases() {
  const auto uni = XKind::kUniform, outl = XKind::kOutlier, zero = XKind::kZeroRows,
             wide = XKind::kWide;
  const auto plain = WKind::kPlain, scaled = WKind::kScaleOutliers;
  return {
      {"r1_n208_k16", 1, 208, 16, uni, plain, Out::kBf16},
      {"r1_n1008_k4112_add", 1, 1008, 4112, outl, scaled, Out::kAdd},
      {"r5_n1008_k48_add", 5, 1008, 48, uni, plain, Out::kAdd},
      {"r5_n48_k48_f32_zero_rows", 5, 48, 48, zero, plain, Out::kF32},
      {"r17_n4144_k4112_silu_outlier", 17, 4144, 4112, outl, plain, Out::kSilu},
      {"r17_n208_k16_wide", 17, 208, 16, wide, scaled, Out::kBf16},
      {"r64_n1008_k4112_f32_wide", 64, 1008, 4112, wide, scaled, Out::kF32},
      {"r64_n528_k576_silu_zero_rows", 64, 528, 576, zero, plain, Out::kSilu},
      {"r128_n3008_k576_outliers", 128, 3008, 576, outl, scaled, Out::kBf16},
      {"r128_n4096_k4096", 128, 4096, 4096, uni, plain, Out::kBf16},
      {"r300_n528_k4112_add_zero_rows", 300, 528, 4112, zero, scaled, Out::kAdd},
      {"r300_n1008_k1040_silu_wide", 300, 1008, 1040, wide, plain, Out::kSilu},
      {"r8_n1024_k1024_add", 8, 1024, 1024, uni, scaled, Out::kAdd},
      {"r17_n528_k4096_outlier", 17, 528, 4096, outl, plain, Out::kBf16},
      {"r32_n2048_k512_silu", 32, 2048, 512, uni, scaled, Out::kSilu},
      {"r96_n1008_k256_add_zero_rows", 96, 1008, 256, zero, plain, Out::kAdd},
      // The RMSNorm in the activations' pass (qkv and gate_up of a W8A8 step).
      {"r5_n208_k576_norm", 5, 208, 576, uni, plain, Out::kBf16, true},
      {"r64_n1024_k4096_norm_silu_outlier", 64, 1024, 4096, outl, plain, Out::kSilu, true},
      {"r300_n528_k1024_norm_zero_rows", 300, 528, 1024, zero, scaled, Out::kBf16, true},
      // SiLU·mul in the activations' pass (down of a W8A8 step).
      {"r8_n1024_k2048_silux_add", 8, 1024, 2048, uni, plain, Out::kAdd, false, true},
      {"r130_n528_k576_silux_outlier_add", 130, 528, 576, outl, scaled, Out::kAdd, false, true},
  };
}

// [rows, stride] BF16 activations of the kind (k values a row; the rest
// padding).
std::vector<uint16_t> MakeX(const Fp8Case& c, int64_t stride, std::mt19937& rng) {
  std::vector<uint16_t> x = RandomBf16(c.rows * stride, rng, -2.0f, 2.0f);
  std::uniform_int_distribution<int64_t> column(0, c.k - 1);
  std::uniform_real_distribution<float> outlier(500.0f, 2000.0f), decade(-30.0f, 4.0f);
  for (int32_t m = 0; m < c.rows; ++m) {
    uint16_t* row = x.data() + m * stride;
    if (c.x == XKind::kOutlier) {
      row[column(rng)] = engine::FloatToBf16((m % 2 ? -1.0f : 1.0f) * outlier(rng));
    } else if (c.x == XKind::kZeroRows && m % 3 == 1) {
      std::fill(row, row + c.k, uint16_t{0});
    } else if (c.x == XKind::kWide) {
      for (int64_t i = 0; i < c.k; ++i) {
        row[i] =
            engine::FloatToBf16(((i * 7 + m) % 2 ? -1.0f : 1.0f) * std::pow(10.0f, decade(rng)));
      }
    }
  }
  return x;
}

// |product| sums of each output, times both scales (the fp32 error scale).
std::vector<double> MagnitudeSums(const engine::Fp8Matrix& w, const std::vector<uint16_t>& x,
                                  int64_t stride, int32_t rows) {
  std::vector<double> out(rows * w.n);
  ForRowsOnCores(rows, [&](int64_t begin, int64_t end) {
    std::vector<uint8_t> codes(w.k);
    for (int64_t m = begin; m < end; ++m) {
      const float xs = engine::Fp8QuantizeActivationRow(x.data() + m * stride, w.k, codes.data());
      for (int64_t j = 0; j < w.n; ++j) {
        double sum = 0;
        for (int64_t c = 0; c < w.k; ++c) {
          sum += std::abs(double{engine::E4m3ToFloat(codes[c])} *
                          engine::E4m3ToFloat(w.codes[j * w.k + c]));
        }
        out[m * w.n + j] = sum * xs * w.scales[j];
      }
    }
  });
  return out;
}

// The products of given activation codes and scales ([rows, k] and [rows],
// as Fp8Gemm's workspace holds them): v = (sum_c code * w code, in double,
// then fp32) * x_scale * w_scale, and each output's |product| sum times both
// scales.
void ProductsOfCodes(const engine::Fp8Matrix& w, const uint8_t* codes, const uint8_t* scales,
                     int32_t rows, std::vector<float>& v, std::vector<double>& sums) {
  v.assign(rows * w.n, 0.0f);
  sums.assign(rows * w.n, 0.0);
  ForRowsOnCores(rows, [&](int64_t begin, int64_t end) {
    for (int64_t m = begin; m < end; ++m) {
      float xs = 0;
      std::memcpy(&xs, scales + 4 * m, 4);
      for (int64_t j = 0; j < w.n; ++j) {
        double sum = 0, mag = 0;
        for (int64_t c = 0; c < w.k; ++c) {
          const double prod = double{engine::E4m3ToFloat(codes[m * w.k + c])} *
                              engine::E4m3ToFloat(w.codes[j * w.k + c]);
          sum += prod;
          mag += std::abs(prod);
        }
        v[m * w.n + j] = (static_cast<float>(sum) * xs) * w.scales[j];
        sums[m * w.n + j] = mag * xs * w.scales[j];
      }
    }
  });
}

struct Matmul {
  DeviceBuf<uint8_t> workspace{32 << 20};
  std::unique_ptr<engine::Fp8Matmul> mm;
  Matmul() {
    absl::StatusOr<std::unique_ptr<engine::Fp8Matmul>> made =
        engine::Fp8Matmul::Create(workspace.get(), workspace.size());
    EXPECT_TRUE(made.ok()) << made.status();
    if (made.ok()) mm = std::move(*made);
  }
};

// y of the scaled form against the reference's products v_ref: each within
// BF16's rounding (2^-8, cuBLASLt's fp32 order inside) plus 2^-9 of the
// products' magnitudes (the FP8 accumulation); with the residual r, the
// spec's second rounding too (y = bf16(bf16(v) + r): 2^-8 of |v| and of
// |v + r|);
// silu_mul_y's BF16 gate/up (left in the workspace's sums) so, and y the
// spec's SiLU·mul of them (SiluMulRef).
void CheckScaledForm(const Fp8Case& c, const std::vector<double>& sums,
                     const std::vector<float>& v_ref, const std::vector<uint16_t>& residual,
                     const std::vector<uint8_t>& workspace,
                     const engine::Fp8GemmWorkspaceLayout& ws, const std::vector<float>& got) {
  const int64_t y_cols = c.out == Out::kSilu ? c.n / 2 : c.n;
  std::vector<uint16_t> gate_up(c.rows * c.n);
  if (c.out == Out::kSilu) {
    std::memcpy(gate_up.data(), workspace.data() + ws.acc_offset, gate_up.size() * 2);
  }
  int bad = 0;
  for (int32_t m = 0; m < c.rows; ++m) {
    for (int64_t j = 0; j < (c.out == Out::kSilu ? c.n : y_cols); ++j) {
      const int64_t o = m * c.n + j;
      double want = v_ref[o], have = 0, scale = std::abs(v_ref[o]);
      if (c.out == Out::kSilu) {
        have = engine::Bf16ToFloat(gate_up[o]);
      } else {
        have = got[m * y_cols + j];
        if (c.out == Out::kAdd) {
          want += engine::Bf16ToFloat(residual[m * y_cols + j]);
          scale += std::abs(want);
        }
      }
      const double bound = std::ldexp(scale, -8) + std::ldexp(sums[o], -9) + 1e-30;
      if (!std::isfinite(have) || std::abs(have - want) > bound) {
        if (++bad <= 8)
          ADD_FAILURE() << "[" << m << "][" << j << "] = " << have << ", want " << want;
      }
    }
  }
  EXPECT_EQ(bad, 0);
  if (c.out != Out::kSilu) return;
  std::vector<uint16_t> want(c.rows * y_cols);
  ASSERT_TRUE(engine::SiluMulRef({.dtype = DType::kBF16,
                                  .gate_up = gate_up.data(),
                                  .out = want.data(),
                                  .num_tokens = c.rows,
                                  .inter = y_cols})
                  .ok());
  EXPECT_ALL_CLOSE(got, ToFloats(want), Tolerance::For(DType::kBF16));
}

// Fp8Gemm's two forms (LaunchSettings::fp8_gemm_cublas_scales): the
// cuBLASLt product's fp32 sums then the epilogue kernel, or the scales and
// BF16 output inside cuBLASLt's product.
class Fp8GemmTest : public ::testing::TestWithParam<std::tuple<Fp8Case, bool>> {
 protected:
  void SetUp() override {
    engine::LaunchSettings s = engine::GetLaunchSettings();
    saved_ = s;
    s.fp8_gemm_cublas_scales = std::get<1>(GetParam());
    ASSERT_TRUE(engine::SetLaunchSettings(s).ok());
  }
  void TearDown() override { ASSERT_TRUE(engine::SetLaunchSettings(saved_).ok()); }

 private:
  engine::LaunchSettings saved_;
};

TEST_P(Fp8GemmTest, MatchesReference) {
  const Fp8Case& c = std::get<0>(GetParam());
  const uint32_t seed = std::hash<std::string>()(c.name) & 0xffff;
  std::mt19937 rng = SeededRng(seed, 53);
  engine::Fp8Matrix w = RandomFp8Matrix(c.n, c.k, Fp8Scales::kRow, seed);
  if (c.w == WKind::kScaleOutliers) {
    for (int64_t j = 0; j < c.n; ++j) {
      if (j % 97 == 0) w.scales[j] *= 1e4f;
      if (j % 89 == 1) w.scales[j] *= 1e-4f;
    }
  }
  ASSERT_TRUE(w.Validate(c.name).ok());
  const int64_t stride = (c.silu_x ? 2 * c.k : c.k) + 8;  // rows not packed
  const std::vector<uint16_t> x = MakeX(c, stride, rng);
  const int64_t y_cols = c.out == Out::kSilu ? c.n / 2 : c.n;
  const bool f32 = c.out == Out::kF32;
  std::vector<uint16_t> y16 = RandomBf16(c.rows * y_cols, rng);  // the residual when adding
  std::vector<float> y32(c.rows * y_cols, 0.0f);
  engine::Fp8GemmParams p{
      .w = {.codes = w.codes.data(), .scales = w.scales.data(), .n = c.n, .k = c.k},
      .x = x.data(),
      .x_row_stride = stride,
      .y = f32 ? static_cast<void*>(y32.data()) : y16.data(),
      .y_dtype = f32 ? DType::kF32 : DType::kBF16,
      .add_to_y = c.out == Out::kAdd,
      .silu_mul_y = c.out == Out::kSilu,
      .rows = c.rows};
  const std::vector<uint16_t> norm = RandomBf16(c.k, rng, 0.5f, 1.5f);
  if (c.norm) {
    p.norm_weight = norm.data();
    p.eps = 1e-5f;
  }
  p.silu_mul_x = c.silu_x;
  const bool approx = c.norm || c.silu_x;  // activations computed in the pass
  const std::vector<uint16_t> residual = y16;
  auto ref = [](const engine::Fp8GemmParams& part) { return engine::Fp8GemmRef(part); };
  ASSERT_TRUE(RowsOnCores(p, y_cols * (f32 ? 4 : 2), ref).ok());
  // The activations the reference quantizes (x's rows, or their RMSNorm).
  std::vector<uint16_t> xa = x;
  for (int32_t m = 0; m < c.rows && approx; ++m) {
    const absl::StatusOr<std::vector<uint16_t>> row = engine::Fp8GemmActivationRow(p, m);
    ASSERT_TRUE(row.ok()) << row.status();
    std::copy(row->begin(), row->end(), xa.begin() + m * stride);
  }

  Matmul mm;
  ASSERT_NE(mm.mm, nullptr);
  DeviceBuf<uint8_t> dcodes(w.codes);
  DeviceBuf<float> dscales(w.scales), dy32(y32.size());
  DeviceBuf<uint16_t> dx(x), dy16(y16.size()), dnorm(norm);
  const engine::Fp8GemmWorkspaceLayout ws = engine::Fp8GemmWorkspace(c.rows, c.n, c.k);
  DeviceBuf<uint8_t> dws(engine::Fp8GemmWorkspaceBytes(c.rows, c.n, c.k));
  p.w.codes = dcodes.get();
  p.w.scales = dscales.get();
  p.x = dx.get();
  if (c.norm) p.norm_weight = dnorm.get();
  p.y = f32 ? static_cast<void*>(dy32.get()) : dy16.get();
  p.workspace = dws.get();
  p.workspace_bytes = dws.size();
  ExpectSameBytesTwice(
      [&] {
        if (c.out == Out::kAdd) dy16.Upload(residual);
      },
      [&] { return engine::Fp8Gemm(*mm.mm, p, nullptr); }, p.y,
      f32 ? y32.size() * 4 : y16.size() * 2);
  if (HasFatalFailure()) return;

  // The activations as the kernel quantized them: the reference's, bit for
  // bit; with the norm (whose mean of squares the kernel sums in another
  // order) or SiLU·mul (the kernel's expf against std::exp) a value may
  // round to the next BF16: the scale within a BF16 unit and under 1 % of
  // the codes off, each by one code at most.
  const std::vector<uint8_t> left = dws.Download();
  std::vector<uint8_t> codes(c.k);
  for (int32_t m = 0; m < c.rows; ++m) {
    const float scale = engine::Fp8QuantizeActivationRow(xa.data() + m * stride, c.k, codes.data());
    float got_scale = 0;
    std::memcpy(&got_scale, left.data() + ws.scales_offset + 4 * m, 4);
    const uint8_t* got = left.data() + ws.codes_offset + m * c.k;
    if (!approx) {
      ASSERT_EQ(got_scale, scale) << "row " << m;
      ASSERT_TRUE(std::equal(codes.begin(), codes.end(), got)) << "codes of row " << m;
      continue;
    }
    ASSERT_NEAR(got_scale, scale, std::ldexp(scale, -7)) << "row " << m;
    int64_t off = 0;
    for (int64_t i = 0; i < c.k; ++i) {
      if (got[i] == codes[i]) continue;
      ++off;
      ASSERT_LE(std::abs(int{got[i] & 0x7f} - int{codes[i] & 0x7f}), 1) << "row " << m << " " << i;
    }
    // A scale one BF16 unit off (its row's amax rounded otherwise) moves every
    // quotient by 2^-8 of itself: those within 2^-8 of a rounding boundary, at
    // most 2^-8 / 2^-4 of them where E4M3's codes lie closest (3 mantissa
    // bits: 1/16), round to the neighbouring code.
    ASSERT_LE(off * (got_scale == scale ? 100 : 8), c.k) << "codes of row " << m;
  }

  // The product before the epilogue: the kernel's fp32 sums (left in the
  // workspace) times both scales, against the reference's within 2^-9 of
  // the products' magnitudes. Hopper's FP8 tensor cores add in a narrower
  // format (about 14 bits: DeepSeek-V3's report) between cuBLASLt's fp32
  // promotions, so sums differ from fp32's by more than BF16 rounding where
  // they cancel or one product dominates: on the H200 up to 0.07 % of the
  // output, more than 2^-13 of the magnitudes.
  // Where the pass computed the activations (codes a step apart from the
  // reference's, checked above), the products' reference is that of the
  // kernel's own codes and scales.
  std::vector<float> v_ref(c.rows * c.n);
  std::vector<double> sums;
  if (approx) {
    ProductsOfCodes(w, left.data() + ws.codes_offset, left.data() + ws.scales_offset, c.rows, v_ref,
                    sums);
  } else {
    engine::Fp8GemmParams plain = p;
    plain.w = {.codes = w.codes.data(), .scales = w.scales.data(), .n = c.n, .k = c.k};
    plain.x = xa.data();
    plain.y = v_ref.data();
    plain.y_dtype = DType::kF32;
    plain.add_to_y = plain.silu_mul_y = false;
    ASSERT_TRUE(RowsOnCores(plain, c.n * 4, ref).ok());
    sums = MagnitudeSums(w, xa, stride, c.rows);
  }
  absl::StatusOr<bool> scaled = engine::Fp8GemmUsesCublasScales(*mm.mm, p);
  ASSERT_TRUE(scaled.ok()) << scaled.status();
  const bool wanted = std::get<1>(GetParam()) && !f32 &&
                      c.rows >= engine::GetLaunchSettings().fp8_gemm_scaled_min_rows;
  EXPECT_TRUE(wanted || !*scaled) << "the scaled form below its rows or for fp32 y";
  if (wanted && !*scaled) {
    GTEST_SKIP() << "cuBLASLt has no outer-vector-scaled E4M3 algorithm for this shape here";
  }
  if (*scaled) {
    CheckScaledForm(c, sums, v_ref, residual, left, ws,
                    f32 ? std::vector<float>{} : ToFloats(dy16.Download()));
    return;
  }
  std::vector<float> v(c.rows * c.n);
  int bad = 0;
  double worst = 0;  // |v - v_ref| / magnitude sum
  for (int32_t m = 0; m < c.rows; ++m) {
    float x_scale = 0;
    std::memcpy(&x_scale, left.data() + ws.scales_offset + 4 * m, 4);
    for (int64_t j = 0; j < c.n; ++j) {
      float acc = 0;
      std::memcpy(&acc, left.data() + ws.acc_offset + 4 * (m * ws.acc_row_stride + j), 4);
      const int64_t o = m * c.n + j;
      v[o] = (acc * x_scale) * w.scales[j];
      const double bound = std::ldexp(sums[o], -9) + 1e-30;
      worst = std::max(worst, std::abs(double{v[o]} - v_ref[o]) / (sums[o] + 1e-30));
      if (!std::isfinite(v[o]) || std::abs(double{v[o]} - v_ref[o]) > bound) {
        if (++bad <= 8)
          ADD_FAILURE() << "v[" << m << "][" << j << "] = " << v[o] << ", want " << v_ref[o];
      }
    }
  }
  EXPECT_EQ(bad, 0);
  std::printf("%s: worst |v - v_ref| / sum |products| = 2^%.1f\n", c.name.c_str(),
              std::log2(worst));
  // The epilogue: y from the kernel's own products by the spec's roundings.
  auto bf16 = [](float f) { return engine::Bf16ToFloat(engine::FloatToBf16(f)); };
  std::vector<float> want(c.rows * y_cols);
  for (int32_t m = 0; m < c.rows; ++m) {
    for (int64_t j = 0; j < y_cols; ++j) {
      const float vj = v[m * c.n + j];
      float out = vj;
      if (c.out == Out::kBf16) {
        out = bf16(vj);
      } else if (c.out == Out::kAdd) {
        out = bf16(bf16(vj) + engine::Bf16ToFloat(residual[m * y_cols + j]));
      } else if (c.out == Out::kSilu) {
        const float g = bf16(vj), u = bf16(v[m * c.n + y_cols + j]);
        out = bf16(g / (1.0f + std::exp(-g)) * u);
      }
      want[m * y_cols + j] = out;
    }
  }
  const std::vector<float> got = f32 ? dy32.Download() : ToFloats(dy16.Download());
  for (float g : got) ASSERT_TRUE(std::isfinite(g));
  EXPECT_ALL_CLOSE(got, want, f32 ? (Tolerance{0, 0, 0}) : Tolerance::For(DType::kBF16));
}

INSTANTIATE_TEST_SUITE_P(Cases, Fp8GemmTest,
                         ::testing::Combine(::testing::ValuesIn(Cases()), ::testing::Bool()),
                         [](const auto& info) {
                           return std::get<0>(info.param).name +
                                  (std::get<1>(info.param) ? "_cublas_scales" : "_epilogue");
                         });

// Fp8DequantizeBf16 against its reference: equal bit for bit, for both scale
// kinds, blocks cut short at the edges, and every finite code.
TEST(Fp8DequantTest, MatchesReferenceExactly) {
  const std::tuple<int64_t, int64_t, Fp8Scales> cases[] = {{300, 4112, Fp8Scales::kRow},
                                                           {260, 304, Fp8Scales::kBlock128},
                                                           {1000, 576, Fp8Scales::kBlock128},
                                                           {1, 16, Fp8Scales::kRow}};
  for (const auto& [n, k, kind] : cases) {
    SCOPED_TRACE(::testing::Message() << n << "x" << k << " " << engine::Fp8ScalesName(kind));
    engine::Fp8Matrix m = RandomFp8Matrix(n, k, kind, static_cast<uint32_t>(n + k));
    for (int64_t i = 0; i < 256 && i < n * k; ++i) {
      m.codes[i] = (i & 0x7f) == 0x7f ? 0 : static_cast<uint8_t>(i);  // every finite code
    }
    std::vector<uint16_t> want(n * k);
    engine::Fp8DequantParams p{.w = {.codes = m.codes.data(),
                                     .scales = m.scales.data(),
                                     .n = n,
                                     .k = k,
                                     .scales_kind = kind},
                               .out = want.data()};
    ASSERT_TRUE(engine::Fp8DequantizeBf16Ref(p).ok());
    DeviceBuf<uint8_t> dcodes(m.codes);
    DeviceBuf<float> dscales(m.scales);
    DeviceBuf<uint16_t> dout(want.size());
    p.w.codes = dcodes.get();
    p.w.scales = dscales.get();
    p.out = dout.get();
    const absl::Status st = engine::Fp8DequantizeBf16(p, nullptr);
    ASSERT_TRUE(st.ok()) << st;
    EXPECT_EQ(dout.Download(), want);
  }
}

// A prepared shape captured into a CUDA graph and replayed gives the eager
// call's bytes; an unprepared one is refused during capture.
TEST(Fp8GemmGraphTest, PreparedShapeReplaysAsEager) {
  const int32_t rows = 40;
  const int64_t n = 1008, k = 576;
  std::mt19937 rng = SeededRng(1, 59);
  const engine::Fp8Matrix w = RandomFp8Matrix(n, k, Fp8Scales::kRow, 9);
  DeviceBuf<uint8_t> dcodes(w.codes);
  DeviceBuf<float> dscales(w.scales);
  DeviceBuf<uint16_t> dx(RandomBf16(rows * k, rng, -2.0f, 2.0f)), dy(rows * n);
  DeviceBuf<uint8_t> dws(engine::Fp8GemmWorkspaceBytes(rows, n, k));
  const engine::Fp8GemmParams p{
      .w = {.codes = dcodes.get(), .scales = dscales.get(), .n = n, .k = k},
      .x = dx.get(),
      .x_row_stride = k,
      .y = dy.get(),
      .rows = rows,
      .workspace = dws.get(),
      .workspace_bytes = static_cast<int64_t>(dws.size())};
  Matmul mm;
  ASSERT_NE(mm.mm, nullptr);
  cudaStream_t stream;
  ASSERT_CUDA_OK(cudaStreamCreate(&stream));
  ASSERT_TRUE(engine::Fp8Gemm(*mm.mm, p, stream).ok());
  const std::vector<uint16_t> eager = dy.Download();
  dy.Poison();

  engine::Fp8GemmParams other = p;  // a shape not prepared
  other.rows = rows - 1;
  ASSERT_TRUE(engine::PrepareFp8Gemm(*mm.mm, p).ok());
  cudaGraph_t graph = nullptr;
  ASSERT_CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  const absl::Status refused = engine::Fp8Gemm(*mm.mm, other, stream);
  ASSERT_CUDA_OK(cudaStreamEndCapture(stream, &graph));
  cudaGraphDestroy(graph);
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;

  ASSERT_CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  const absl::Status captured = engine::Fp8Gemm(*mm.mm, p, stream);
  ASSERT_CUDA_OK(cudaStreamEndCapture(stream, &graph));
  ASSERT_TRUE(captured.ok()) << captured;
  cudaGraphExec_t exec = nullptr;
  ASSERT_CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  ASSERT_CUDA_OK(cudaGraphLaunch(exec, stream));
  ASSERT_CUDA_OK(cudaStreamSynchronize(stream));
  EXPECT_EQ(dy.Download(), eager);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

TEST(Fp8GemmErrorTest, NamesWhatIsRefused) {
  Matmul mm;
  ASSERT_NE(mm.mm, nullptr);
  DeviceBuf<uint8_t> codes(64 * 64), ws(engine::Fp8GemmWorkspaceBytes(4, 64, 64));
  DeviceBuf<float> scales(64);
  DeviceBuf<uint16_t> x(4 * 64), y(4 * 64);
  engine::Fp8GemmParams p{.w = {.codes = codes.get(), .scales = scales.get(), .n = 64, .k = 64},
                          .x = x.get(),
                          .x_row_stride = 64,
                          .y = y.get(),
                          .rows = 4,
                          .workspace = ws.get(),
                          .workspace_bytes = static_cast<int64_t>(ws.size())};
  p.w.scales_kind = Fp8Scales::kBlock128;
  absl::Status st = engine::Fp8Gemm(*mm.mm, p, nullptr);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(st.message().find("block128"), std::string::npos) << st;
  p.w.scales_kind = Fp8Scales::kRow;
  p.w.k = 40;
  p.x_row_stride = 40;
  EXPECT_EQ(engine::Fp8Gemm(*mm.mm, p, nullptr).code(), absl::StatusCode::kUnimplemented);
  p.w.k = 48;
  p.x_row_stride = 56;
  p.x = x.get() + 4;  // 8 bytes in: not 16-byte aligned
  st = engine::Fp8Gemm(*mm.mm, p, nullptr);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("aligned"), std::string::npos) << st;
  p.x = x.get();
  p.workspace_bytes = 256;
  st = engine::Fp8Gemm(*mm.mm, p, nullptr);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("Fp8GemmWorkspaceBytes"), std::string::npos) << st;
  engine::Fp8DequantParams d{.w = p.w, .out = y.get() + 1};  // 2 bytes in
  EXPECT_EQ(engine::Fp8DequantizeBf16(d, nullptr).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace onecard::testing
