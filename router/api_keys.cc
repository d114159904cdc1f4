// ApiKeys (see api_keys.h). Tested by tests/router/api_keys_test.cc.
#include "router/api_keys.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace onecard::router {
namespace {

constexpr char kHex[] = "0123456789abcdef";

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

bool ParseDigest(std::string_view hex, Sha256Digest* out) {
  if (hex.size() != 64) return false;
  for (size_t i = 0; i < 32; ++i) {
    int hi = HexValue(hex[2 * i]), lo = HexValue(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    (*out)[i] = static_cast<uint8_t>(hi * 16 + lo);
  }
  return true;
}

}  // namespace

Sha256Digest Sha256(std::string_view data) {
  Sha256Digest digest{};
  unsigned int size = 0;
  // EVP_Digest cannot fail for SHA-256 on in-memory data short of OOM; an
  // all-zero digest then matches no configured key.
  EVP_Digest(data.data(), data.size(), digest.data(), &size, EVP_sha256(), nullptr);
  return digest;
}

std::string Sha256Hex(std::string_view data) {
  Sha256Digest d = Sha256(data);
  std::string hex;
  for (uint8_t b : d) {
    hex.push_back(kHex[b >> 4]);
    hex.push_back(kHex[b & 15]);
  }
  return hex;
}

absl::StatusOr<ApiKeys> ApiKeys::Create(const std::vector<TenantSpec>& specs) {
  ApiKeys keys;
  if (specs.empty()) {
    keys.open_ = true;
    keys.tenants_.push_back(Tenant{"default", TenantLimits{}, PriorityClass::kInteractive});
    return keys;
  }
  absl::flat_hash_set<std::string> names, hashes;
  for (size_t t = 0; t < specs.size(); ++t) {
    const TenantSpec& spec = specs[t];
    std::string field = absl::StrCat("tenants[", t, "]");
    if (spec.tenant.name.empty() || !names.insert(spec.tenant.name).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ".name: ", spec.tenant.name.empty() ? "empty" : "repeated", " tenant name"));
    }
    if (spec.api_key_sha256.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(field, ".api_key_sha256: no keys"));
    }
    for (size_t k = 0; k < spec.api_key_sha256.size(); ++k) {
      const std::string& hex = spec.api_key_sha256[k];
      Key key{{}, t};
      if (!ParseDigest(hex, &key.digest)) {
        return absl::InvalidArgumentError(
            absl::StrCat(field, ".api_key_sha256[", k, "]: expected 64 lowercase hex digits"));
      }
      if (!hashes.insert(hex).second) {
        return absl::InvalidArgumentError(
            absl::StrCat(field, ".api_key_sha256[", k, "]: the same key hash is listed twice"));
      }
      keys.keys_.push_back(key);
    }
    keys.tenants_.push_back(spec.tenant);
  }
  return keys;
}

absl::StatusOr<const Tenant*> ApiKeys::Authenticate(std::string_view authorization) const {
  if (open_) return &tenants_[0];
  if (authorization.empty()) {
    return absl::UnauthenticatedError("authorization: missing (send \"Bearer <api key>\")");
  }
  absl::string_view key(authorization.data(), authorization.size());
  if (!absl::ConsumePrefix(&key, "Bearer ") && !absl::ConsumePrefix(&key, "bearer ")) {
    return absl::UnauthenticatedError("authorization: expected \"Bearer <api key>\"");
  }
  key = absl::StripAsciiWhitespace(key);
  if (key.empty()) return absl::UnauthenticatedError("authorization: empty api key");
  const Sha256Digest digest = Sha256(std::string_view(key.data(), key.size()));
  size_t match = tenants_.size();  // none
  for (const Key& k : keys_) {     // every key, whatever matched before
    bool equal = CRYPTO_memcmp(k.digest.data(), digest.data(), digest.size()) == 0;
    match = equal ? k.tenant : match;
  }
  if (match == tenants_.size()) {
    return absl::UnauthenticatedError("authorization: unknown api key");
  }
  return &tenants_[match];
}

}  // namespace onecard::router
