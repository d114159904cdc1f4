// The GPT-2 byte <-> code point tables (see byte_level.h), built once.
// Tested by tests/engine/tokenizer/byte_level_test.cc.
#include "engine/tokenizer/byte_level.h"

#include <array>

#include "engine/tokenizer/utf8.h"

namespace onecard::engine {
namespace {

constexpr uint32_t kNoByte = 0xFFFFFFFF;
constexpr uint32_t kMaxCodePoint = 0x100 + 68;  // the highest mapped code point + 1

struct Tables {
  std::array<uint32_t, 256> byte_to_cp;
  std::array<uint32_t, kMaxCodePoint> cp_to_byte;
  std::array<std::string, 256> byte_to_utf8;
};

bool PrintsAsItself(int b) {
  return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

const Tables& GetTables() {
  static const Tables* tables = [] {
    auto* t = new Tables;
    t->cp_to_byte.fill(kNoByte);
    uint32_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
      const uint32_t cp = PrintsAsItself(b) ? static_cast<uint32_t>(b) : next++;
      t->byte_to_cp[b] = cp;
      t->cp_to_byte[cp] = static_cast<uint32_t>(b);
      AppendUtf8(cp, &t->byte_to_utf8[b]);
    }
    return t;
  }();
  return *tables;
}

}  // namespace

uint32_t ByteToCodePoint(uint8_t byte) { return GetTables().byte_to_cp[byte]; }

std::string BytesToByteLevel(std::string_view bytes) {
  const Tables& t = GetTables();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char c : bytes) out += t.byte_to_utf8[static_cast<uint8_t>(c)];
  return out;
}

std::optional<std::string> ByteLevelToBytes(std::string_view text) {
  const Tables& t = GetTables();
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    uint32_t cp = 0;
    int prefix = 0;
    const int len = DecodeUtf8(text, pos, &cp, &prefix);
    if (len == 0 || cp >= kMaxCodePoint || t.cp_to_byte[cp] == kNoByte) return std::nullopt;
    out.push_back(static_cast<char>(t.cp_to_byte[cp]));
    pos += len;
  }
  return out;
}

}  // namespace onecard::engine
