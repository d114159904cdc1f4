// Tests of services/common/digest.h: hex round trips, malformed hex, and
// digest equality. The SHA-256 NIST vectors are in tests/router/api_keys_test.cc.
#include "services/common/digest.h"

#include "gtest/gtest.h"

namespace onecard::services {
namespace {

TEST(DigestTest, HexRoundTripAndEquality) {
  Sha256Digest parsed{};
  ASSERT_TRUE(ParseSha256Hex(Sha256Hex("abc"), &parsed));
  EXPECT_TRUE(DigestsEqual(parsed, Sha256("abc")));
  EXPECT_FALSE(DigestsEqual(parsed, Sha256("abd")));
}

TEST(DigestTest, MalformedHexIsRefused) {
  Sha256Digest parsed{};
  EXPECT_FALSE(ParseSha256Hex("abc", &parsed));
  EXPECT_FALSE(ParseSha256Hex(std::string(64, 'g'), &parsed));
  EXPECT_FALSE(ParseSha256Hex(std::string(64, 'A'), &parsed));  // lowercase only
}

}  // namespace
}  // namespace onecard::services
