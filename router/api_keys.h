// ApiKeys: API key -> tenant. The configuration holds only the hex sha256 of
// each key; a presented key is hashed and compared against every stored
// hash in constant time (services/common/digest.h), always scanning all of
// them, so the time taken says nothing about which hash (or how much of one)
// matched.
//
// With no tenant configured the router is open: every request belongs to the
// tenant "default" without limits, allowed every priority (a local setup; the
// router config must say allow_unauthenticated: true, and the router logs a
// warning).
// Tested by tests/router/api_keys_test.cc (NIST sha256 vectors, lookups,
// malformed configuration and headers).
#ifndef ONECARD_ROUTER_API_KEYS_H_
#define ONECARD_ROUTER_API_KEYS_H_

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "router/request_queue.h"
#include "router/token_bucket.h"
#include "services/common/digest.h"

namespace onecard::router {

using services::Sha256;
using services::Sha256Digest;
using services::Sha256Hex;

struct Tenant {
  std::string name;
  TenantLimits limits;
  PriorityClass max_priority = PriorityClass::kStandard;  // the most urgent allowed
  int32_t max_prompt_tokens = 0;                          // per request; 0: the model's context
  int32_t max_tokens = 0;                                 // per request; 0: the model's context
};

struct TenantSpec {
  Tenant tenant;
  std::vector<std::string> api_key_sha256;  // hex, 64 digits each
};

class ApiKeys {
 public:
  // InvalidArgument naming the field (`tenants[1].api_key_sha256[0]`,
  // `tenants[2].name`) for a malformed hash, a hash listed twice, an empty or
  // repeated tenant name, or a tenant without keys.
  static absl::StatusOr<ApiKeys> Create(const std::vector<TenantSpec>& specs);

  // `authorization` is the metadata value: "Bearer <key>". UNAUTHENTICATED,
  // naming the `authorization` metadata, when it is missing, malformed or
  // the key is unknown. The pointer lives as long as this object.
  absl::StatusOr<const Tenant*> Authenticate(std::string_view authorization) const;

  bool open() const { return open_; }
  const std::vector<Tenant>& tenants() const { return tenants_; }

 private:
  struct Key {
    Sha256Digest digest;
    size_t tenant = 0;
  };
  bool open_ = false;
  std::vector<Tenant> tenants_;
  std::vector<Key> keys_;
};

}  // namespace onecard::router

#endif  // ONECARD_ROUTER_API_KEYS_H_
