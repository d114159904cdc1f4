// SHA-256 and constant-time digest comparison. See digest.h.
#include "services/common/digest.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>

namespace onecard::services {
namespace {

constexpr char kHex[] = "0123456789abcdef";

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

Sha256Digest Sha256(std::string_view data) {
  Sha256Digest digest{};
  unsigned int size = 0;
  // EVP_Digest cannot fail for SHA-256 on in-memory data short of OOM; an
  // all-zero digest then matches no configured secret.
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

bool ParseSha256Hex(std::string_view hex, Sha256Digest* out) {
  if (hex.size() != 64) return false;
  for (size_t i = 0; i < 32; ++i) {
    int hi = HexValue(hex[2 * i]), lo = HexValue(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return false;
    (*out)[i] = static_cast<uint8_t>(hi * 16 + lo);
  }
  return true;
}

bool DigestsEqual(const Sha256Digest& a, const Sha256Digest& b) {
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace onecard::services
