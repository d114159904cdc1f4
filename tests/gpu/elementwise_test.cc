// MatchesReference for the elementwise CUDA kernels against their plain
// references: Embedding, RmsNorm, FusedAddRmsNorm, SiluMul (F32 and BF16;
// token counts 1 / 7 / 33; widths that are and are not multiples of 8, so
// both the vector and the scalar paths run), and GatherColumns (BF16, the
// act-order column maps of 4-bit weights: bit for bit). Outputs start
// poisoned (NaN).
#include <algorithm>
#include <cstring>
#include <numeric>
#include <string>

#include "engine/kernels/embedding.h"
#include "engine/kernels/gather_columns.h"
#include "engine/kernels/rms_norm.h"
#include "engine/kernels/silu_mul.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/testing/all_close.h"

namespace onecard::testing {
namespace {

using engine::DType;

struct Shape {
  DType dtype;
  int32_t tokens;
  int64_t width;
};

std::string Name(const ::testing::TestParamInfo<Shape>& info) {
  return std::string(engine::DTypeName(info.param.dtype)) + "_t" +
         std::to_string(info.param.tokens) + "_w" + std::to_string(info.param.width);
}

const Shape kShapes[] = {{DType::kBF16, 1, 4096},   {DType::kBF16, 7, 576},
                         {DType::kBF16, 33, 96},    {DType::kBF16, 7, 100},
                         {DType::kF32, 1, 64},      {DType::kF32, 33, 4100},
                         {DType::kBF16, 33, 14336}, {DType::kBF16, 128, 8192},
                         {DType::kBF16, 3, 16392}};  // RmsNorm: rows in registers up to 16384

// Random host values of `dtype` as raw bytes, and the same as floats.
struct HostTensor {
  std::vector<uint16_t> bf16;
  std::vector<float> f32;
  DType dtype;
  HostTensor(DType d, size_t n, std::mt19937& rng, float lo = -2.0f, float hi = 2.0f) : dtype(d) {
    if (d == DType::kBF16) {
      bf16 = RandomBf16(n, rng, lo, hi);
    } else {
      f32 = RandomF32(n, rng, lo, hi);
    }
  }
  void* data() { return dtype == DType::kBF16 ? static_cast<void*>(bf16.data()) : f32.data(); }
  std::vector<float> Floats() const { return dtype == DType::kBF16 ? ToFloats(bf16) : f32; }
  size_t bytes() const { return dtype == DType::kBF16 ? bf16.size() * 2 : f32.size() * 4; }
};

// A device copy of a HostTensor (or a poisoned one of the same size).
struct DevTensor {
  DeviceBuf<uint8_t> buf;
  DType dtype;
  explicit DevTensor(const HostTensor& h, bool copy = true) : buf(h.bytes()), dtype(h.dtype) {
    if (copy) {
      cudaMemcpy(buf.get(),
                 h.dtype == DType::kBF16 ? static_cast<const void*>(h.bf16.data()) : h.f32.data(),
                 h.bytes(), cudaMemcpyHostToDevice);
    }
  }
  std::vector<float> Floats() const {
    const std::vector<uint8_t> raw = buf.Download();
    std::vector<float> out;
    if (dtype == DType::kBF16) {
      std::vector<uint16_t> v(raw.size() / 2);
      std::memcpy(v.data(), raw.data(), raw.size());
      out = ToFloats(v);
    } else {
      out.resize(raw.size() / 4);
      std::memcpy(out.data(), raw.data(), raw.size());
    }
    return out;
  }
};

class ElementwiseTest : public ::testing::TestWithParam<Shape> {};

TEST_P(ElementwiseTest, EmbeddingMatchesReference) {
  const Shape s = GetParam();
  std::mt19937 rng = SeededRng(s.tokens * 131 + s.width, 1);
  const int64_t vocab = 1003;
  HostTensor table(s.dtype, vocab * s.width, rng);
  std::vector<int32_t> ids(s.tokens);
  for (auto& id : ids) id = static_cast<int32_t>(rng() % vocab);
  HostTensor want(s.dtype, s.tokens * s.width, rng);
  engine::EmbeddingParams p{.dtype = s.dtype,
                            .token_ids = ids.data(),
                            .table = table.data(),
                            .out = want.data(),
                            .num_tokens = s.tokens,
                            .vocab_size = vocab,
                            .hidden = s.width};
  ASSERT_TRUE(engine::EmbeddingRef(p).ok());
  DevTensor d_table(table), d_out(want, false);
  DeviceBuf<int32_t> d_ids(ids);
  p.token_ids = d_ids.get();
  p.table = d_table.buf.get();
  p.out = d_out.buf.get();
  ASSERT_TRUE(engine::Embedding(p, nullptr).ok());
  EXPECT_ALL_CLOSE(d_out.Floats(), want.Floats(), (Tolerance{0, 0, 0}));
}

TEST_P(ElementwiseTest, RmsNormMatchesReference) {
  const Shape s = GetParam();
  std::mt19937 rng = SeededRng(s.tokens * 131 + s.width, 2);
  HostTensor x(s.dtype, s.tokens * s.width, rng), w(s.dtype, s.width, rng, 0.5f, 1.5f);
  HostTensor want(s.dtype, s.tokens * s.width, rng);
  engine::RmsNormParams p{.dtype = s.dtype,
                          .x = x.data(),
                          .weight = w.data(),
                          .out = want.data(),
                          .num_tokens = s.tokens,
                          .hidden = s.width,
                          .eps = 1e-5f};
  ASSERT_TRUE(engine::RmsNormRef(p).ok());
  DevTensor dx(x), dw(w), dout(want, false);
  p.x = dx.buf.get();
  p.weight = dw.buf.get();
  p.out = dout.buf.get();
  ASSERT_TRUE(engine::RmsNorm(p, nullptr).ok());
  EXPECT_ALL_CLOSE(dout.Floats(), want.Floats(), Tolerance::For(s.dtype));
}

TEST_P(ElementwiseTest, FusedAddRmsNormMatchesReference) {
  const Shape s = GetParam();
  std::mt19937 rng = SeededRng(s.tokens * 131 + s.width, 3);
  HostTensor x(s.dtype, s.tokens * s.width, rng), res(s.dtype, s.tokens * s.width, rng);
  HostTensor w(s.dtype, s.width, rng, 0.5f, 1.5f), want(s.dtype, s.tokens * s.width, rng);
  DevTensor dx(x), dres(res), dw(w), dout(want, false);
  engine::FusedAddRmsNormParams p{.dtype = s.dtype,
                                  .x = x.data(),
                                  .residual = res.data(),
                                  .weight = w.data(),
                                  .out = want.data(),
                                  .num_tokens = s.tokens,
                                  .hidden = s.width,
                                  .eps = 1e-6f};
  ASSERT_TRUE(engine::FusedAddRmsNormRef(p).ok());
  p.x = dx.buf.get();
  p.residual = dres.buf.get();
  p.weight = dw.buf.get();
  p.out = dout.buf.get();
  ASSERT_TRUE(engine::FusedAddRmsNorm(p, nullptr).ok());
  EXPECT_ALL_CLOSE(dres.Floats(), res.Floats(), Tolerance::For(s.dtype));
  EXPECT_ALL_CLOSE(dout.Floats(), want.Floats(), Tolerance::For(s.dtype));
}

// The sublayer output as split-K partials (2 or 3 fp32 slices, the form a
// split o / down product leaves): folded into the residual, then the norm.
TEST_P(ElementwiseTest, FusedAddRmsNormFromPartialsMatchesReference) {
  const Shape s = GetParam();
  const int32_t slices = 2 + s.tokens % 2;
  std::mt19937 rng = SeededRng(s.tokens * 131 + s.width, 7);
  const size_t n = static_cast<size_t>(s.tokens) * s.width;
  std::vector<float> partials = RandomF32(slices * n, rng, -1.0f, 1.0f);
  HostTensor res(s.dtype, n, rng), w(s.dtype, s.width, rng, 0.5f, 1.5f), want(s.dtype, n, rng);
  DevTensor dres(res), dw(w), dout(want, false);
  DeviceBuf<float> dpartials(partials);
  engine::FusedAddRmsNormParams p{.dtype = s.dtype,
                                  .residual = res.data(),
                                  .weight = w.data(),
                                  .out = want.data(),
                                  .num_tokens = s.tokens,
                                  .hidden = s.width,
                                  .eps = 1e-6f,
                                  .partials = partials.data(),
                                  .num_partials = slices};
  ASSERT_TRUE(engine::FusedAddRmsNormRef(p).ok());
  p.residual = dres.buf.get();
  p.weight = dw.buf.get();
  p.out = dout.buf.get();
  p.partials = dpartials.get();
  ASSERT_TRUE(engine::FusedAddRmsNorm(p, nullptr).ok());
  EXPECT_ALL_CLOSE(dres.Floats(), res.Floats(), Tolerance::For(s.dtype));
  EXPECT_ALL_CLOSE(dout.Floats(), want.Floats(), Tolerance::For(s.dtype));
}

TEST_P(ElementwiseTest, SiluMulMatchesReference) {
  const Shape s = GetParam();
  std::mt19937 rng = SeededRng(s.tokens * 131 + s.width, 4);
  HostTensor gu(s.dtype, s.tokens * 2 * s.width, rng, -6.0f, 6.0f);
  HostTensor want(s.dtype, s.tokens * s.width, rng);
  engine::SiluMulParams p{.dtype = s.dtype,
                          .gate_up = gu.data(),
                          .out = want.data(),
                          .num_tokens = s.tokens,
                          .inter = s.width};
  ASSERT_TRUE(engine::SiluMulRef(p).ok());
  DevTensor dgu(gu), dout(want, false);
  p.gate_up = dgu.buf.get();
  p.out = dout.buf.get();
  ASSERT_TRUE(engine::SiluMul(p, nullptr).ok());
  EXPECT_ALL_CLOSE(dout.Floats(), want.Floats(), Tolerance::For(s.dtype));
}

INSTANTIATE_TEST_SUITE_P(Shapes, ElementwiseTest, ::testing::ValuesIn(kShapes), Name);

// Rows 1 / 3 / 17 / 64, k of the 4-bit shapes (Qwen2-72B's padded 29696
// too), rows of x wider than k (a strided input).
TEST(GatherColumnsTest, MatchesReference) {
  const struct {
    int32_t rows;
    int64_t k, stride;
  } kCases[] = {{1, 4096, 4096},  {3, 5120, 5120},   {17, 14336, 14336},
                {64, 8192, 8192}, {1, 29696, 29696}, {5, 576, 640}};
  for (const auto& c : kCases) {
    std::mt19937 rng(c.rows * 31 + c.k);
    const std::vector<uint16_t> x = RandomBf16(c.rows * c.stride, rng, -2.0f, 2.0f);
    std::vector<int32_t> columns(c.k);
    std::iota(columns.begin(), columns.end(), 0);
    std::shuffle(columns.begin(), columns.end(), rng);
    std::vector<uint16_t> want(c.rows * c.k);
    engine::GatherColumnsParams p{.x = x.data(),
                                  .x_row_stride = c.stride,
                                  .columns = columns.data(),
                                  .y = want.data(),
                                  .rows = c.rows,
                                  .k = c.k};
    ASSERT_TRUE(engine::GatherColumnsRef(p).ok());
    DeviceBuf<uint16_t> dx(x), dy(want.size());
    DeviceBuf<int32_t> dcolumns(columns);
    p.x = dx.get();
    p.columns = dcolumns.get();
    p.y = dy.get();
    ASSERT_TRUE(engine::GatherColumns(p, nullptr).ok());
    EXPECT_EQ(dy.Download(), want) << c.rows << " x " << c.k;
  }
}

TEST(ElementwiseTest, UnsupportedDtypeIsUnimplemented) {
  engine::SiluMulParams p{.dtype = DType::kQ4_0, .num_tokens = 1, .inter = 8};
  EXPECT_EQ(engine::SiluMul(p, nullptr).code(), absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace onecard::testing
