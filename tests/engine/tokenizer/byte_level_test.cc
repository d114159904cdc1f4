// Tests of engine/tokenizer/byte_level.h against GPT-2's bytes_to_unicode
// table (known entries: space -> U+0120 'Ġ', newline -> U+010A 'Ċ', byte 0 ->
// U+0100, 0xAD -> U+0143; printable Latin-1 maps to itself).
#include "engine/tokenizer/byte_level.h"

#include <set>

#include "gtest/gtest.h"

namespace onecard::engine {
namespace {

TEST(ByteLevelTest, KnownEntries) {
  EXPECT_EQ(ByteToCodePoint(' '), 0x120u);
  EXPECT_EQ(ByteToCodePoint('\n'), 0x10Au);
  EXPECT_EQ(ByteToCodePoint('\t'), 0x109u);
  EXPECT_EQ(ByteToCodePoint(0x00), 0x100u);
  EXPECT_EQ(ByteToCodePoint(0x7F), 0x121u);
  EXPECT_EQ(ByteToCodePoint(0xAD), 0x143u);
  EXPECT_EQ(ByteToCodePoint('A'), static_cast<uint32_t>('A'));
  EXPECT_EQ(ByteToCodePoint(0xE9), 0xE9u);
  EXPECT_EQ(BytesToByteLevel(" hello\n"),
            "\xC4\xA0hello\xC4\x8A");  // "Ġhello Ċ"
}

TEST(ByteLevelTest, IsABijectionAndRoundTrips) {
  std::set<uint32_t> seen;
  std::string all;
  for (int b = 0; b < 256; ++b) {
    seen.insert(ByteToCodePoint(static_cast<uint8_t>(b)));
    all.push_back(static_cast<char>(b));
  }
  EXPECT_EQ(seen.size(), 256u);
  EXPECT_EQ(*seen.rbegin(), 0x143u);
  const auto back = ByteLevelToBytes(BytesToByteLevel(all));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(*back, all);
}

TEST(ByteLevelTest, RejectsCodePointsOutsideTheAlphabet) {
  EXPECT_FALSE(ByteLevelToBytes("hello world").has_value());   // a raw space
  EXPECT_FALSE(ByteLevelToBytes("\xE7\xA7\x91").has_value());  // 科
  EXPECT_FALSE(ByteLevelToBytes("\xC5\x84").has_value());      // U+0144, one past the table
  EXPECT_FALSE(ByteLevelToBytes("\xFF").has_value());          // not UTF-8
  EXPECT_EQ(ByteLevelToBytes("<|im_start|>").value_or("?"), "<|im_start|>");
}

}  // namespace
}  // namespace onecard::engine
