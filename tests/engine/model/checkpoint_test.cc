// OpenCheckpoint: a .gguf file (also without the extension), an HF folder
// with or without tokenizer files, and the errors for everything else.
#include "engine/model/checkpoint.h"

#include "engine/model/gguf.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/model/tiny_model.h"

namespace onecard::engine {
namespace {

using namespace ::onecard::testing;  // NOLINT: tiny models and scratch folders
using ::testing::HasSubstr;

TEST(CheckpointTest, OpensAGgufFile) {
  ScratchDir dir;
  TinyModel model = MakeTinyModel(TinySpec{});
  std::string path = dir.Write("tiny.gguf", TinyGgufWriter(model).Build().bytes);
  auto ckpt = OpenCheckpoint(path);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  EXPECT_EQ(ckpt->format, CheckpointFormat::kGguf);
  EXPECT_EQ(ckpt->path, path);
  ASSERT_NE(ckpt->gguf(), nullptr);
  EXPECT_EQ(ckpt->gguf()->GetString("general.architecture").value(), "llama");
  EXPECT_EQ(ckpt->config.num_layers, 2);
  EXPECT_NE(ckpt->weights->Find("token_embd.weight"), nullptr);
  EXPECT_TRUE(ckpt->tokenizer_json_path.empty());
}

TEST(CheckpointTest, RecognisesGgufByItsMagic) {
  ScratchDir dir;
  std::string path = dir.Write("model.bin", TinyGgufWriter(MakeTinyModel({})).Build().bytes);
  auto ckpt = OpenCheckpoint(path);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  EXPECT_EQ(ckpt->format, CheckpointFormat::kGguf);
}

TEST(CheckpointTest, OpensAnHfFolder) {
  ScratchDir dir;
  TinySpec spec;
  spec.arch = "qwen2";
  std::string folder = WriteTinyHfFolder(MakeTinyModel(spec), dir, "hf");
  dir.Write("hf/tokenizer.json", "{}");
  auto ckpt = OpenCheckpoint(folder + "/");
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  EXPECT_EQ(ckpt->format, CheckpointFormat::kSafetensors);
  EXPECT_EQ(ckpt->path, folder);
  EXPECT_EQ(ckpt->gguf(), nullptr);
  EXPECT_EQ(ckpt->config.architecture, Architecture::kQwen2);
  EXPECT_EQ(ckpt->config.name, "hf");
  EXPECT_EQ(ckpt->tokenizer_json_path, folder + "/tokenizer.json");
  EXPECT_TRUE(ckpt->tokenizer_config_path.empty());
  EXPECT_NE(ckpt->weights->Find("model.embed_tokens.weight"), nullptr);
}

TEST(CheckpointTest, Errors) {
  EXPECT_EQ(OpenCheckpoint("/nonexistent/m.gguf").status().code(), absl::StatusCode::kNotFound);
  ScratchDir dir;
  auto empty = OpenCheckpoint(dir.path());
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(empty.status().message()), HasSubstr("folder without config.json"));
  auto text = OpenCheckpoint(dir.Write("notes.txt", "hello"));
  EXPECT_EQ(text.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(text.status().message()), HasSubstr("notes.txt: not a .gguf file"));
  auto garbage = OpenCheckpoint(dir.Write("bad.gguf", "GGML and more"));
  EXPECT_THAT(std::string(garbage.status().message()), HasSubstr("bad magic"));
  WriteTinyHfFolder(MakeTinyModel({}), dir, "noweights");
  std::remove((dir.path() + "/noweights/model.safetensors").c_str());
  auto noweights = OpenCheckpoint(dir.path() + "/noweights");
  EXPECT_EQ(noweights.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(noweights.status().message()), HasSubstr("model.safetensors"));
  dir.Write("badconfig/config.json", R"({"architectures": ["BertModel"]})");
  EXPECT_THAT(std::string(OpenCheckpoint(dir.path() + "/badconfig").status().message()),
              HasSubstr("config.json: field 'architectures'"));
}

}  // namespace
}  // namespace onecard::engine
