// The HF FP8 checkpoints of tests/golden/hf_fp8/ (made by
// make_hf_fp8_goldens.py in the layouts compressed-tensors, transformers'
// fp8 and fbgemm_fp8 publish; expected values from ml_dtypes' float8_e4m3fn
// decode times the stored scale) read through ResolveTensor, Fp8FormOf,
// ReadTensorFp8 and ReadTensorF32 (hf_fp8.h, layer_tensors.h):
// - every FP8 projection's codes are the stored bytes, its scale kind the
//   config's (per tensor and per channel: kRow; 128 x 128 blocks, partial
//   ones at the edges: kBlock128), and Fp8Matrix::Value equals the golden
//   dequantization bit for bit, as does ReadTensorF32;
// - projections the config's ignore list names stay F16 and read as such;
// - the configs parsed from the folders (method, scheme, activations);
// - LoadWeightsF32 loads every folder.
#include "engine/model/hf_fp8.h"

#include <cstring>

#include "engine/model/dequantize.h"
#include "engine/model/layer_tensors.h"
#include "engine/model/model_weights.h"
#include "engine/model/safetensors.h"
#include "gtest/gtest.h"
#include "tests/testing/all_close.h"

namespace onecard::engine {
namespace {

using ::onecard::testing::SourcePath;

struct Variant {
  const char* dir;  // under tests/golden/hf_fp8/
  HfQuantMethod method;
  Fp8WeightScales weights;
  Fp8Activations activations;
  Fp8Scales kind;
  const char* scale_field;
  std::vector<TensorPart> unquantized;  // on the config's ignore list
};

void PrintTo(const Variant& v, std::ostream* os) { *os << v.dir; }

const Variant kVariants[] = {
    {"ct_channel",
     HfQuantMethod::kCompressedTensors,
     Fp8WeightScales::kChannel,
     Fp8Activations::kDynamicToken,
     Fp8Scales::kRow,
     "weight_scale",
     {TensorPart::kDown}},
    {"ct_tensor",
     HfQuantMethod::kCompressedTensors,
     Fp8WeightScales::kTensor,
     Fp8Activations::kStaticTensor,
     Fp8Scales::kRow,
     "weight_scale",
     {}},
    {"fp8_block",
     HfQuantMethod::kFp8,
     Fp8WeightScales::kBlock128,
     Fp8Activations::kDynamicGroup128,
     Fp8Scales::kBlock128,
     "weight_scale_inv",
     {TensorPart::kGate}},
    {"fbgemm",
     HfQuantMethod::kFbgemmFp8,
     Fp8WeightScales::kChannel,
     Fp8Activations::kDynamicToken,
     Fp8Scales::kRow,
     "weight_scale",
     {}},
};

constexpr TensorPart kProjections[] = {TensorPart::kQ,   TensorPart::kK,    TensorPart::kV,
                                       TensorPart::kO,   TensorPart::kGate, TensorPart::kUp,
                                       TensorPart::kDown};

std::string Folder(const char* dir) {
  return SourcePath(std::string("tests/golden/hf_fp8/") + dir);
}

class HfFp8GoldenTest : public ::testing::TestWithParam<Variant> {
 protected:
  void SetUp() override {
    auto ckpt = OpenCheckpoint(Folder(GetParam().dir));
    ASSERT_TRUE(ckpt.ok()) << ckpt.status();
    ckpt_ = std::move(*ckpt);
    auto golden = SafetensorsSource::OpenFile(Folder(GetParam().dir) + "/dequantized.safetensors");
    ASSERT_TRUE(golden.ok()) << golden.status();
    golden_ = std::move(*golden);
  }
  bool Unquantized(TensorPart part) const {
    for (TensorPart p : GetParam().unquantized) {
      if (p == part) return true;
    }
    return false;
  }
  Checkpoint ckpt_;
  std::unique_ptr<SafetensorsSource> golden_;
};

TEST_P(HfFp8GoldenTest, ConfigIsTheFoldersScheme) {
  EXPECT_EQ(ckpt_.quant.method, GetParam().method);
  EXPECT_TRUE(ckpt_.quant.Ignores("lm_head"));
  const std::optional<Fp8Scheme> q = ckpt_.quant.Fp8SchemeFor("model.layers.0.self_attn.q_proj");
  ASSERT_TRUE(q.has_value());
  EXPECT_EQ(q->weights, GetParam().weights);
  EXPECT_EQ(q->activations, GetParam().activations);
  EXPECT_FALSE(ckpt_.quant.Fp8SchemeFor("lm_head").has_value());
}

TEST_P(HfFp8GoldenTest, ValueIsTheGoldenDequantization) {
  int quantized = 0;
  for (TensorPart part : kProjections) {
    auto t = ResolveTensor(ckpt_, part, 0);
    ASSERT_TRUE(t.ok()) << t.status();
    auto f32 = ReadTensorF32(*t);
    ASSERT_TRUE(f32.ok()) << f32.status();
    if (Unquantized(part)) {
      EXPECT_FALSE(t->hf_fp8.has_value()) << t->name;
      EXPECT_FALSE(Fp8FormOf(*t).has_value()) << t->name;
      EXPECT_EQ(t->view->dtype, DType::kF16) << t->name;
      EXPECT_FALSE(ReadTensorFp8(*t).ok()) << t->name;
      auto want = DequantizeToF32(*t->view);
      ASSERT_TRUE(want.ok()) << want.status();
      EXPECT_EQ(*f32, *want) << t->name;
      continue;
    }
    ++quantized;
    ASSERT_TRUE(t->hf_fp8.has_value()) << t->name;
    EXPECT_EQ(t->view->dtype, DType::kF8E4M3) << t->name;
    EXPECT_STREQ(t->hf_fp8->scale_field, GetParam().scale_field);
    ASSERT_EQ(Fp8FormOf(*t), GetParam().kind) << t->name;
    auto m = ReadTensorFp8(*t);
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_EQ(m->scales_kind, GetParam().kind);
    EXPECT_EQ(m->n, t->shape[0]);
    EXPECT_EQ(m->k, t->shape[1]);
    ASSERT_EQ(m->codes.size(), t->view->size_bytes);
    EXPECT_EQ(std::memcmp(m->codes.data(), t->view->data, m->codes.size()), 0) << t->name;
    const TensorView* g = golden_->Find(t->name);
    ASSERT_NE(g, nullptr) << t->name;
    ASSERT_EQ(g->dtype, DType::kF32);
    ASSERT_EQ(g->shape, t->shape);
    std::vector<float> want(g->NumElements());
    std::memcpy(want.data(), g->data, want.size() * sizeof(float));
    int64_t mismatches = 0;
    for (int64_t r = 0; r < m->n; ++r) {
      for (int64_t c = 0; c < m->k; ++c) {
        if (m->Value(r, c) == want[r * m->k + c]) continue;
        if (mismatches++ == 0) {
          ADD_FAILURE() << t->name << " [" << r << ", " << c << "]: " << m->Value(r, c)
                        << ", golden " << want[r * m->k + c];
        }
      }
    }
    EXPECT_EQ(mismatches, 0) << t->name;
    EXPECT_EQ(*f32, want) << t->name;
  }
  EXPECT_EQ(quantized, 7 - static_cast<int>(GetParam().unquantized.size()));
}

TEST_P(HfFp8GoldenTest, ScalesAreFoundAsTheirModules) {
  auto t = ResolveTensor(ckpt_, TensorPart::kQ, 0);
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_TRUE(t->hf_fp8.has_value());
  EXPECT_EQ(HfFp8ScaleModuleOf(ckpt_, t->hf_fp8->scale->name), t->hf_fp8->module);
  EXPECT_FALSE(HfFp8ScaleModuleOf(ckpt_, t->name).has_value());
  EXPECT_EQ(HfFp8FormatName(ckpt_.quant, t->hf_fp8->module),
            std::string(HfQuantMethodName(GetParam().method)) + " e4m3 " +
                Fp8WeightScalesName(GetParam().weights));
}

TEST_P(HfFp8GoldenTest, LoadWeightsF32LoadsTheFolder) {
  auto w = LoadWeightsF32(ckpt_);
  ASSERT_TRUE(w.ok()) << w.status();
  auto t = ResolveTensor(ckpt_, TensorPart::kUp, 0);
  ASSERT_TRUE(t.ok()) << t.status();
  auto f32 = ReadTensorF32(*t);
  ASSERT_TRUE(f32.ok()) << f32.status();
  EXPECT_EQ(*PartWeights(*w, TensorPart::kUp, 0), *f32);
}

INSTANTIATE_TEST_SUITE_P(Checkpoints, HfFp8GoldenTest, ::testing::ValuesIn(kVariants),
                         [](const ::testing::TestParamInfo<Variant>& info) {
                           return std::string(info.param.dir);
                         });

}  // namespace
}  // namespace onecard::engine
