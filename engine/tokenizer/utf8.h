// UTF-8 helpers for the tokenizer: validation with the "maximal subpart"
// replacement rule (what Rust's String::from_utf8_lossy, and so HF tokenizers'
// decoders, do), the length of the complete prefix of a byte stream (for
// streaming), and Unicode White_Space. Tested by
// tests/engine/tokenizer/utf8_test.cc.
#ifndef ONECARD_ENGINE_TOKENIZER_UTF8_H_
#define ONECARD_ENGINE_TOKENIZER_UTF8_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace onecard::engine {

// Decodes the character at bytes[pos]. Returns the number of bytes it takes
// (1..4) and sets *code_point; returns 0 when the bytes there are not a valid
// UTF-8 character. *valid_prefix_len is then the length of the longest prefix
// that could still begin one (0 when bytes[pos] can start no character), and
// it can reach the end of the input (an unfinished character).
int DecodeUtf8(std::string_view bytes, size_t pos, uint32_t* code_point, int* valid_prefix_len);

// Replaces every maximal invalid subsequence with U+FFFD.
std::string Utf8Lossy(std::string_view bytes);

// The length of the longest prefix of `bytes` that holds no unfinished
// character at its end: bytes past it are the valid start of a character
// that later bytes may complete. Invalid bytes before it count as finished.
size_t Utf8CompletePrefix(std::string_view bytes);

bool IsValidUtf8(std::string_view bytes);

// Unicode White_Space (what Rust's char::is_whitespace tests).
bool IsUnicodeWhitespace(uint32_t code_point);

// Appends the UTF-8 encoding of a code point (< 0x110000).
void AppendUtf8(uint32_t code_point, std::string* out);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_TOKENIZER_UTF8_H_
