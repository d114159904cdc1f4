// Tests of CpuLinear and CpuLinearForward (engine/runtime/cpu/cpu_linear.h):
// every kernel set the processor runs against CpuLinearRef (the GGUF
// dequantizers and the same 8-bit activations, summed in double) for every
// block type, over awkward shapes (1/3/33 rows, outputs that are not
// multiples of the 4-wide tile, widths of 1, 3, 7 and 18 blocks (18: two
// whole groups of eight and a tail), runs of mixed types stacked as fused
// weights, large activation outliers), with and
// without bias; bitwise batch invariance; fp32 runs bitwise equal to MatMul;
// rows read back as the file's blocks dequantize (RowF32); QuantizeRowsQ8's
// codes and sums; QuantizeRowsQ8K bitwise against QuantizeRowsQ8KRef (and
// that reference against the rule it states); and the errors of the
// constructors.
#include "engine/runtime/cpu/cpu_linear.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "engine/common/fp16.h"
#include "engine/model/dequantize.h"
#include "engine/model/quant_blocks.h"
#include "engine/runtime/cpu/cpu_matmul.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace onecard::engine {
namespace {

using ::testing::HasSubstr;
std::vector<float> RandomFloats(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Random blocks of `dtype` for [rows, cols] with finite scales: every byte
// random, then each fp16 scale field set to a value in [2^-10, 2^-4].
std::vector<uint8_t> RandomBlocks(DType dtype, int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  const int64_t n = rows * cols / BlockElements(dtype), bytes = BlockBytes(dtype);
  std::vector<uint8_t> out(n * bytes);
  for (uint8_t& b : out) b = static_cast<uint8_t>(rng());
  std::uniform_real_distribution<float> scale(1.0f / 1024, 1.0f / 16);
  auto set_half = [&](uint8_t* p) {
    const uint16_t h = FloatToHalf(scale(rng));
    std::memcpy(p, &h, 2);
  };
  for (int64_t i = 0; i < n; ++i) {
    uint8_t* blk = out.data() + i * bytes;
    switch (dtype) {
      case DType::kQ4_1:
      case DType::kQ4_K:
      case DType::kQ5_K:
        set_half(blk);
        set_half(blk + 2);
        break;
      case DType::kQ6_K:
        set_half(blk + 208);
        break;
      default:
        set_half(blk);
    }
  }
  return out;
}

// x with a few outliers 100x the rest (activations' usual shape).
std::vector<float> Activations(int64_t n, uint32_t seed) {
  std::vector<float> x = RandomFloats(n, seed);
  for (int64_t i = 0; i < n; i += 37) x[i] *= 100.0f;
  return x;
}

// Bound of the error of an fp32 sum of these products against the double
// reference: relative 1e-5 of sum |w x| (the weights dequantized).
std::vector<float> Bounds(const CpuLinear& w, const std::vector<float>& x, int64_t rows) {
  const int64_t in = w.in_features(), out = w.out_features();
  std::vector<float> abs_x(x.size());
  for (size_t i = 0; i < x.size(); ++i) abs_x[i] = std::fabs(x[i]);
  std::vector<float> bound(rows * out), row(in);
  for (int64_t o = 0; o < out; ++o) {
    w.RowF32(o, row.data());
    for (int64_t r = 0; r < rows; ++r) {
      double s = 0;
      for (int64_t c = 0; c < in; ++c) s += std::fabs(row[c]) * abs_x[r * in + c];
      bound[r * out + o] = static_cast<float>(1e-5 * s + 1e-6);
    }
  }
  return bound;
}

constexpr DType kBlockTypes[] = {DType::kQ4_0, DType::kQ4_1, DType::kQ8_0,
                                 DType::kQ4_K, DType::kQ5_K, DType::kQ6_K};

// (dtype, rows, blocks a row, out features, bias)
using Shape = std::tuple<DType, int64_t, int64_t, int64_t, bool>;

class CpuLinearTest : public ::testing::TestWithParam<Shape> {};

TEST_P(CpuLinearTest, MatchesReference) {
  const auto [dtype, rows, blocks, out, with_bias] = GetParam();
  const int64_t in = blocks * BlockElements(dtype);
  auto w = CpuLinear::FromBlocks(dtype, RandomBlocks(dtype, out, in, 11), out, in, "w");
  ASSERT_TRUE(w.ok()) << w.status();
  const std::vector<float> x = Activations(rows * in, 12), b = RandomFloats(out, 13);
  const float* bias = with_bias ? b.data() : nullptr;
  std::vector<float> want(rows * out);
  CpuLinearRef(*w, {x.data(), bias, want.data(), rows});
  const std::vector<float> bound = Bounds(*w, x, rows);
  ThreadPool pool(2);
  for (CpuIsa isa : SupportedCpuIsas()) {
    std::vector<float> got(rows * out, NAN);
    CpuLinearScratch scratch;
    CpuLinearForward(pool, *w, {x.data(), bias, got.data(), rows}, &scratch, isa);
    for (int64_t i = 0; i < rows * out; ++i) {
      ASSERT_NEAR(got[i], want[i], bound[i])
          << CpuIsaName(isa) << " " << DTypeName(dtype) << " element " << i;
    }
  }
}

TEST_P(CpuLinearTest, RowsAreBitwiseIndependent) {
  const auto [dtype, rows, blocks, out, with_bias] = GetParam();
  const int64_t in = blocks * BlockElements(dtype);
  auto w = CpuLinear::FromBlocks(dtype, RandomBlocks(dtype, out, in, 21), out, in, "w");
  ASSERT_TRUE(w.ok()) << w.status();
  const std::vector<float> x = Activations(rows * in, 22), b = RandomFloats(out, 23);
  const float* bias = with_bias ? b.data() : nullptr;
  ThreadPool two(2), three(3);
  for (CpuIsa isa : SupportedCpuIsas()) {
    CpuLinearScratch scratch;
    std::vector<float> together(rows * out), on_three(rows * out);
    CpuLinearForward(two, *w, {x.data(), bias, together.data(), rows}, &scratch, isa);
    CpuLinearForward(three, *w, {x.data(), bias, on_three.data(), rows}, &scratch, isa);
    EXPECT_EQ(together, on_three) << CpuIsaName(isa);
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<float> alone(out);
      CpuLinearForward(two, *w, {x.data() + r * in, bias, alone.data(), 1}, &scratch, isa);
      ASSERT_EQ(alone,
                std::vector<float>(together.begin() + r * out, together.begin() + (r + 1) * out))
          << CpuIsaName(isa) << " row " << r;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, CpuLinearTest,
                         ::testing::Combine(::testing::ValuesIn(kBlockTypes),
                                            ::testing::Values(1, 3, 33),
                                            ::testing::Values(1, 3, 7, 18),
                                            ::testing::Values(1, 6, 13), ::testing::Bool()));

// q, k, v as three runs (Q4_K, Q4_K, Q6_K as in a Q4_K_M file) and an fp32
// run: each output feature from its own run's kernel.
TEST(CpuLinearMixedTest, StackedRunsMatchReference) {
  const int64_t in = 512, rows = 5;
  CpuLinear w;
  int64_t out = 0;
  uint32_t seed = 31;
  for (auto [dtype, n] :
       {std::pair{DType::kQ4_K, 9}, {DType::kQ4_K, 3}, {DType::kQ6_K, 3}, {DType::kQ8_0, 2}}) {
    auto part = CpuLinear::FromBlocks(dtype, RandomBlocks(dtype, n, in, ++seed), n, in, "part");
    ASSERT_TRUE(part.ok()) << part.status();
    ASSERT_TRUE(w.Append(*std::move(part), "w").ok());
    out += n;
  }
  auto f32 = CpuLinear::FromF32(RandomFloats(5 * in, 41), 5, in, "f32");
  ASSERT_TRUE(f32.ok());
  ASSERT_TRUE(w.Append(*std::move(f32), "w").ok());
  out += 5;
  ASSERT_EQ(w.out_features(), out);
  ASSERT_EQ(w.runs().size(), 5u);
  const std::vector<float> x = Activations(rows * in, 42);
  std::vector<float> want(rows * out);
  CpuLinearRef(w, {x.data(), nullptr, want.data(), rows});
  const std::vector<float> bound = Bounds(w, x, rows);
  ThreadPool pool(3);
  for (CpuIsa isa : SupportedCpuIsas()) {
    std::vector<float> got(rows * out, NAN);
    CpuLinearScratch scratch;
    CpuLinearForward(pool, w, {x.data(), nullptr, got.data(), rows}, &scratch, isa);
    for (int64_t i = 0; i < rows * out; ++i) {
      // The fp32 run multiplies x itself; its bound uses |x| too.
      ASSERT_NEAR(got[i], want[i], bound[i]) << CpuIsaName(isa) << " element " << i;
    }
  }
}

// Rows come back as the file's blocks dequantize, whatever the kernels'
// layout (Q4_0 and Q4_1 rows are packed in groups of eight blocks).
TEST(CpuLinearRowsTest, RowF32IsTheFilesDequantizedRow) {
  for (DType dtype : kBlockTypes) {
    for (int64_t blocks : {1, 8, 18, 40}) {
      const int64_t in = blocks * BlockElements(dtype), out = 3;
      const std::vector<uint8_t> file = RandomBlocks(dtype, out, in, 61);
      auto w = CpuLinear::FromBlocks(dtype, file, out, in, "w");
      ASSERT_TRUE(w.ok()) << w.status();
      std::vector<float> got(in), want(in);
      for (int64_t r = 0; r < out; ++r) {
        w->RowF32(r, got.data());
        DequantizeElements(dtype, file.data() + r * (file.size() / out), in, want.data());
        ASSERT_EQ(got, want) << DTypeName(dtype) << " " << blocks << " blocks, row " << r;
      }
    }
  }
}

TEST(CpuLinearF32Test, IsBitwiseMatMul) {
  for (auto [rows, in, out] : {std::tuple{1, 576, 7}, {7, 100, 13}, {33, 9, 4}}) {
    const std::vector<float> x = RandomFloats(rows * in, 51), wv = RandomFloats(out * in, 52);
    const std::vector<float> b = RandomFloats(out, 53);
    auto w = CpuLinear::FromF32(wv, out, in, "w");
    ASSERT_TRUE(w.ok());
    ThreadPool pool(2);
    std::vector<float> want(rows * out), got(rows * out);
    MatMul(pool, {x.data(), wv.data(), b.data(), want.data(), rows, in, out});
    CpuLinearScratch scratch;
    CpuLinearForward(pool, *w, {x.data(), b.data(), got.data(), rows}, &scratch);
    EXPECT_EQ(got, want) << rows << "x" << in << "x" << out;
  }
}

TEST(QuantizeRowsQ8Test, CodesScalesAndSums) {
  std::vector<float> x = Activations(3 * 64, 61);
  for (int i = 64; i < 96; ++i) x[i] = 0.0f;  // an all-zero block
  QuantizedRows q;
  QuantizeRowsQ8(x.data(), 3, 64, &q);
  ASSERT_EQ(q.q.size(), 192u);
  ASSERT_EQ(q.d.size(), 6u);
  EXPECT_EQ(q.d[2], 0.0f);
  for (int64_t b = 0; b < 6; ++b) {
    float amax = 0;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[b * 32 + i]));
    EXPECT_FLOAT_EQ(q.d[b], amax / 127.0f);
    int32_t s[2] = {0, 0};
    for (int i = 0; i < 32; ++i) {
      const int8_t code = q.q[b * 32 + i];
      EXPECT_LE(std::abs(code), 127);
      EXPECT_LE(std::fabs(q.d[b] * code - x[b * 32 + i]), 0.5f * q.d[b] * 1.0001f + 1e-30f);
      s[i / 16] += code;
    }
    EXPECT_EQ(q.sum16[2 * b], s[0]);
    EXPECT_EQ(q.sum16[2 * b + 1], s[1]);
    EXPECT_FLOAT_EQ(q.dsum[b], q.d[b] * static_cast<float>(s[0] + s[1]));
  }
}

// The K-quants' activations: the reference's codes, scales and sums against
// the rule (d = max|x| / 127 a 256-column block, |x - d q| <= d / 2), then
// QuantizeRowsQ8K bit for bit against the reference, on blocks with outliers,
// an all-zero block and one of a single nonzero value.
TEST(QuantizeRowsQ8KTest, MatchesTheReferenceBitwise) {
  const int64_t rows = 3, cols = 512;
  std::vector<float> x = Activations(rows * cols, 71);
  for (int i = 256; i < 512; ++i) x[i] = 0.0f;  // row 0, block 1: all zero
  for (int i = 512; i < 768; ++i) x[i] = i == 600 ? -3.5f : 0.0f;
  QuantizedRowsK want;
  QuantizeRowsQ8KRef(x.data(), rows, cols, &want);
  ASSERT_EQ(want.q.size(), 1536u);
  ASSERT_EQ(want.d.size(), 6u);
  ASSERT_EQ(want.sum16.size(), 96u);
  EXPECT_EQ(want.d[1], 0.0f);
  EXPECT_EQ(want.q[600], -127);
  for (int64_t b = 0; b < 6; ++b) {
    float amax = 0;
    for (int i = 0; i < 256; ++i) amax = std::max(amax, std::fabs(x[b * 256 + i]));
    EXPECT_FLOAT_EQ(want.d[b], amax / 127.0f);
    for (int g = 0; g < 16; ++g) {
      int32_t sum = 0;
      for (int i = 16 * g; i < 16 * g + 16; ++i) {
        const int8_t code = want.q[b * 256 + i];
        EXPECT_LE(std::abs(code), 127);
        EXPECT_LE(std::fabs(want.d[b] * code - x[b * 256 + i]), 0.5f * want.d[b] * 1.0001f);
        sum += code;
      }
      EXPECT_EQ(want.sum16[b * 16 + g], sum);
    }
  }
  QuantizedRowsK got;
  QuantizeRowsQ8K(x.data(), rows, cols, &got);
  EXPECT_EQ(got.rows, rows);
  EXPECT_EQ(got.cols, cols);
  EXPECT_EQ(got.q, want.q);
  EXPECT_EQ(got.d, want.d);
  EXPECT_EQ(got.sum16, want.sum16);
}

TEST(CpuLinearErrorsTest, NameTheWeightAndWhatIsWrong) {
  auto bad_width = CpuLinear::FromBlocks(DType::kQ4_K, std::vector<uint8_t>(144), 1, 128, "wq");
  EXPECT_THAT(std::string(bad_width.status().message()), HasSubstr("wq"));
  EXPECT_THAT(std::string(bad_width.status().message()), HasSubstr("256"));
  auto bad_bytes = CpuLinear::FromBlocks(DType::kQ4_1, std::vector<uint8_t>(19), 1, 32, "wk");
  EXPECT_THAT(std::string(bad_bytes.status().message()), HasSubstr("wk: 19 bytes"));
  auto bad_type = CpuLinear::FromBlocks(DType::kBF16, std::vector<uint8_t>(64), 1, 32, "wv");
  EXPECT_THAT(std::string(bad_type.status().message()), HasSubstr("wv: dtype BF16"));
  auto bad_f32 = CpuLinear::FromF32(std::vector<float>(5), 2, 3, "wo");
  EXPECT_THAT(std::string(bad_f32.status().message()), HasSubstr("wo: 5 values for [2, 3]"));
  auto a = CpuLinear::FromF32(std::vector<float>(6), 2, 3, "a");
  auto b = CpuLinear::FromF32(std::vector<float>(8), 2, 4, "b");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_THAT(std::string(a->Append(*std::move(b), "w_gate_up").message()),
              HasSubstr("w_gate_up: 4 input features; the rows above it have 3"));
}

}  // namespace
}  // namespace onecard::engine
