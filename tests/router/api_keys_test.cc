// Tests router/api_keys.h: sha256 against NIST FIPS 180-2 example vectors,
// key -> tenant lookups, malformed configuration naming the field, and
// malformed or unknown authorization values.
#include "router/api_keys.h"

#include "gtest/gtest.h"

namespace onecard::router {
namespace {

TEST(Sha256Test, NistVectors) {
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

std::vector<TenantSpec> TwoTenants() {
  TenantSpec a{Tenant{"acme", TenantLimits{5, 5, 100, 100}, PriorityClass::kInteractive},
               {Sha256Hex("key-a1"), Sha256Hex("key-a2")}};
  TenantSpec b{Tenant{"batchco", TenantLimits{}, PriorityClass::kBatch}, {Sha256Hex("key-b")}};
  return {a, b};
}

TEST(ApiKeysTest, MapsKeysToTenants) {
  absl::StatusOr<ApiKeys> keys = ApiKeys::Create(TwoTenants());
  ASSERT_TRUE(keys.ok()) << keys.status();
  EXPECT_FALSE(keys->open());
  EXPECT_EQ((*keys->Authenticate("Bearer key-a1"))->name, "acme");
  EXPECT_EQ((*keys->Authenticate("Bearer key-a2"))->name, "acme");
  EXPECT_EQ((*keys->Authenticate("Bearer key-b"))->name, "batchco");
  EXPECT_EQ((*keys->Authenticate("Bearer key-b"))->max_priority, PriorityClass::kBatch);
  EXPECT_DOUBLE_EQ((*keys->Authenticate("Bearer key-a1"))->limits.tokens_per_second, 100);
}

TEST(ApiKeysTest, RefusesBadAuthorizationNamingIt) {
  absl::StatusOr<ApiKeys> keys = ApiKeys::Create(TwoTenants());
  ASSERT_TRUE(keys.ok());
  for (const char* bad : {"", "key-a1", "Basic key-a1", "Bearer ", "Bearer key-a3",
                          "Bearer key-a1x", "Bearer KEY-A1"}) {
    absl::StatusOr<const Tenant*> t = keys->Authenticate(bad);
    ASSERT_FALSE(t.ok()) << bad;
    EXPECT_EQ(t.status().code(), absl::StatusCode::kUnauthenticated) << bad;
    EXPECT_NE(t.status().message().find("authorization"), std::string::npos) << t.status();
  }
}

TEST(ApiKeysTest, BadConfigurationNamesTheField) {
  std::vector<TenantSpec> specs = TwoTenants();
  specs[1].api_key_sha256.push_back("ABC");
  absl::Status s = ApiKeys::Create(specs).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("tenants[1].api_key_sha256[1]"), std::string::npos) << s;

  specs = TwoTenants();
  specs[1].api_key_sha256.push_back(Sha256Hex("key-a2"));
  s = ApiKeys::Create(specs).status();
  EXPECT_NE(s.message().find("tenants[1].api_key_sha256[1]: the same key"), std::string::npos) << s;

  specs = TwoTenants();
  specs[1].tenant.name = "acme";
  s = ApiKeys::Create(specs).status();
  EXPECT_NE(s.message().find("tenants[1].name"), std::string::npos) << s;

  specs = TwoTenants();
  specs[0].api_key_sha256.clear();
  s = ApiKeys::Create(specs).status();
  EXPECT_NE(s.message().find("tenants[0].api_key_sha256: no keys"), std::string::npos) << s;

  // Uppercase hex is refused (the format is lowercase).
  specs = TwoTenants();
  std::string upper = Sha256Hex("k");
  for (char& c : upper) c = static_cast<char>(std::toupper(c));
  specs[0].api_key_sha256 = {upper};
  EXPECT_FALSE(ApiKeys::Create(specs).ok());
}

TEST(ApiKeysTest, NoTenantsMeansOpen) {
  absl::StatusOr<ApiKeys> keys = ApiKeys::Create({});
  ASSERT_TRUE(keys.ok());
  EXPECT_TRUE(keys->open());
  absl::StatusOr<const Tenant*> t = keys->Authenticate("");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ((*t)->name, "default");
  EXPECT_EQ((*t)->max_priority, PriorityClass::kInteractive);
}

}  // namespace
}  // namespace onecard::router
