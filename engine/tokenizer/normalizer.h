// Text normalizers of HF tokenizer.json files that onecard supports: none,
// and NFC (Qwen2's), done with ICU when the build found it (ONECARD_HAVE_ICU;
// Debian package libicu-dev). Tested by tests/engine/tokenizer/normalizer_test.cc
// and the tiny_nfc goldens in bpe_tokenizer_test.cc.
#ifndef ONECARD_ENGINE_TOKENIZER_NORMALIZER_H_
#define ONECARD_ENGINE_TOKENIZER_NORMALIZER_H_

#include <string>
#include <string_view>

namespace onecard::engine {

enum class NormalizerKind { kNone, kNfc };

// Whether this build can apply `kind` (kNfc needs ICU).
bool NormalizerAvailable(NormalizerKind kind);

// The normalized text. Text that is not valid UTF-8 (which no HF input can
// be) is returned unchanged, so no byte is lost.
std::string Normalize(NormalizerKind kind, std::string_view text);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_TOKENIZER_NORMALIZER_H_
