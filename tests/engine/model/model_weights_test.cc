// LoadWeightsF32 on tiny seeded checkpoints: GGUF llama (Q/K rows permuted
// by llama.cpp's converter formula, which the loader must undo), GGUF qwen2
// (biases, not permuted), HF folders of both, tied embeddings; missing tensors
// and wrong shapes give errors naming the tensor. The real model is checked
// against transformers in model_weights_smollm2_test.cc.
#include "engine/model/model_weights.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/model/tiny_model.h"

namespace onecard::engine {
namespace {

using ::onecard::testing::LoadedTensor;
using ::onecard::testing::MakeTinyModel;
using ::onecard::testing::ScratchDir;
using ::onecard::testing::TinyModel;
using ::onecard::testing::TinySpec;
using ::testing::HasSubstr;

// Every HF tensor equals the loaded one exactly (fp32 in, fp32 out).
void ExpectSameWeights(const TinyModel& model, const ModelWeightsF32& w) {
  ASSERT_EQ(static_cast<int64_t>(w.layers.size()), model.spec.layers);
  for (const auto& [name, tensor] : model.hf) {
    SCOPED_TRACE(name);
    const std::vector<float>* loaded = LoadedTensor(w, name);
    ASSERT_NE(loaded, nullptr);
    EXPECT_EQ(*loaded, tensor.values);
  }
  EXPECT_EQ(w.lm_head.empty(), model.spec.tied);
  bool biases = model.spec.arch == "qwen2";
  EXPECT_EQ(w.layers[0].bq.empty(), !biases);
}

absl::StatusOr<Checkpoint> OpenGguf(const TinyModel& model, const ScratchDir& dir,
                                    const std::string& skip = "") {
  std::string path = dir.Write("tiny.gguf", TinyGgufWriter(model, skip).Build().bytes);
  return OpenCheckpoint(path);
}

}  // namespace
}  // namespace onecard::engine

namespace onecard::testing {
void PrintTo(const TinySpec& s, std::ostream* os) {
  *os << s.arch << (s.tied ? " tied " : " ") << s.heads << " heads, " << s.kv_heads << " kv";
}
}  // namespace onecard::testing

namespace onecard::engine {
namespace {

class ModelWeightsTest : public ::testing::TestWithParam<TinySpec> {};

TEST_P(ModelWeightsTest, GgufLoadsTheHfWeights) {
  TinyModel model = MakeTinyModel(GetParam());
  ScratchDir dir;
  auto checkpoint = OpenGguf(model, dir);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  auto weights = LoadWeightsF32(*checkpoint);
  ASSERT_TRUE(weights.ok()) << weights.status();
  ExpectSameWeights(model, *weights);
}

TEST_P(ModelWeightsTest, HfFolderLoadsTheHfWeights) {
  TinyModel model = MakeTinyModel(GetParam());
  ScratchDir dir;
  auto checkpoint = OpenCheckpoint(WriteTinyHfFolder(model, dir, "hf"));
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  auto weights = LoadWeightsF32(*checkpoint);
  ASSERT_TRUE(weights.ok()) << weights.status();
  ExpectSameWeights(model, *weights);
}

TinySpec Spec(std::string arch, bool tied, int64_t heads, int64_t kv_heads) {
  TinySpec s;
  s.arch = std::move(arch);
  s.tied = tied;
  s.heads = heads;
  s.kv_heads = kv_heads;
  s.hidden = heads * 8;
  s.seed = static_cast<uint32_t>(heads * 10 + kv_heads + (tied ? 100 : 0));
  return s;
}

INSTANTIATE_TEST_SUITE_P(Architectures, ModelWeightsTest,
                         ::testing::Values(Spec("llama", false, 4, 2), Spec("llama", true, 3, 1),
                                           Spec("llama", false, 2, 2), Spec("qwen2", false, 4, 2),
                                           Spec("qwen2", true, 6, 3)),
                         [](const ::testing::TestParamInfo<TinySpec>& info) {
                           const TinySpec& s = info.param;
                           return absl::StrCat(s.arch, s.tied ? "_tied_" : "_", s.heads, "h",
                                               s.kv_heads, "kv");
                         });

TEST(ModelWeightsErrorsTest, PermutationIsNotTheIdentity) {
  // Guards the test above: the converter's permutation really moves rows.
  TinyModel model = MakeTinyModel(Spec("llama", false, 4, 2));
  const auto& wq = model.hf["model.layers.0.self_attn.q_proj.weight"];
  EXPECT_NE(::onecard::testing::LlamaCppPermute(wq.values, wq.shape[0], 4), wq.values);
}

TEST(ModelWeightsErrorsTest, MissingTensorIsNamed) {
  TinyModel model = MakeTinyModel(Spec("llama", false, 4, 2));
  ScratchDir dir;
  auto checkpoint = OpenGguf(model, dir, "blk.1.ffn_up.weight");
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  auto weights = LoadWeightsF32(*checkpoint);
  ASSERT_FALSE(weights.ok());
  EXPECT_EQ(weights.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(weights.status().message()),
              HasSubstr(dir.path() + "/tiny.gguf: tensor 'blk.1.ffn_up.weight' not found"));
}

TEST(ModelWeightsErrorsTest, MissingHfTensorIsNamed) {
  TinyModel model = MakeTinyModel(Spec("qwen2", false, 4, 2));
  model.hf.erase("model.layers.0.self_attn.v_proj.bias");
  ScratchDir dir;
  auto checkpoint = OpenCheckpoint(WriteTinyHfFolder(model, dir, "hf"));
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  EXPECT_THAT(std::string(LoadWeightsF32(*checkpoint).status().message()),
              HasSubstr("tensor 'model.layers.0.self_attn.v_proj.bias' not found"));
}

TEST(ModelWeightsErrorsTest, WrongShapeNamesTensorAndShapes) {
  TinyModel model = MakeTinyModel(Spec("llama", false, 4, 2));
  auto& up = model.hf["model.layers.1.mlp.up_proj.weight"];
  up.shape = {up.shape[1], up.shape[0]};  // transposed
  ScratchDir dir;
  auto checkpoint = OpenGguf(model, dir);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  auto weights = LoadWeightsF32(*checkpoint);
  EXPECT_EQ(weights.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(weights.status().message()),
              HasSubstr("tensor 'blk.1.ffn_up.weight' has shape [32, 24], expected [24, 32]"));
}

TEST(ModelWeightsErrorsTest, UntiedHfCheckpointNeedsLmHead) {
  TinyModel model = MakeTinyModel(Spec("llama", false, 4, 2));
  model.hf.erase("lm_head.weight");
  ScratchDir dir;
  auto checkpoint = OpenCheckpoint(WriteTinyHfFolder(model, dir, "hf"));
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  EXPECT_THAT(std::string(LoadWeightsF32(*checkpoint).status().message()),
              HasSubstr("tensor 'lm_head.weight' not found"));
}

}  // namespace
}  // namespace onecard::engine
