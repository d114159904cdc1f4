// Tests of engine/tokenizer/normalizer.h with NFC examples from the Unicode
// standard (UAX #15): combining sequences compose, singletons (Angstrom and
// Ohm signs) map to their canonical letters, Hangul jamo compose, and
// compatibility characters (the fi ligature) stay.
#include "engine/tokenizer/normalizer.h"

#include "gtest/gtest.h"

namespace onecard::engine {
namespace {

TEST(NormalizerTest, NoneChangesNothing) {
  EXPECT_TRUE(NormalizerAvailable(NormalizerKind::kNone));
  EXPECT_EQ(Normalize(NormalizerKind::kNone, "e\u0301"), "e\u0301");
}

TEST(NormalizerTest, Nfc) {
  if (!NormalizerAvailable(NormalizerKind::kNfc)) GTEST_SKIP() << "built without ICU";
  const auto nfc = [](std::string_view s) { return Normalize(NormalizerKind::kNfc, s); };
  EXPECT_EQ(nfc("plain ascii"), "plain ascii");
  EXPECT_EQ(nfc("Cafe\u0301"), "Caf\u00E9");
  EXPECT_EQ(nfc("A\u030A"), "\u00C5");
  EXPECT_EQ(nfc("\u212B"), "\u00C5");              // ANGSTROM SIGN
  EXPECT_EQ(nfc("\u2126"), "\u03A9");              // OHM SIGN
  EXPECT_EQ(nfc("\u1100\u1161\u11A8"), "\uAC01");  // jamo -> 각
  EXPECT_EQ(nfc("\uFB01"), "\uFB01");              // compatibility only: unchanged
  EXPECT_EQ(nfc("科创板 😀"), "科创板 😀");
  EXPECT_EQ(nfc("e\u0301\xFF"), "e\u0301\xFF");  // invalid UTF-8: left alone
}

}  // namespace
}  // namespace onecard::engine
