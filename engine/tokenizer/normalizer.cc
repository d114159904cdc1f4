// Normalizers (see normalizer.h): NFC through ICU's Normalizer2, with an
// ASCII fast path (ASCII text is always NFC). Tested by
// tests/engine/tokenizer/normalizer_test.cc.
#include "engine/tokenizer/normalizer.h"

#include "engine/tokenizer/utf8.h"

#ifdef ONECARD_HAVE_ICU
#include <unicode/normalizer2.h>
#include <unicode/unistr.h>
#endif

namespace onecard::engine {
namespace {

bool IsAscii(std::string_view text) {
  for (const char c : text) {
    if (static_cast<uint8_t>(c) >= 0x80) return false;
  }
  return true;
}

#ifdef ONECARD_HAVE_ICU
const icu::Normalizer2* Nfc() {
  static const icu::Normalizer2* const kNfc = [] {
    UErrorCode status = U_ZERO_ERROR;
    const icu::Normalizer2* nfc = icu::Normalizer2::getNFCInstance(status);
    return U_SUCCESS(status) ? nfc : nullptr;
  }();
  return kNfc;
}

std::string NfcOf(std::string_view text) {
  const icu::Normalizer2* nfc = Nfc();
  if (nfc == nullptr) return std::string(text);
  const icu::UnicodeString in = icu::UnicodeString::fromUTF8(
      icu::StringPiece(text.data(), static_cast<int32_t>(text.size())));
  UErrorCode status = U_ZERO_ERROR;
  if (nfc->isNormalized(in, status) && U_SUCCESS(status)) return std::string(text);
  status = U_ZERO_ERROR;
  const icu::UnicodeString out = nfc->normalize(in, status);
  if (U_FAILURE(status)) return std::string(text);
  std::string utf8;
  out.toUTF8String(utf8);
  return utf8;
}
#endif

}  // namespace

bool NormalizerAvailable(NormalizerKind kind) {
  switch (kind) {
    case NormalizerKind::kNone:
      return true;
    case NormalizerKind::kNfc:
#ifdef ONECARD_HAVE_ICU
      return Nfc() != nullptr;
#else
      return false;
#endif
  }
  return false;
}

std::string Normalize(NormalizerKind kind, std::string_view text) {
  if (kind == NormalizerKind::kNone || IsAscii(text) || !IsValidUtf8(text)) {
    return std::string(text);
  }
#ifdef ONECARD_HAVE_ICU
  return NfcOf(text);
#else
  return std::string(text);  // unreachable: loaders refuse kNfc without ICU
#endif
}

}  // namespace onecard::engine
