// Tests of IncrementalDetokenizer over the HF golden ids of every tokenizer
// (emoji, ZWJ sequences and CJK split across byte-level tokens): every piece
// is valid UTF-8 and the pieces concatenate to Decode() of all ids.
#include <nlohmann/json.hpp>

#include "engine/tokenizer/normalizer.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/utf8.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/tokenizer/golden_reader.h"

namespace onecard::engine {
namespace {

using ::onecard::engine::testing::LoadGoldenTokenizer;
using ::onecard::engine::testing::ReadGolden;

class IncrementalDetokenizerTest : public ::testing::TestWithParam<std::string> {};

TEST_P(IncrementalDetokenizerTest, PiecesAreWholeCharactersAndConcatenateToDecode) {
  if (GetParam() == "tiny_nfc" && !NormalizerAvailable(NormalizerKind::kNfc)) {
    GTEST_SKIP() << "built without ICU: no NFC";
  }
  auto golden = ReadGolden(GetParam());
  ASSERT_TRUE(golden.ok()) << golden.status();
  auto tok = LoadGoldenTokenizer(GetParam());
  ASSERT_TRUE(tok.ok()) << tok.status();
  int split_characters = 0;  // tokens that end inside a character
  for (const bool skip : {false, true}) {
    for (const auto& c : golden->cases) {
      IncrementalDetokenizer detok(tok->get(), skip);
      std::string streamed;
      for (const int32_t id : c.ids) {
        const std::string piece = detok.Add(id);
        EXPECT_TRUE(IsValidUtf8(piece)) << nlohmann::json(c.text).dump();
        if (piece.empty() && !(*tok)->TokenBytes(id).empty() && !(*tok)->IsSpecial(id)) {
          ++split_characters;
        }
        streamed += piece;
      }
      streamed += detok.Flush();
      EXPECT_EQ(streamed, skip ? c.decoded_skip_special : c.decoded)
          << nlohmann::json(c.text).dump();
    }
  }
  EXPECT_GT(split_characters, 0) << "no golden string splits a character across tokens";
}

INSTANTIATE_TEST_SUITE_P(All, IncrementalDetokenizerTest,
                         ::testing::Values("smollm2", "tiny_llama3", "tiny_qwen2", "tiny_added",
                                           "tiny_nfc"));

// Ids whose bytes form an emoji one byte at a time, then a broken sequence.
TEST(IncrementalDetokenizerTest, HoldsPartialCharactersAndFlushesInvalidOnes) {
  auto tok = LoadGoldenTokenizer("tiny_qwen2");
  ASSERT_TRUE(tok.ok()) << tok.status();
  // "😀" is F0 9F 98 80: each byte alone is a token of a byte-level vocabulary.
  const std::vector<int32_t> ids = (*tok)->Encode("\xF0", false);
  ASSERT_EQ(ids.size(), 1u);
  std::vector<int32_t> bytes;
  for (const char b : std::string("\xF0\x9F\x98\x80")) {
    const auto one = (*tok)->Encode(std::string(1, b), false);
    ASSERT_EQ(one.size(), 1u);
    bytes.push_back(one[0]);
  }
  IncrementalDetokenizer detok(tok->get(), false);
  EXPECT_EQ(detok.Add(bytes[0]), "");
  EXPECT_EQ(detok.Add(bytes[1]), "");
  EXPECT_EQ(detok.Add(bytes[2]), "");
  EXPECT_EQ(detok.Add(bytes[3]), "\xF0\x9F\x98\x80");
  // F0 9F then 'a': the broken prefix becomes one U+FFFD as soon as 'a' comes.
  EXPECT_EQ(detok.Add(bytes[0]), "");
  EXPECT_EQ(detok.Add(bytes[1]), "");
  EXPECT_EQ(detok.Add((*tok)->Encode("a", false)[0]),
            "\xEF\xBF\xBD"
            "a");
  // A truncated character left at the end comes out of Flush as U+FFFD.
  EXPECT_EQ(detok.Add(bytes[0]), "");
  EXPECT_EQ(detok.Flush(), "\xEF\xBF\xBD");
  EXPECT_EQ(detok.Flush(), "");
}

}  // namespace
}  // namespace onecard::engine
