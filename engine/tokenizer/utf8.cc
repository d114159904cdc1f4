// UTF-8 decoding by the Unicode standard's Table 3-7 (well-formed byte
// sequences); see utf8.h. Tested by tests/engine/tokenizer/utf8_test.cc.
#include "engine/tokenizer/utf8.h"

namespace onecard::engine {
namespace {

// The number of bytes a character starting with `lead` takes, and the range
// its second byte must fall in (Table 3-7); 0 for bytes that start nothing.
struct LeadInfo {
  int length;
  uint8_t second_lo;
  uint8_t second_hi;
};

LeadInfo Lead(uint8_t lead) {
  if (lead < 0x80) return {1, 0, 0};
  if (lead >= 0xC2 && lead <= 0xDF) return {2, 0x80, 0xBF};
  if (lead == 0xE0) return {3, 0xA0, 0xBF};
  if (lead == 0xED) return {3, 0x80, 0x9F};
  if (lead >= 0xE1 && lead <= 0xEF) return {3, 0x80, 0xBF};
  if (lead == 0xF0) return {4, 0x90, 0xBF};
  if (lead >= 0xF1 && lead <= 0xF3) return {4, 0x80, 0xBF};
  if (lead == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

}  // namespace

int DecodeUtf8(std::string_view bytes, size_t pos, uint32_t* code_point, int* valid_prefix_len) {
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(bytes[i]); };
  const uint8_t lead = byte(pos);
  const LeadInfo info = Lead(lead);
  *valid_prefix_len = 0;
  if (info.length == 0) return 0;
  if (info.length == 1) {
    *code_point = lead;
    return 1;
  }
  uint32_t cp = lead & (0xFF >> (info.length + 1));
  int have = 1;
  for (; have < info.length; ++have) {
    if (pos + have >= bytes.size()) break;
    const uint8_t b = byte(pos + have);
    const bool ok =
        have == 1 ? (b >= info.second_lo && b <= info.second_hi) : (b >= 0x80 && b <= 0xBF);
    if (!ok) break;
    cp = (cp << 6) | (b & 0x3F);
  }
  if (have == info.length) {
    *code_point = cp;
    return have;
  }
  *valid_prefix_len = have;
  return 0;
}

std::string Utf8Lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t pos = 0;
  while (pos < bytes.size()) {
    uint32_t cp = 0;
    int prefix = 0;
    const int len = DecodeUtf8(bytes, pos, &cp, &prefix);
    if (len > 0) {
      out.append(bytes.substr(pos, len));
      pos += len;
    } else {
      out.append("\xEF\xBF\xBD");  // U+FFFD for the maximal invalid subpart
      pos += prefix > 0 ? prefix : 1;
    }
  }
  return out;
}

size_t Utf8CompletePrefix(std::string_view bytes) {
  size_t pos = 0;
  while (pos < bytes.size()) {
    uint32_t cp = 0;
    int prefix = 0;
    const int len = DecodeUtf8(bytes, pos, &cp, &prefix);
    if (len > 0) {
      pos += len;
    } else if (prefix > 0 && pos + prefix == bytes.size()) {
      return pos;  // an unfinished character at the end
    } else {
      pos += prefix > 0 ? prefix : 1;
    }
  }
  return pos;
}

bool IsValidUtf8(std::string_view bytes) {
  size_t pos = 0;
  while (pos < bytes.size()) {
    uint32_t cp = 0;
    int prefix = 0;
    const int len = DecodeUtf8(bytes, pos, &cp, &prefix);
    if (len == 0) return false;
    pos += len;
  }
  return true;
}

bool IsUnicodeWhitespace(uint32_t cp) {
  if (cp >= 0x09 && cp <= 0x0D) return true;
  if (cp >= 0x2000 && cp <= 0x200A) return true;
  switch (cp) {
    case 0x20:
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return false;
  }
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace onecard::engine
