// The HF 4-bit checkpoints of tests/golden/hf_int4/ (made by
// make_hf_int4_goldens.py, quantized, packed and dequantized as GPTQModel,
// AutoAWQ and compressed-tensors publish it) read through ResolveTensor and
// ReadTensorInt4 (hf_int4.h):
// - every projection's Int4Matrix::Value rounded to fp16 equals the upstream
//   dequantization bit for bit: upstream computes s * (q - z) in fp16, Value
//   is the same product exact in fp32 (so within half an fp16 ulp of it);
//   ReadTensorF32 gives DequantizeInt4's values;
// - the 4-bit form each config gives (group size, offset kind, act order);
// - act order (GPTQ desc_act, a shuffled g_idx): the columns are sorted into
//   whole groups, and W x equals the stored matrix times the permuted x, in
//   plain sums and through Int4GemmRef (the GPU kernel's reference) on the
//   packed weight.
#include "engine/model/hf_int4.h"

#include <cmath>
#include <cstring>
#include <random>

#include "engine/common/fp16.h"
#include "engine/kernels/int4_gemm.h"
#include "engine/model/layer_tensors.h"
#include "engine/model/quant_blocks.h"
#include "engine/model/safetensors.h"
#include "gtest/gtest.h"
#include "tests/testing/all_close.h"

namespace onecard::engine {
namespace {

using ::onecard::testing::SourcePath;

struct Variant {
  const char* dir;  // under tests/golden/hf_int4/
  Int4Form attn;    // q, k, v, o
  Int4Form mlp;     // gate, up, down
};

void PrintTo(const Variant& v, std::ostream* os) { *os << v.dir; }

constexpr Variant kVariants[] = {
    {"gptq_v1_act", {32, Int4Offsets::kZero, true}, {32, Int4Offsets::kZero, true}},
    {"gptq_v2_sym", {64, Int4Offsets::kSymmetric, false}, {64, Int4Offsets::kSymmetric, false}},
    {"awq", {64, Int4Offsets::kZero, false}, {64, Int4Offsets::kZero, false}},
    {"compressed", {32, Int4Offsets::kZero, false}, {64, Int4Offsets::kSymmetric, false}},
};

constexpr TensorPart kProjections[] = {TensorPart::kQ,   TensorPart::kK,    TensorPart::kV,
                                       TensorPart::kO,   TensorPart::kGate, TensorPart::kUp,
                                       TensorPart::kDown};

std::string Folder(const char* dir) {
  return SourcePath(std::string("tests/golden/hf_int4/") + dir);
}

class HfInt4GoldenTest : public ::testing::TestWithParam<Variant> {
 protected:
  void SetUp() override {
    auto ckpt = OpenCheckpoint(Folder(GetParam().dir));
    ASSERT_TRUE(ckpt.ok()) << ckpt.status();
    ckpt_ = std::move(*ckpt);
    auto golden = SafetensorsSource::OpenFile(Folder(GetParam().dir) + "/dequantized.safetensors");
    ASSERT_TRUE(golden.ok()) << golden.status();
    golden_ = std::move(*golden);
  }
  Checkpoint ckpt_;
  std::unique_ptr<SafetensorsSource> golden_;
};

TEST_P(HfInt4GoldenTest, ValueRoundedToFp16IsTheUpstreamDequantization) {
  for (TensorPart part : kProjections) {
    auto t = ResolveTensor(ckpt_, part, 0);
    ASSERT_TRUE(t.ok()) << t.status();
    ASSERT_TRUE(t->hf_int4.has_value()) << t->name;
    auto m = ReadTensorInt4(*t);
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_TRUE(m->Validate(t->name).ok()) << m->Validate(t->name);
    const std::vector<float> w = DequantizeInt4(*m);
    const TensorView* g = golden_->Find(t->name);
    ASSERT_NE(g, nullptr) << t->name;
    ASSERT_EQ(g->dtype, DType::kF16);
    ASSERT_EQ(g->shape, t->shape);
    int64_t mismatches = 0, inexact = 0;
    for (size_t i = 0; i < w.size(); ++i) {
      uint16_t want;
      std::memcpy(&want, g->data + 2 * i, 2);
      inexact += HalfToFloat(FloatToHalf(w[i])) != w[i];
      if (FloatToHalf(w[i]) == want) continue;
      if (mismatches++ == 0) {
        ADD_FAILURE() << t->name << " [" << i / t->shape[1] << ", " << i % t->shape[1]
                      << "]: " << w[i] << ", upstream " << HalfToFloat(want);
      }
    }
    EXPECT_EQ(mismatches, 0) << t->name;
    EXPECT_GT(inexact, 0) << t->name << ": every value exact in fp16; the test proves less";
    auto f32 = ReadTensorF32(*t);
    ASSERT_TRUE(f32.ok()) << f32.status();
    EXPECT_EQ(*f32, w) << t->name;
  }
}

TEST_P(HfInt4GoldenTest, FormsFollowTheConfig) {
  for (TensorPart part : kProjections) {
    auto t = ResolveTensor(ckpt_, part, 0);
    ASSERT_TRUE(t.ok()) << t.status();
    auto form = Int4FormOf(*t);
    ASSERT_TRUE(form.ok()) << form.status();
    ASSERT_TRUE(form->has_value()) << t->name;
    const bool attn = part == TensorPart::kQ || part == TensorPart::kK || part == TensorPart::kV ||
                      part == TensorPart::kO;
    const Int4Form& want = attn ? GetParam().attn : GetParam().mlp;
    EXPECT_EQ((*form)->group, want.group) << t->name;
    EXPECT_EQ((*form)->offsets, want.offsets) << t->name;
    EXPECT_EQ((*form)->reordered, want.reordered) << t->name;
    const std::optional<HfInt4Part> part_of = HfInt4PartOf(ckpt_, t->hf_int4->scales->name);
    ASSERT_TRUE(part_of.has_value()) << t->name;
    EXPECT_EQ(part_of->method, ckpt_.quant.method);
    EXPECT_EQ(part_of->module, t->hf_int4->module);
  }
  auto norm = ResolveTensor(ckpt_, TensorPart::kAttnNorm, 0);
  ASSERT_TRUE(norm.ok()) << norm.status();
  EXPECT_FALSE(norm->hf_int4.has_value());
  EXPECT_FALSE(Int4FormOf(*norm)->has_value());
  EXPECT_FALSE(HfInt4PartOf(ckpt_, norm->name).has_value());
}

INSTANTIATE_TEST_SUITE_P(Checkpoints, HfInt4GoldenTest, ::testing::ValuesIn(kVariants),
                         [](const ::testing::TestParamInfo<Variant>& info) {
                           return std::string(info.param.dir);
                         });

// g_idx as stored in the act-order checkpoint.
std::vector<int32_t> GIdx(const Checkpoint& ckpt, const std::string& module) {
  const TensorView* v = ckpt.weights->Find(module + ".g_idx");
  std::vector<int32_t> g(v == nullptr ? 0 : v->NumElements());
  if (v != nullptr) std::memcpy(g.data(), v->data, g.size() * 4);
  return g;
}

TEST(HfInt4ActOrderTest, PermutedWeightTimesPermutedXIsWTimesX) {
  auto ckpt = OpenCheckpoint(Folder("gptq_v1_act"));
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  for (TensorPart part : {TensorPart::kQ, TensorPart::kDown}) {
    auto t = ResolveTensor(*ckpt, part, 0);
    ASSERT_TRUE(t.ok()) << t.status();
    auto m = ReadTensorInt4(*t);
    ASSERT_TRUE(m.ok()) << m.status();
    ASSERT_EQ(static_cast<int64_t>(m->columns.size()), m->k);
    const std::vector<int32_t> g_idx = GIdx(*ckpt, t->hf_int4->module);
    for (int64_t j = 0; j < m->k; ++j) ASSERT_EQ(g_idx[m->columns[j]], j / m->group) << j;

    std::mt19937 rng(5);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<uint16_t> x(m->k), x_perm(m->k);
    for (uint16_t& v : x) v = FloatToBf16(u(rng));
    for (int64_t j = 0; j < m->k; ++j) x_perm[j] = x[m->columns[j]];
    const std::vector<float> w = DequantizeInt4(*m);
    std::vector<float> y_ref(m->n);
    for (int64_t r = 0; r < m->n; ++r) {
      double plain = 0, permuted = 0;
      for (int64_t c = 0; c < m->k; ++c) plain += double{w[r * m->k + c]} * Bf16ToFloat(x[c]);
      for (int64_t j = 0; j < m->k; ++j) {
        permuted += double{m->Value(r, j)} * Bf16ToFloat(x_perm[j]);
      }
      EXPECT_NEAR(permuted, plain, 1e-12 * (1 + std::abs(plain))) << r;
      y_ref[r] = static_cast<float>(plain);
    }

    Int4Packed packed = MakeInt4Packed(m->n, m->k, m->group, m->offsets);
    ASSERT_TRUE(PackInt4Rows(*m, ConcatRows(m->n, 0), m->n, &packed).ok());
    std::vector<float> y(m->n, std::nanf(""));
    Int4GemmParams p;
    p.w = {packed.codes.data(), packed.scales.data(), packed.offsets.data(), m->n, m->k, m->group,
           m->offsets};
    p.x = x_perm.data();
    p.x_row_stride = m->k;
    p.y = y.data();
    p.y_dtype = DType::kF32;
    p.rows = 1;
    ASSERT_TRUE(Int4GemmRef(p).ok());
    EXPECT_ALL_CLOSE(y, y_ref, (testing::Tolerance{1e-6, 1e-5, 1e-10}));
  }
}

}  // namespace
}  // namespace onecard::engine
