// Tests of engine/tokenizer/utf8.h. Expected values come from the Unicode
// standard (chapter 3, "U+FFFD Substitution of Maximal Subparts", Table 3-8)
// and Python's bytes.decode("utf-8", "replace"), which follows it.
#include "engine/tokenizer/utf8.h"

#include "gtest/gtest.h"

namespace onecard::engine {
namespace {

constexpr char kFffd[] = "\xEF\xBF\xBD";

TEST(Utf8LossyTest, ValidTextIsUnchanged) {
  const std::string text = "plain ASCII, café, 科创板, 😀, 👨‍👩‍👧";
  EXPECT_EQ(Utf8Lossy(text), text);
  EXPECT_TRUE(IsValidUtf8(text));
}

TEST(Utf8LossyTest, Table3_8MaximalSubparts) {
  // 61 F1 80 80 E1 80 C2 62 80 63 80 BF 64 -> a FFFD FFFD FFFD b FFFD c FFFD
  // FFFD d
  const std::string in = "\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64";
  const std::string f = kFffd;
  EXPECT_EQ(Utf8Lossy(in), "a" + f + f + f + "b" + f + "c" + f + f + "d");
  EXPECT_FALSE(IsValidUtf8(in));
}

TEST(Utf8LossyTest, SurrogatesOverlongsAndOutOfRange) {
  const std::string f = kFffd;
  EXPECT_EQ(Utf8Lossy("\xED\xA0\x80"),
            f + f + f);                                     // a surrogate: ED then two bytes
  EXPECT_EQ(Utf8Lossy("\xC0\xAF"), f + f);                  // overlong '/'
  EXPECT_EQ(Utf8Lossy("\xE0\x80\xAF"), f + f + f);          // overlong
  EXPECT_EQ(Utf8Lossy("\xF4\x90\x80\x80"), f + f + f + f);  // > U+10FFFF
  EXPECT_EQ(Utf8Lossy("\xF0\x9F\x98"), f);                  // truncated emoji: one subpart
  EXPECT_EQ(Utf8Lossy("x\xE7\xA7"), "x" + f);               // truncated CJK
}

TEST(Utf8CompletePrefixTest, HoldsBackOnlyAnUnfinishedLastCharacter) {
  EXPECT_EQ(Utf8CompletePrefix(""), 0u);
  EXPECT_EQ(Utf8CompletePrefix("abc"), 3u);
  EXPECT_EQ(Utf8CompletePrefix("ab\xF0\x9F\x98"),
            2u);                                            // 😀 missing its last byte
  EXPECT_EQ(Utf8CompletePrefix("ab\xF0\x9F\x98\x80"), 6u);  // complete
  EXPECT_EQ(Utf8CompletePrefix("a\xE7"), 1u);
  EXPECT_EQ(Utf8CompletePrefix("a\x80"),
            2u);  // a lone continuation byte is finished
  EXPECT_EQ(Utf8CompletePrefix("a\xE7"
                               "b"),
            3u);                               // interrupted: finished (invalid)
  EXPECT_EQ(Utf8CompletePrefix("a\xFF"), 2u);  // can start nothing
  EXPECT_EQ(Utf8CompletePrefix("a\xED\xA0"),
            3u);  // surrogate prefix can never complete
}

TEST(Utf8Test, DecodeAndAppendRoundTrip) {
  for (const uint32_t cp : {0x24u, 0xA2u, 0x939u, 0x20ACu, 0xD55Cu, 0x10348u, 0x1F600u}) {
    std::string s;
    AppendUtf8(cp, &s);
    uint32_t back = 0;
    int prefix = 0;
    EXPECT_EQ(DecodeUtf8(s, 0, &back, &prefix), static_cast<int>(s.size()));
    EXPECT_EQ(back, cp);
  }
}

TEST(Utf8Test, WhitespaceIsUnicodeWhiteSpace) {
  for (const uint32_t cp : {0x09u, 0x0Au, 0x0Du, 0x20u, 0x85u, 0xA0u, 0x2003u, 0x3000u}) {
    EXPECT_TRUE(IsUnicodeWhitespace(cp)) << cp;
  }
  for (const uint32_t cp : {0x41u, 0x200Bu, 0xFEFFu, 0x1Fu}) {
    EXPECT_FALSE(IsUnicodeWhitespace(cp)) << cp;
  }
}

}  // namespace
}  // namespace onecard::engine
