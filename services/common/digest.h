// SHA-256 and a constant-time comparison of digests (OpenSSL), for secrets
// that are stored or compared only as hashes: tenants' API keys (router) and
// the services' role tokens (service_auth.h). Hashing first gives every
// comparison the same length, so its time says nothing about the secret.
// Tested by tests/services/common/digest_test.cc and, with NIST vectors,
// tests/router/api_keys_test.cc.
#ifndef ONECARD_SERVICES_COMMON_DIGEST_H_
#define ONECARD_SERVICES_COMMON_DIGEST_H_

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace onecard::services {

using Sha256Digest = std::array<uint8_t, 32>;
Sha256Digest Sha256(std::string_view data);
std::string Sha256Hex(std::string_view data);  // 64 lowercase hex digits
// `hex` (64 lowercase hex digits) as a digest; false when malformed.
bool ParseSha256Hex(std::string_view hex, Sha256Digest* out);
// Equal digests, compared in constant time (CRYPTO_memcmp).
bool DigestsEqual(const Sha256Digest& a, const Sha256Digest& b);

}  // namespace onecard::services

#endif  // ONECARD_SERVICES_COMMON_DIGEST_H_
