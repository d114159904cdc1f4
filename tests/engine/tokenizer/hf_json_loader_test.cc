// Tests of Tokenizer::FromHfJson: broken or unsupported tokenizer.json and
// tokenizer_config.json files give errors naming the file and field (made by
// editing the golden tiny_qwen2 files); SmolLM2 with the hub's
// Digits + ByteLevel pre-tokenizer gives HF's golden ids (the golden script
// checked HF gives the same ids for both pre-tokenizers).
#include <nlohmann/json.hpp>

#include "engine/tokenizer/tokenizer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/tokenizer/golden_reader.h"

namespace onecard::engine {
namespace {

using json = nlohmann::json;
using ::onecard::engine::testing::GoldenDir;
using ::onecard::engine::testing::ReadFileOrDie;
using ::onecard::engine::testing::ReadGolden;
using ::onecard::engine::testing::WriteTempFile;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

json TinyQwen2() { return json::parse(ReadFileOrDie(GoldenDir("tiny_qwen2") + "/tokenizer.json")); }

// Loads `doc` written to a temp file; returns the error message ("" if ok).
std::string LoadError(const json& doc, const std::string& config = "") {
  const std::string path = WriteTempFile("tokenizer.json", doc.dump());
  const std::string config_path = config.empty() ? "" : WriteTempFile("config.json", config);
  auto tok = Tokenizer::FromHfJson(path, config_path);
  if (tok.ok()) return "";
  EXPECT_THAT(tok.status().message(), HasSubstr(config.empty() ? path : config_path));
  return std::string(tok.status().message());
}

TEST(FromHfJsonTest, UnreadableFiles) {
  auto missing = Tokenizer::FromHfJson("no/such/tokenizer.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("no/such/tokenizer.json"));
  const std::string garbage = WriteTempFile("garbage.json", "{\"model\": [1, 2");
  auto bad = Tokenizer::FromHfJson(garbage);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("not valid JSON"));
  EXPECT_THAT(LoadError(json::array()), HasSubstr("top level is not an object"));
}

TEST(FromHfJsonTest, MissingOrBrokenModelFields) {
  json doc = TinyQwen2();
  EXPECT_EQ(LoadError(doc), "");
  json d = doc;
  d.erase("model");
  EXPECT_THAT(LoadError(d), HasSubstr(": model: missing"));
  d = doc;
  d["model"].erase("vocab");
  EXPECT_THAT(LoadError(d), HasSubstr(": model.vocab: missing"));
  d = doc;
  d["model"]["vocab"]["xyz"] = "seven";
  EXPECT_THAT(LoadError(d), HasSubstr("model.vocab[\"xyz\"]"));
  d = doc;
  d["model"].erase("merges");
  EXPECT_THAT(LoadError(d), HasSubstr(": model.merges: missing"));
  d = doc;
  d["model"]["merges"][3] = "abc";
  EXPECT_THAT(LoadError(d), HasSubstr("model.merges[3]"));
  d = doc;
  d["model"]["merges"][5] = json::array({"zzz", "qqq"});
  EXPECT_THAT(LoadError(d), HasSubstr("model.merges[5]"));
  d = doc;
  d["model"]["type"] = "WordPiece";
  EXPECT_THAT(LoadError(d), HasSubstr("model.type"));
}

// transformers' conversion of a GGUF tokenizer sets byte_fallback on a
// byte-level BPE: a no-op where no byte missing from the vocabulary has a
// "<0xXX>" token (SmolLM2's has none; its byte 0x04 has no symbol either, and
// both ways drop it), refused where one has (onecard would drop it, HF emit it).
TEST(FromHfJsonTest, ByteFallbackLoadsWhereItChangesNothing) {
  const std::string dir = GoldenDir("smollm2");
  json doc = json::parse(ReadFileOrDie(dir + "/tokenizer.json"));
  doc["model"]["byte_fallback"] = true;
  const std::string path = WriteTempFile("tokenizer.json", doc.dump());
  auto with = Tokenizer::FromHfJson(path);
  ASSERT_TRUE(with.ok()) << with.status();
  auto without = Tokenizer::FromHfJson(dir + "/tokenizer.json");
  ASSERT_TRUE(without.ok()) << without.status();
  const std::string text = "byte\x04 fallback \xF0\x9F\x98\x80 caf\xC3\xA9 \xFF\xFE";
  EXPECT_EQ((*with)->Encode(text, false), (*without)->Encode(text, false));
  doc["model"]["vocab"]["<0x04>"] = 49152;
  EXPECT_THAT(LoadError(doc), HasSubstr("model.byte_fallback: true, and byte <0x04> has a "
                                        "fallback token"));
}

TEST(FromHfJsonTest, UnsupportedPipelineStagesNameTheField) {
  json doc = TinyQwen2();
  json d = doc;
  d["pre_tokenizer"] = {{"type", "Whitespace"}};
  EXPECT_THAT(LoadError(d), HasSubstr(": pre_tokenizer: unsupported [Whitespace]"));
  d = doc;
  d["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "[a-z]+";
  EXPECT_THAT(LoadError(d), HasSubstr("pre_tokenizer.pretokenizers[0].pattern.Regex"));
  d = doc;
  d["normalizer"] = {{"type", "NFKC"}};
  EXPECT_THAT(LoadError(d), HasSubstr(": normalizer: type \"NFKC\""));
  d = doc;
  d["decoder"] = {{"type", "Metaspace"}};
  EXPECT_THAT(LoadError(d), HasSubstr(": decoder.type"));
  d = doc;
  d["added_tokens"][1].erase("content");
  EXPECT_THAT(LoadError(d), HasSubstr("added_tokens[1].content"));
  d = doc;
  d["added_tokens"][0]["id"] = -4;
  EXPECT_THAT(LoadError(d), HasSubstr("added_tokens[0].id"));
}

TEST(FromHfJsonTest, BadTokenizerConfig) {
  const json doc = TinyQwen2();
  EXPECT_THAT(LoadError(doc, "[]"), HasSubstr("top level is not an object"));
  EXPECT_THAT(LoadError(doc, R"({"eos_token": "<|nope|>"})"), HasSubstr("eos_token"));
  EXPECT_THAT(LoadError(doc, R"({"bos_token": 5})"), HasSubstr("bos_token"));
  auto missing = Tokenizer::FromHfJson(GoldenDir("tiny_qwen2") + "/tokenizer.json",
                                       "no/such/tokenizer_config.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("no/such/tokenizer_config.json"));
}

TEST(FromHfJsonTest, SmolLm2WithTheHubDigitsPreTokenizerGivesHfIds) {
  json doc = json::parse(ReadFileOrDie(GoldenDir("smollm2") + "/tokenizer.json"));
  doc["pre_tokenizer"] = json::parse(R"({"type": "Sequence", "pretokenizers": [
      {"type": "Digits", "individual_digits": true},
      {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true,
       "use_regex": true}]})");
  const std::string path = WriteTempFile("smollm2_digits.json", doc.dump());
  auto tok = Tokenizer::FromHfJson(path, GoldenDir("smollm2") + "/tokenizer_config.json");
  ASSERT_TRUE(tok.ok()) << tok.status();
  auto golden = ReadGolden("smollm2");
  ASSERT_TRUE(golden.ok());
  for (const auto& c : golden->cases) {
    EXPECT_THAT((*tok)->Encode(c.text, false), ElementsAreArray(c.ids)) << c.text;
  }
  EXPECT_EQ((*tok)->chat_template().substr(0, 26), "{% for message in messages");
}

}  // namespace
}  // namespace onecard::engine
