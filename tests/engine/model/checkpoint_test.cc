// OpenCheckpoint: a .gguf file (also without the extension), an HF folder
// with or without tokenizer files, a synthetic model path, and the errors for
// everything else.
#include "engine/model/checkpoint.h"

#include "engine/model/gguf.h"
#include "engine/model/synthetic_shapes.h"
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

TEST(CheckpointTest, OpensASyntheticModelPath) {
  auto ckpt = OpenCheckpoint("synthetic:llama3-70b:int4-g64");
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  EXPECT_EQ(ckpt->format, CheckpointFormat::kSynthetic);
  EXPECT_EQ(ckpt->path, "synthetic:llama3-70b:int4-g64");
  EXPECT_EQ(ckpt->synthetic_weights, "int4-g64");
  EXPECT_EQ(ckpt->weights, nullptr);
  EXPECT_EQ(ckpt->gguf(), nullptr);
  // Llama-3-70B's published config.json.
  EXPECT_EQ(ckpt->config.hidden_size, 8192);
  EXPECT_EQ(ckpt->config.intermediate_size, 28672);
  EXPECT_EQ(ckpt->config.num_layers, 80);
  EXPECT_EQ(ckpt->config.vocab_size, 128256);

  auto bf16 = OpenCheckpoint("synthetic:qwen2-72b");
  ASSERT_TRUE(bf16.ok()) << bf16.status();
  EXPECT_EQ(bf16->synthetic_weights, "bf16");
  EXPECT_TRUE(bf16->config.attention_bias);
}

TEST(CheckpointTest, RefusesMalformedSyntheticPaths) {
  auto unknown = OpenCheckpoint("synthetic:llama3-9b");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(unknown.status().message(), HasSubstr("llama3-8b, llama3-70b"));
  for (const char* path :
       {"synthetic:", "synthetic:llama3-8b:", "synthetic:llama3-8b:int4:x", "synthetic::int4"}) {
    auto bad = OpenCheckpoint(path);
    EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument) << path;
    EXPECT_THAT(bad.status().message(), HasSubstr(path)) << path;
  }
  EXPECT_FALSE(IsSyntheticModelPath("models/synthetic:llama3-8b"));
  EXPECT_TRUE(IsSyntheticModelPath("synthetic:llama3-8b"));
}

}  // namespace
}  // namespace onecard::engine
