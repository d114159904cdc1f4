// Tests of PreTokenizer: the words of every golden string equal HF's
// pre_tokenize_str output (recorded by make_tokenizer_goldens.py) for the
// GPT-2/SmolLM, Llama-3 and Qwen2 patterns; GGUF name mapping.
#include "engine/tokenizer/pre_tokenizer.h"

#include <nlohmann/json.hpp>

#include "engine/tokenizer/byte_level.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/tokenizer/golden_reader.h"

namespace onecard::engine {
namespace {

using ::onecard::engine::testing::ReadGolden;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

std::vector<std::string> Words(const PreTokenizer& pre, std::string_view text) {
  std::vector<std::string_view> views;
  pre.Split(text, &views);
  std::vector<std::string> words;
  for (const std::string_view w : views) words.push_back(BytesToByteLevel(w));
  return words;
}

struct Case {
  const char* golden;
  PreTokenizerKind kind;
};

class PreTokenizerGoldenTest : public ::testing::TestWithParam<Case> {};

TEST_P(PreTokenizerGoldenTest, WordsMatchHf) {
  auto golden = ReadGolden(GetParam().golden);
  ASSERT_TRUE(golden.ok()) << golden.status();
  auto pre = PreTokenizer::Create(GetParam().kind);
  ASSERT_TRUE(pre.ok()) << pre.status();
  for (const auto& c : golden->cases) {
    EXPECT_THAT(Words(**pre, c.text), ElementsAreArray(c.words)) << nlohmann::json(c.text).dump();
  }
}

// smollm2's golden words come from ByteLevel(use_regex) alone (transformers'
// GGUF loader); kSmolLM additionally isolates digits, which can only split
// those words further, so the GPT-2 kind is the one to compare word by word.
INSTANTIATE_TEST_SUITE_P(All, PreTokenizerGoldenTest,
                         ::testing::Values(Case{"smollm2", PreTokenizerKind::kGpt2},
                                           Case{"tiny_llama3", PreTokenizerKind::kLlama3},
                                           Case{"tiny_qwen2", PreTokenizerKind::kQwen2}),
                         [](const auto& info) { return std::string(info.param.golden); });

TEST(PreTokenizerTest, SmolLmIsolatesEveryDigit) {
  auto pre = PreTokenizer::Create(PreTokenizerKind::kSmolLM);
  ASSERT_TRUE(pre.ok());
  std::vector<std::string_view> words;
  (*pre)->Split("ab 123x", &words);
  EXPECT_THAT(words, ElementsAre("ab", " ", "1", "2", "3", "x"));
}

TEST(PreTokenizerTest, Llama3GroupsDigitsByThreeAndQwen2ByOne) {
  auto llama = PreTokenizer::Create(PreTokenizerKind::kLlama3);
  auto qwen = PreTokenizer::Create(PreTokenizerKind::kQwen2);
  ASSERT_TRUE(llama.ok() && qwen.ok());
  std::vector<std::string_view> a, b;
  (*llama)->Split("1234567", &a);
  (*qwen)->Split("123", &b);
  EXPECT_THAT(a, ElementsAre("123", "456", "7"));
  EXPECT_THAT(b, ElementsAre("1", "2", "3"));
}

TEST(PreTokenizerTest, InvalidUtf8BytesBecomeWordsOfTheirOwn) {
  auto pre = PreTokenizer::Create(PreTokenizerKind::kGpt2);
  ASSERT_TRUE(pre.ok());
  std::vector<std::string_view> words;
  (*pre)->Split("hi \xFF there\xE7", &words);
  EXPECT_THAT(words, ElementsAre("hi", " ", "\xFF", " there", "\xE7"));
}

TEST(PreTokenizerTest, GgufNames) {
  EXPECT_EQ(*PreTokenizerKindFromGgufName("smollm"), PreTokenizerKind::kSmolLM);
  EXPECT_EQ(*PreTokenizerKindFromGgufName("llama-bpe"), PreTokenizerKind::kLlama3);
  EXPECT_EQ(*PreTokenizerKindFromGgufName("qwen2"), PreTokenizerKind::kQwen2);
  EXPECT_EQ(*PreTokenizerKindFromGgufName("gpt2"), PreTokenizerKind::kGpt2);
  const auto bad = PreTokenizerKindFromGgufName("deepseek-coder");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("tokenizer.ggml.pre"));
  EXPECT_THAT(bad.status().message(), HasSubstr("deepseek-coder"));
}

}  // namespace
}  // namespace onecard::engine
