// ApiKeys (see api_keys.h). Tested by tests/router/api_keys_test.cc.
#include "router/api_keys.h"

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace onecard::router {

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
      if (!services::ParseSha256Hex(hex, &key.digest)) {
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
    bool equal = services::DigestsEqual(k.digest, digest);
    match = equal ? k.tenant : match;
  }
  if (match == tenants_.size()) {
    return absl::UnauthenticatedError("authorization: unknown api key");
  }
  return &tenants_[match];
}

}  // namespace onecard::router
