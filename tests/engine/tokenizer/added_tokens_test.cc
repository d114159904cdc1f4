// Tests of AddedTokens against the cases of HF tokenizers' own tests of
// AddedVocabulary (added_vocabulary.rs: can_extract_added_tokens,
// options_use_cases, test_single_word_is_correct, test_lstrip_unicode_space;
// inputs written lower-case since no normalizer is involved here). HF-made
// goldens for tiny_added also run through bpe_tokenizer_test.
#include "engine/tokenizer/added_tokens.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace onecard::engine {
namespace {

using ::testing::ElementsAre;
using ::testing::Pair;

// (text of the segment, id or -1)
std::vector<std::pair<std::string, int32_t>> SplitText(const AddedTokens& added,
                                                       std::string_view text) {
  std::vector<std::pair<std::string, int32_t>> out;
  for (const TextSegment& s : added.Split(text)) {
    out.emplace_back(std::string(text.substr(s.begin, s.end - s.begin)), s.id);
  }
  return out;
}

AddedToken Token(int32_t id, std::string content, bool special = false) {
  AddedToken t;
  t.id = id;
  t.content = std::move(content);
  t.special = special;
  t.normalized = !special;
  return t;
}

TEST(AddedTokensTest, ExtractsNormalAndSpecialTokens) {
  AddedTokens added(
      {Token(0, "my"), Token(1, "name"), Token(2, "[CLS]", true), Token(3, "[SEP]", true)});
  EXPECT_THAT(SplitText(added, "[CLS] My name is Anthony [SEP]"),
              ElementsAre(Pair("[CLS]", 2), Pair(" My ", -1), Pair("name", 1),
                          Pair(" is Anthony ", -1), Pair("[SEP]", 3)));
}

TEST(AddedTokensTest, OptionsUseCases) {
  AddedToken my = Token(0, "my");
  my.lstrip = my.rstrip = true;
  AddedToken ony = Token(2, "ony");
  ony.single_word = true;
  AddedTokens added({my, Token(1, "name"), ony, Token(3, "[CLS]", true), Token(4, "[SEP]", true)});
  EXPECT_THAT(SplitText(added, "[CLS] my name is anthony [SEP]"),
              ElementsAre(Pair("[CLS]", 3), Pair(" my ", 0), Pair("name", 1),
                          Pair(" is anthony ", -1), Pair("[SEP]", 4)));
}

TEST(AddedTokensTest, SingleWord) {
  AddedToken mask = Token(0, "<mask>");
  mask.single_word = true;
  AddedTokens added({mask});
  EXPECT_THAT(SplitText(added, "<mask> my name <mask> a<mask> <mask>ony <mask>"),
              ElementsAre(Pair("<mask>", 0), Pair(" my name ", -1), Pair("<mask>", 0),
                          Pair(" a<mask> <mask>ony ", -1), Pair("<mask>", 0)));
  // Punctuation is not a word character; a combining mark is.
  EXPECT_THAT(SplitText(added, "<mask>, <mask>- \u25CC\u0330<mask>"),
              ElementsAre(Pair("<mask>", 0), Pair(", ", -1), Pair("<mask>", 0),
                          Pair("- \u25CC\u0330<mask>", -1)));
}

TEST(AddedTokensTest, LstripAndRstripTakeUnicodeSpaces) {
  AddedToken mask = Token(0, "<mask>");
  mask.lstrip = mask.rstrip = mask.single_word = true;
  AddedTokens added({mask});
  EXPECT_THAT(SplitText(added, "hi <mask> there\t<mask>\t<mask>\u2000"),
              ElementsAre(Pair("hi", -1), Pair(" <mask> ", 0), Pair("there", -1),
                          Pair("\t<mask>\t", 0), Pair("<mask>\u2000", 0)));
}

TEST(AddedTokensTest, LeftmostLongestAndEmptyInput) {
  AddedTokens added({Token(0, "<|im"), Token(1, "<|im_start|>"), Token(2, "start")});
  EXPECT_THAT(SplitText(added, "x<|im_start|>start<|imy"),
              ElementsAre(Pair("x", -1), Pair("<|im_start|>", 1), Pair("start", 2), Pair("<|im", 0),
                          Pair("y", -1)));
  EXPECT_THAT(SplitText(added, ""), ElementsAre());
  EXPECT_THAT(SplitText(AddedTokens(), "abc"), ElementsAre(Pair("abc", -1)));
}

TEST(AddedTokensTest, Lookups) {
  AddedTokens added({Token(7, "<a>", true), Token(9, "b")});
  ASSERT_NE(added.FindById(7), nullptr);
  EXPECT_TRUE(added.FindById(7)->special);
  EXPECT_EQ(added.FindByContent("b")->id, 9);
  EXPECT_EQ(added.FindById(8), nullptr);
  EXPECT_EQ(added.FindByContent("<b>"), nullptr);
}

}  // namespace
}  // namespace onecard::engine
