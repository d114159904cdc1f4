// GPT-2's byte-level alphabet: every byte is written as one printable code
// point (printable Latin-1 bytes as themselves, the other 68 bytes as
// U+0100..U+0143 in byte order), so BPE vocabularies are plain strings.
// Tested by tests/engine/tokenizer/byte_level_test.cc.
#ifndef ONECARD_ENGINE_TOKENIZER_BYTE_LEVEL_H_
#define ONECARD_ENGINE_TOKENIZER_BYTE_LEVEL_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace onecard::engine {

// The code point that stands for `byte`.
uint32_t ByteToCodePoint(uint8_t byte);

// Raw bytes -> their byte-level string (UTF-8 of the mapped code points).
std::string BytesToByteLevel(std::string_view bytes);

// A byte-level string -> the raw bytes; nullopt when it is not valid UTF-8 or
// holds a code point outside the alphabet.
std::optional<std::string> ByteLevelToBytes(std::string_view text);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_TOKENIZER_BYTE_LEVEL_H_
