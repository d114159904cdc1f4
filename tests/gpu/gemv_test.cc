// MatchesReference for Gemv (every prologue and epilogue, SiLU·mul of the
// gate/up rows included; rows 1..4; the
// llama3-8b projection shapes, SmolLM2's 576-wide rows, a 70B's 28672-wide
// down rows, tiny odd n; FP8 weights with row and 128 x 128 block scales,
// blocks cut by k and n, one row's or block's scale an outlier) and for
// Linear (cuBLAS, BF16 and F32, with and without bias, rows 1 / 7 / 33).
// Gemv rounds where the unfused ops store, so only the fp32 summation order
// differs: BF16 outputs within 1-2 BF16 ulp (Tolerance::For(BF16)); F32
// outputs (logits) within 1e-3 relative of sums over k <= 14336 terms.
#include "engine/kernels/gemv.h"

#include <algorithm>
#include <string>

#include "engine/common/fp8.h"
#include "engine/kernels/linear.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/testing/all_close.h"

namespace onecard::testing {
namespace {

using engine::DType;
using engine::GemvPrologue;

struct GemvCase {
  std::string name;
  GemvPrologue prologue;
  bool f32_out;
  bool add;
  int32_t rows;
  int64_t n;
  int64_t k;
  bool silu = false;  // silu_mul_y: 2n weight rows, n outputs
  int fp8 = 0;        // 0: BF16 weights; FP8 with 1: row scales, 2: block scales
};

std::vector<GemvCase> Cases() {
  return {
      {"qkv_norm_r1", GemvPrologue::kRmsNorm, false, false, 1, 6144, 4096},
      {"o_add_r1", GemvPrologue::kNone, false, true, 1, 4096, 4096},
      {"gateup_norm_r3", GemvPrologue::kRmsNorm, false, false, 3, 28672, 4096},
      {"down_silu_add_r4", GemvPrologue::kSiluMul, false, true, 4, 4096, 14336},
      {"down_silu_add_r1", GemvPrologue::kSiluMul, false, true, 1, 4096, 14336},
      {"lmhead_norm_f32_r2", GemvPrologue::kRmsNorm, true, false, 2, 49152, 576},
      {"plain_r2_odd_n", GemvPrologue::kNone, false, false, 2, 37, 96},
      {"plain_f32_r4_tiny", GemvPrologue::kNone, true, false, 4, 1003, 64},
      {"gateup_norm_silu_r1", GemvPrologue::kRmsNorm, false, false, 1, 14336, 4096, true},
      {"gateup_norm_silu_r4", GemvPrologue::kRmsNorm, false, false, 4, 14336, 4096, true},
      {"smol_norm_silu_r2", GemvPrologue::kRmsNorm, false, false, 2, 1536, 576, true},
      {"plain_silu_r3_odd_n", GemvPrologue::kNone, false, false, 3, 37, 96, true},
      {"down_plain_add_r1", GemvPrologue::kNone, false, true, 1, 4096, 14336},
      {"down70b_plain_add_r4", GemvPrologue::kNone, false, true, 4, 1024, 28672},
      {"fp8_qkv_norm_r1", GemvPrologue::kRmsNorm, false, false, 1, 6144, 4096, false, 1},
      {"fp8_down70b_add_r1", GemvPrologue::kNone, false, true, 1, 8192, 28672, false, 1},
      {"fp8_down70b_add_r4", GemvPrologue::kNone, false, true, 4, 1024, 28672, false, 1},
      {"fp8_gateup_silu_r2", GemvPrologue::kRmsNorm, false, false, 2, 14336, 4096, true, 1},
      {"fp8_down_silu_add_r3", GemvPrologue::kSiluMul, false, true, 3, 4096, 14336, false, 1},
      {"fp8_plain_f32_r3_odd", GemvPrologue::kNone, true, false, 3, 37, 96, false, 1},
      {"fp8_blk_qkv_norm_r1", GemvPrologue::kRmsNorm, false, false, 1, 6144, 4096, false, 2},
      {"fp8_blk_cut_add_r4", GemvPrologue::kNone, false, true, 4, 300, 208, false, 2},
      {"fp8_blk_silu_odd_r3", GemvPrologue::kRmsNorm, false, false, 3, 37, 4096 + 16, true, 2},
      {"fp8_blk_f32_r2", GemvPrologue::kNone, true, false, 2, 1003, 1024, false, 2},
  };
}

class GemvTest : public ::testing::TestWithParam<GemvCase> {};

TEST_P(GemvTest, MatchesReference) {
  const GemvCase& c = GetParam();
  std::mt19937 rng = SeededRng(std::hash<std::string>()(c.name) & 0xffff, 31);
  const int64_t x_cols = c.prologue == GemvPrologue::kSiluMul ? 2 * c.k : c.k;
  const int64_t x_stride = x_cols + 16;  // rows not packed
  std::vector<uint16_t> x = RandomBf16(c.rows * x_stride, rng, -2.0f, 2.0f);
  std::vector<uint16_t> norm = RandomBf16(c.k, rng, 0.5f, 1.5f);
  const float bound = std::sqrt(3.0f / static_cast<float>(c.k));
  const int64_t w_rows = (c.silu ? 2 : 1) * c.n;
  std::vector<uint16_t> w = RandomBf16(w_rows * c.k, rng, -bound, bound);
  // FP8: codes over the whole E4M3 range (saturated ends included), scales
  // bound / 448 * (0.5..1.5), the third one 1000 times larger except under
  // silu_mul_y (gate sums 1000 times larger put many at -5..-10, where
  // silu's slope turns the one-ulp BF16 rounding difference that another
  // summation order may give the gate into 2-4 % of the output).
  engine::Fp8Matrix w8{
      .n = w_rows,
      .k = c.k,
      .scales_kind = c.fp8 == 2 ? engine::Fp8Scales::kBlock128 : engine::Fp8Scales::kRow};
  if (c.fp8 != 0) {
    std::uniform_real_distribution<float> code(-500.0f, 500.0f), spread(0.5f, 1.5f);
    for (int64_t i = 0; i < w_rows * c.k; ++i) w8.codes.push_back(engine::FloatToE4m3(code(rng)));
    for (int64_t i = 0; i < engine::Fp8ScaleCount(w_rows, c.k, w8.scales_kind); ++i) {
      w8.scales.push_back(bound / 448.0f * spread(rng) * (i == 2 && !c.silu ? 1000.0f : 1.0f));
    }
    ASSERT_TRUE(w8.Validate(c.name).ok());
  }
  std::vector<uint16_t> y16 = RandomBf16(c.rows * c.n, rng);  // the residual when adding
  std::vector<float> y32(c.rows * c.n, 0.0f);
  engine::GemvParams p{.prologue = c.prologue,
                       .x = x.data(),
                       .x_row_stride = x_stride,
                       .norm_weight = norm.data(),
                       .eps = 1e-5f,
                       .w = c.fp8 != 0 ? static_cast<const void*>(w8.codes.data()) : w.data(),
                       .w_dtype = c.fp8 != 0 ? DType::kF8E4M3 : DType::kBF16,
                       .w_scales = w8.scales.data(),
                       .w_scales_kind = w8.scales_kind,
                       .y = c.f32_out ? static_cast<void*>(y32.data()) : y16.data(),
                       .y_dtype = c.f32_out ? DType::kF32 : DType::kBF16,
                       .add_to_y = c.add,
                       .silu_mul_y = c.silu,
                       .num_rows = c.rows,
                       .n = c.n,
                       .k = c.k};
  DeviceBuf<uint16_t> dx(x), dnorm(norm), dw(w), dy16(y16.size());
  DeviceBuf<uint8_t> dw8(std::max<size_t>(w8.codes.size(), 1));
  DeviceBuf<float> dscales(std::max<size_t>(w8.scales.size(), 1));
  if (c.fp8 != 0) {
    dw8.Upload(w8.codes);
    dscales.Upload(w8.scales);
  }
  if (c.add) dy16.Upload(y16);  // the residual; GemvRef updates the host copy
  ASSERT_TRUE(engine::GemvRef(p).ok());
  DeviceBuf<float> dy32(y32.size());
  p.x = dx.get();
  p.norm_weight = dnorm.get();
  p.w = c.fp8 != 0 ? static_cast<const void*>(dw8.get()) : dw.get();
  p.w_scales = dscales.get();
  p.y = c.f32_out ? static_cast<void*>(dy32.get()) : dy16.get();
  const absl::Status st = engine::Gemv(p, nullptr);
  ASSERT_TRUE(st.ok()) << st;
  if (c.f32_out) {
    EXPECT_ALL_CLOSE(dy32.Download(), y32, (Tolerance{1e-3, 1e-3, 1e-7}));
  } else {
    EXPECT_ALL_CLOSE(ToFloats(dy16.Download()), ToFloats(y16), Tolerance::For(DType::kBF16));
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, GemvTest, ::testing::ValuesIn(Cases()),
                         [](const auto& info) { return info.param.name; });

struct LinearCase {
  DType dtype;
  int32_t rows;
  int64_t in;
  int64_t out;
  bool bias;
};

class LinearTest : public ::testing::TestWithParam<LinearCase> {};

TEST_P(LinearTest, MatchesReference) {
  const LinearCase& c = GetParam();
  std::mt19937 rng = SeededRng(c.rows * 1000 + c.in, 32);
  const bool bf = c.dtype == DType::kBF16;
  std::vector<uint16_t> xb, wb, bb, yb(c.rows * c.out);
  std::vector<float> xf, wf, bfv, yf(c.rows * c.out);
  if (bf) {
    xb = RandomBf16(c.rows * c.in, rng);
    wb = RandomBf16(c.out * c.in, rng, -0.1f, 0.1f);
    bb = RandomBf16(c.out, rng);
  } else {
    xf = RandomF32(c.rows * c.in, rng);
    wf = RandomF32(c.out * c.in, rng, -0.1f, 0.1f);
    bfv = RandomF32(c.out, rng);
  }
  auto ptr = [&](std::vector<uint16_t>& a, std::vector<float>& b) -> void* {
    return bf ? static_cast<void*>(a.data()) : b.data();
  };
  engine::LinearParams p{.dtype = c.dtype,
                         .x = ptr(xb, xf),
                         .weight = ptr(wb, wf),
                         .bias = c.bias ? ptr(bb, bfv) : nullptr,
                         .y = ptr(yb, yf),
                         .num_rows = c.rows,
                         .in_features = c.in,
                         .out_features = c.out};
  ASSERT_TRUE(engine::LinearRef(p).ok());
  DeviceBuf<uint16_t> dxb(xb), dwb(wb), dbb(bb), dyb(yb.size());
  DeviceBuf<float> dxf(xf), dwf(wf), dbf(bfv), dyf(yf.size());
  p.x = bf ? static_cast<void*>(dxb.get()) : dxf.get();
  p.weight = bf ? static_cast<void*>(dwb.get()) : dwf.get();
  p.bias = !c.bias ? nullptr : bf ? static_cast<void*>(dbb.get()) : dbf.get();
  p.y = bf ? static_cast<void*>(dyb.get()) : dyf.get();
  const absl::Status st = engine::Linear(p, nullptr);
  ASSERT_TRUE(st.ok()) << st;
  if (bf) {
    EXPECT_ALL_CLOSE(ToFloats(dyb.Download()), ToFloats(yb), Tolerance::For(DType::kBF16));
  } else {
    EXPECT_ALL_CLOSE(dyf.Download(), yf, (Tolerance{1e-4, 1e-4, 1e-9}));
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, LinearTest,
                         ::testing::Values(LinearCase{DType::kBF16, 1, 4096, 6144, false},
                                           LinearCase{DType::kBF16, 7, 96, 144, true},
                                           LinearCase{DType::kBF16, 33, 576, 1536, true},
                                           LinearCase{DType::kF32, 33, 64, 160, true},
                                           LinearCase{DType::kF32, 1, 100, 37, false}));

}  // namespace
}  // namespace onecard::testing
