// Tests of CheckCpuConfig and PackCpuWeights (engine/runtime/cpu/cpu_weights.cc):
// the fused matrices hold the source rows in the documented order ([q; k; v],
// [gate; up]), biases are stacked the same way, a tied model keeps one
// embedding, and bad shapes are errors naming the layer and the part.
#include "engine/runtime/cpu/cpu_weights.h"

#include "gtest/gtest.h"
#include "tests/engine/runtime/cpu/tiny_model.h"

namespace onecard::engine {
namespace {

std::vector<float> Concat(std::initializer_list<const std::vector<float>*> parts) {
  std::vector<float> out;
  for (const auto* p : parts) out.insert(out.end(), p->begin(), p->end());
  return out;
}

TEST(PackCpuWeightsTest, FusesInTheDocumentedOrder) {
  for (Architecture arch : {Architecture::kLlama, Architecture::kQwen2}) {
    const ModelConfig config = testing::TinyConfig(arch);
    const ModelWeightsF32 source = testing::RandomWeights(config, 3);
    auto packed = PackCpuWeights(config, source);
    ASSERT_TRUE(packed.ok()) << packed.status();
    for (size_t l = 0; l < source.layers.size(); ++l) {
      const LayerWeightsF32& s = source.layers[l];
      const CpuLayerWeights& p = packed->layers[l];
      EXPECT_EQ(p.wqkv, Concat({&s.wq, &s.wk, &s.wv})) << l;
      EXPECT_EQ(p.bqkv, Concat({&s.bq, &s.bk, &s.bv})) << l;
      EXPECT_EQ(p.w_gate_up, Concat({&s.w_gate, &s.w_up})) << l;
      EXPECT_EQ(p.wo, s.wo);
      EXPECT_EQ(p.w_down, s.w_down);
      EXPECT_EQ(p.attn_norm, s.attn_norm);
      EXPECT_EQ(p.ffn_norm, s.ffn_norm);
    }
    EXPECT_EQ(packed->output_weight(), source.output_weight());
    EXPECT_EQ(packed->lm_head.empty(), config.tie_word_embeddings);
  }
}

TEST(PackCpuWeightsTest, ShapeErrorsNameThePart) {
  const ModelConfig config = testing::TinyConfig(Architecture::kQwen2);
  ModelWeightsF32 w = testing::RandomWeights(config, 4);
  w.layers[2].bk.clear();  // a Qwen2 model needs its k bias
  auto packed = PackCpuWeights(config, w);
  EXPECT_EQ(packed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(packed.status().message().find("layer 2 bk has 0 elements"), std::string::npos)
      << packed.status();
  w = testing::RandomWeights(config, 4);
  w.embedding.resize(10);
  EXPECT_NE(PackCpuWeights(config, w).status().message().find("embedding"), std::string::npos);
  w = testing::RandomWeights(config, 4);
  w.layers.pop_back();
  EXPECT_NE(PackCpuWeights(config, w).status().message().find("2 layers"), std::string::npos);
}

TEST(CheckCpuConfigTest, NamesTheField) {
  ModelConfig c = testing::TinyConfig(Architecture::kLlama);
  EXPECT_TRUE(CheckCpuConfig(c).ok());
  c.head_dim = 15;
  EXPECT_NE(CheckCpuConfig(c).message().find("head_dim"), std::string::npos);
  c = testing::TinyConfig(Architecture::kLlama);
  c.vocab_size = 0;
  EXPECT_NE(CheckCpuConfig(c).message().find("vocab_size = 0"), std::string::npos);
  c = testing::TinyConfig(Architecture::kLlama);
  c.rms_norm_eps = 0.0f;
  EXPECT_NE(CheckCpuConfig(c).message().find("rms_norm_eps"), std::string::npos);
}

}  // namespace
}  // namespace onecard::engine
