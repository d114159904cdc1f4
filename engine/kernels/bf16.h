// bfloat16 <-> float conversions on the host (round to nearest even, NaN kept
// a quiet NaN), for the references' BF16 path and for tests that make BF16
// inputs. Tested by tests/engine/kernels/bf16_test.cc.
#ifndef ONECARD_ENGINE_KERNELS_BF16_H_
#define ONECARD_ENGINE_KERNELS_BF16_H_

#include <cstdint>
#include <cstring>

namespace onecard::engine {

inline float Bf16ToFloat(uint16_t bits) {
  const uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

inline uint16_t FloatToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  if ((u & 0x7fffffffu) > 0x7f800000u) {  // NaN: keep the sign, force quiet
    return static_cast<uint16_t>((u >> 16) | 0x0040u);
  }
  const uint32_t rounding_bias = 0x7fffu + ((u >> 16) & 1u);  // ties to even
  return static_cast<uint16_t>((u + rounding_bias) >> 16);
}

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_KERNELS_BF16_H_
