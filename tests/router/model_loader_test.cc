// Tests router/model_loader.h on the real SmolLM2 GGUF: the spec read from
// its metadata (values from the HF config: context 8192, vocab 49152, eos 2),
// ChatML chosen, the name default, and an error naming a missing path.
#include "router/model_loader.h"

#include <filesystem>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace onecard::router {
namespace {

constexpr char kModel[] = "models/SmolLM2-135M-Instruct.Q4_1.gguf";

TEST(ModelLoaderTest, ReadsSmolLM2WithoutWeights) {
  absl::StatusOr<RoutingModel> m = LoadRoutingModel(kModel, "");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->spec.name, "SmolLM2-135M-Instruct.Q4_1");
  EXPECT_EQ(m->spec.architecture, "llama");
  EXPECT_EQ(m->spec.context_length, 8192);
  EXPECT_EQ(m->spec.vocab_size, 49152);
  EXPECT_EQ(m->spec.eos_token_id, 2);
  EXPECT_EQ(m->chat_template.kind(), engine::ChatTemplateKind::kChatML);
  EXPECT_EQ(LoadRoutingModel(kModel, "smol")->spec.name, "smol");
}

// A folder with only config.json and the tokenizer files of tiny_llama
// (tests/golden/tiny_llama; its config.json says context 512, vocab 1005)
// serves the router as the whole checkpoint does.
TEST(ModelLoaderTest, ReadsATokenizerOnlyFolder) {
  const std::string dir = ::testing::TempDir() + "/router_tokenizer_only";
  std::filesystem::create_directories(dir);
  for (const char* file : {"config.json", "tokenizer.json", "tokenizer_config.json"}) {
    std::filesystem::copy_file(std::string("tests/golden/tiny_llama/") + file, dir + "/" + file,
                               std::filesystem::copy_options::overwrite_existing);
  }
  absl::StatusOr<RoutingModel> m = LoadRoutingModel(dir, "tiny");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->spec.context_length, 512);
  EXPECT_EQ(m->spec.vocab_size, 1005);
  absl::StatusOr<RoutingModel> whole = LoadRoutingModel("tests/golden/tiny_llama", "tiny");
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(m->spec.eos_token_id, whole->spec.eos_token_id);
  EXPECT_EQ(m->chat_template.kind(), whole->chat_template.kind());
  EXPECT_EQ(m->tokenizer->Encode("Hello world", false),
            whole->tokenizer->Encode("Hello world", false));
  std::filesystem::remove_all(dir);
}

// A synthetic model: Llama-3-8B's published config, the synthetic
// tokenizer (engine/tokenizer/synthetic_tokenizer.h) and ChatML.
TEST(ModelLoaderTest, ReadsASyntheticModel) {
  absl::StatusOr<RoutingModel> m = LoadRoutingModel("synthetic:llama3-8b", "");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->spec.name, "synthetic:llama3-8b");
  EXPECT_EQ(m->spec.architecture, "llama");
  EXPECT_EQ(m->spec.context_length, 8192);
  EXPECT_EQ(m->spec.vocab_size, 128256);
  EXPECT_EQ(m->spec.eos_token_id, 128001);
  EXPECT_EQ(m->chat_template.kind(), engine::ChatTemplateKind::kChatML);
  EXPECT_EQ(m->tokenizer->Encode("ab", false), (std::vector<int32_t>{97, 98}));
  EXPECT_FALSE(LoadRoutingModel("synthetic:nope", "").ok());
}

TEST(ModelLoaderTest, MissingFileNamesThePath) {
  absl::StatusOr<RoutingModel> m = LoadRoutingModel("models/nope.gguf", "");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("models/nope.gguf"), std::string::npos) << m.status();
}

TEST(ModelLoaderTest, NameFromPath) {
  EXPECT_EQ(ModelNameFromPath("a/b/Model.Q4_1.gguf"), "Model.Q4_1");
  EXPECT_EQ(ModelNameFromPath("a/b/hf-dir/"), "hf-dir");
  EXPECT_EQ(ModelNameFromPath("hf-dir"), "hf-dir");
}

}  // namespace
}  // namespace onecard::router
