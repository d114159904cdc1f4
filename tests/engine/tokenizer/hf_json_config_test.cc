// Tests of hf_json_config.h: pre_tokenizer configurations of real models
// (as written in their tokenizer.json files) map to kinds, and everything
// else fails naming the field; post_processor and tokenizer_config.json.
#include "engine/tokenizer/hf_json_config.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace onecard::engine {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;

json Doc(const std::string& text) {
  json doc = json::parse(text, nullptr, false);
  EXPECT_FALSE(doc.is_discarded()) << text;
  return doc;
}

std::string SplitThenByteLevel(const std::string& regex_json) {
  return R"({"pre_tokenizer": {"type": "Sequence", "pretokenizers": [
      {"type": "Split", "pattern": {"Regex": )" +
         regex_json +
         R"(}, "behavior": "Isolated", "invert": false},
      {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true,
       "use_regex": false}]}})";
}

// The kind, or -1 (with a test failure) when it is an error.
int Kind(const std::string& text) {
  const auto kind = PreTokenizerKindFromHfJson("t.json", Doc(text));
  EXPECT_TRUE(kind.ok()) << kind.status();
  return kind.ok() ? static_cast<int>(*kind) : -1;
}

int K(PreTokenizerKind kind) { return static_cast<int>(kind); }

TEST(PreTokenizerKindFromHfJsonTest, RealModelConfigurations) {
  // The regexes escaped as in Meta-Llama-3 and Qwen2 tokenizer.json files.
  const std::string llama3 =
      R"("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")";
  const std::string qwen2 =
      R"("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")";
  EXPECT_EQ(Kind(SplitThenByteLevel(llama3)), K(PreTokenizerKind::kLlama3));
  EXPECT_EQ(Kind(SplitThenByteLevel(qwen2)), K(PreTokenizerKind::kQwen2));
  EXPECT_EQ(Kind(R"({"pre_tokenizer": {"type": "ByteLevel",
                  "add_prefix_space": false, "trim_offsets": true, "use_regex": true}})"),
            K(PreTokenizerKind::kGpt2));
  // SmolLM2 (HuggingFaceTB/SmolLM2-*): Digits(individual) + ByteLevel.
  EXPECT_EQ(Kind(R"({"pre_tokenizer": {"type": "Sequence", "pretokenizers": [
                  {"type": "Digits", "individual_digits": true},
                  {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true,
                   "use_regex": true}]}})"),
            K(PreTokenizerKind::kSmolLM));
}

void ExpectError(const std::string& text, const std::string& field) {
  const auto kind = PreTokenizerKindFromHfJson("t.json", Doc(text));
  ASSERT_FALSE(kind.ok()) << text;
  EXPECT_THAT(kind.status().message(), HasSubstr("t.json: " + field)) << kind.status();
}

TEST(PreTokenizerKindFromHfJsonTest, UnsupportedConfigurationsNameTheField) {
  ExpectError(R"({})", "pre_tokenizer");
  ExpectError(R"({"pre_tokenizer": null})", "pre_tokenizer");
  ExpectError(R"({"pre_tokenizer": {"type": "Metaspace", "replacement": "_"}})", "pre_tokenizer");
  ExpectError(R"({"pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": true}})",
              "pre_tokenizer.add_prefix_space");
  ExpectError(SplitThenByteLevel(R"("\\p{N}+|[a-z]+")"),
              "pre_tokenizer.pretokenizers[0].pattern.Regex");
  ExpectError(R"({"pre_tokenizer": {"type": "Sequence", "pretokenizers": [
      {"type": "Digits", "individual_digits": false}, {"type": "ByteLevel"}]}})",
              "pre_tokenizer.pretokenizers[0].individual_digits");
  ExpectError(R"({"pre_tokenizer": {"type": "Sequence", "pretokenizers": 3}})",
              "pre_tokenizer.pretokenizers");
}

BpeTokenizerSpec SpecWithTokens() {
  BpeTokenizerSpec spec;
  spec.tokens = {"a", "b", "<s>", "</s>"};
  spec.added_tokens.push_back(AddedToken{4, "<|begin_of_text|>", true});
  return spec;
}

TEST(ReadPostProcessorTest, TemplateProcessingSetsBosAndEos) {
  BpeTokenizerSpec spec = SpecWithTokens();
  const json doc = Doc(R"({"post_processor": {"type": "Sequence", "processors": [
      {"type": "ByteLevel", "trim_offsets": false},
      {"type": "TemplateProcessing",
       "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}},
                  {"Sequence": {"id": "A", "type_id": 0}},
                  {"SpecialToken": {"id": "</s>", "type_id": 0}}],
       "special_tokens": {"<|begin_of_text|>": {"id": "<|begin_of_text|>", "ids": [4],
                                                "tokens": ["<|begin_of_text|>"]},
                          "</s>": {"id": "</s>", "ids": [3], "tokens": ["</s>"]}}}]}})");
  ASSERT_TRUE(ReadPostProcessor("t.json", doc, &spec).ok());
  EXPECT_TRUE(spec.add_bos);
  EXPECT_EQ(spec.bos_id, 4);
  EXPECT_TRUE(spec.add_eos);
  EXPECT_EQ(spec.eos_id, 3);
}

TEST(ReadPostProcessorTest, UnsupportedProcessorsNameTheField) {
  BpeTokenizerSpec spec = SpecWithTokens();
  const auto s = ReadPostProcessor(
      "t.json", Doc(R"({"post_processor": {"type": "RobertaProcessing"}})"), &spec);
  EXPECT_THAT(s.message(), HasSubstr("t.json: post_processor.type"));
  const auto t = ReadPostProcessor(
      "t.json", Doc(R"({"post_processor": {"type": "TemplateProcessing", "single": [
          {"SpecialToken": {"id": "<x>", "type_id": 0}}], "special_tokens": {}}})"),
      &spec);
  EXPECT_THAT(t.message(), HasSubstr("post_processor.single[0].SpecialToken"));
}

TEST(ApplyTokenizerConfigTest, TokensFlagsAndTemplates) {
  BpeTokenizerSpec spec = SpecWithTokens();
  ASSERT_TRUE(ApplyTokenizerConfig("c.json", Doc(R"({"bos_token": {"content": "<s>"},
      "eos_token": "</s>", "add_bos_token": true,
      "chat_template": [{"name": "tool_use", "template": "T"},
                        {"name": "default", "template": "D"}]})"),
                                   &spec)
                  .ok());
  EXPECT_EQ(spec.bos_id, 2);
  EXPECT_EQ(spec.eos_id, 3);
  EXPECT_TRUE(spec.add_bos);
  EXPECT_EQ(spec.chat_template, "D");
  ASSERT_TRUE(ApplyTokenizerConfig("c.json", Doc(R"({"bos_token": null})"), &spec).ok());
  EXPECT_EQ(spec.bos_id, -1);
  const auto bad = ApplyTokenizerConfig("c.json", Doc(R"({"eos_token": "<eos>"})"), &spec);
  EXPECT_THAT(bad.message(), HasSubstr("c.json: eos_token: '<eos>' is not a token"));
  const auto bad_template = ApplyTokenizerConfig("c.json", Doc(R"({"chat_template": 7})"), &spec);
  EXPECT_THAT(bad_template.message(), HasSubstr("c.json: chat_template"));
}

}  // namespace
}  // namespace onecard::engine
