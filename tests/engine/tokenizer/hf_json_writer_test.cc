// HfTokenizerJson on hand-made specs (a byte-level vocabulary of the 256
// bytes plus merges and added tokens): for each pre-tokenizer kind and
// normalizer, the written tokenizer.json reads back (Tokenizer::FromHfJson)
// as a tokenizer that encodes and decodes like the spec's own, with the
// same kind, special tokens and bos / eos; the post-processor adds bos / eos
// when the spec does; errors name the file. The real files (SmolLM2,
// Qwen2.5-Coder) against Hugging Face: tests/tools/onecard/quantize_gguf_test.cc.
#include "engine/tokenizer/hf_json_writer.h"

#include <filesystem>
#include <fstream>

#include "engine/tokenizer/byte_level.h"
#include "engine/tokenizer/hf_json_config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace onecard::engine {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

BpeTokenizerSpec ByteSpec(PreTokenizerKind kind) {
  BpeTokenizerSpec spec;
  spec.source = "spec.gguf";
  for (int b = 0; b < 256; ++b) {
    spec.tokens.push_back(BytesToByteLevel(std::string(1, static_cast<char>(b))));
  }
  const auto merge = [&](const std::string& a, const std::string& b) {
    spec.merges.emplace_back(BytesToByteLevel(a), BytesToByteLevel(b));
    spec.tokens.push_back(BytesToByteLevel(a + b));
  };
  merge("t", "h");
  merge("th", "e");
  merge(" ", "the");
  merge("1", "2");
  merge("'", "s");
  spec.tokens.push_back("<|end|>");
  spec.tokens.push_back("<|begin|>");
  const int32_t end = static_cast<int32_t>(spec.tokens.size()) - 2;
  spec.added_tokens.push_back({.id = end, .content = "<|end|>", .special = true});
  spec.added_tokens.push_back({.id = end + 1, .content = "<|begin|>", .special = true});
  spec.eos_id = end;
  spec.bos_id = end + 1;
  spec.pre_tokenizer = kind;
  spec.chat_template = "{% for m in messages %}{{ m.content }}<|end|>{% endfor %}";
  return spec;
}

class HfJsonWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::create_directories(dir_);
  }
  // Writes the spec's files and reads them back.
  absl::StatusOr<std::unique_ptr<Tokenizer>> RoundTrip(const BpeTokenizerSpec& spec,
                                                       HfTokenizerFiles* files) {
    absl::StatusOr<HfTokenizerFiles> written = HfTokenizerJson(spec, 4096);
    if (!written.ok()) return written.status();
    *files = *written;
    std::ofstream(dir_ / "tokenizer.json") << files->tokenizer_json;
    std::ofstream(dir_ / "tokenizer_config.json") << files->tokenizer_config_json;
    return Tokenizer::FromHfJson((dir_ / "tokenizer.json").string(),
                                 (dir_ / "tokenizer_config.json").string());
  }
  std::filesystem::path dir_;
};

TEST_F(HfJsonWriterTest, EveryKindReadsBackAsTheSameTokenizer) {
  const std::string texts[] = {"the theme's 12345 <|end|> x\n\n  the",
                               "It's 2024:\tthe end<|begin|>!", "  \r\n\xc3\xa9t\xc3\xa9 12"};
  for (PreTokenizerKind kind : {PreTokenizerKind::kGpt2, PreTokenizerKind::kLlama3,
                                PreTokenizerKind::kQwen2, PreTokenizerKind::kSmolLM}) {
    SCOPED_TRACE(PreTokenizerKindName(kind));
    for (bool add_bos : {false, true}) {
      BpeTokenizerSpec spec = ByteSpec(kind);
      spec.add_bos = add_bos;
      absl::StatusOr<std::unique_ptr<Tokenizer>> want = CreateBpeTokenizer(spec);
      ASSERT_TRUE(want.ok()) << want.status();
      HfTokenizerFiles files;
      absl::StatusOr<std::unique_ptr<Tokenizer>> got = RoundTrip(spec, &files);
      ASSERT_TRUE(got.ok()) << got.status() << "\n" << files.tokenizer_json.substr(0, 2000);
      const nlohmann::json doc = nlohmann::json::parse(files.tokenizer_json);
      absl::StatusOr<PreTokenizerKind> read = PreTokenizerKindFromHfJson("t.json", doc);
      ASSERT_TRUE(read.ok()) << read.status();
      EXPECT_EQ(*read, kind);
      EXPECT_EQ(static_cast<const BpeTokenizer&>(**got).pre_tokenizer_kind(), kind);
      for (const std::string& text : texts) {
        for (bool special : {false, true}) {
          const std::vector<int32_t> ids = (*want)->Encode(text, special);
          EXPECT_THAT((*got)->Encode(text, special), ElementsAreArray(ids)) << text;
          EXPECT_EQ((*got)->Decode(ids, false), (*want)->Decode(ids, false));
          EXPECT_EQ((*got)->Decode(ids, true), (*want)->Decode(ids, true));
        }
      }
      EXPECT_EQ((*got)->Encode("the", true).front() == spec.bos_id, add_bos);
      EXPECT_EQ((*got)->bos_id(), spec.bos_id);
      EXPECT_EQ((*got)->eos_id(), spec.eos_id);
      EXPECT_EQ((*got)->vocab_size(), (*want)->vocab_size());
      EXPECT_EQ((*got)->chat_template(), spec.chat_template);
      for (int32_t id = 0; id < (*want)->vocab_size(); ++id) {
        EXPECT_EQ((*got)->IsSpecial(id), (*want)->IsSpecial(id)) << id;
      }
    }
  }
}

TEST_F(HfJsonWriterTest, NfcNormalizerIsWritten) {
  BpeTokenizerSpec spec = ByteSpec(PreTokenizerKind::kQwen2);
  spec.normalizer = NormalizerKind::kNfc;
  absl::StatusOr<HfTokenizerFiles> files = HfTokenizerJson(spec, 4096);
  ASSERT_TRUE(files.ok()) << files.status();
  const nlohmann::json doc = nlohmann::json::parse(files->tokenizer_json);
  EXPECT_EQ(doc["normalizer"]["type"], "NFC");
  const nlohmann::json config = nlohmann::json::parse(files->tokenizer_config_json);
  EXPECT_EQ(config["model_max_length"], 4096);
  EXPECT_EQ(config["eos_token"], "<|end|>");
  EXPECT_EQ(config["bos_token"], "<|begin|>");
}

TEST_F(HfJsonWriterTest, ErrorsNameTheFile) {
  BpeTokenizerSpec spec = ByteSpec(PreTokenizerKind::kGpt2);
  spec.tokens.push_back(spec.tokens[300 - 256]);  // a second id for one text
  absl::StatusOr<HfTokenizerFiles> files = HfTokenizerJson(spec, 4096);
  EXPECT_EQ(files.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(files.status().message(), HasSubstr("spec.gguf: tokens 44 and "));
  spec = ByteSpec(PreTokenizerKind::kGpt2);
  spec.tokens.push_back("\xff");  // not UTF-8
  files = HfTokenizerJson(spec, 4096);
  EXPECT_THAT(files.status().message(), HasSubstr("is not valid UTF-8"));
  spec = ByteSpec(PreTokenizerKind::kGpt2);
  spec.eos_id = 100000;
  files = HfTokenizerJson(spec, 4096);
  EXPECT_THAT(files.status().message(), HasSubstr("eos id 100000"));
}

}  // namespace
}  // namespace onecard::engine
