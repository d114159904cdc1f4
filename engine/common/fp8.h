// FP8 E4M3 (the "fn" variant of the OCP FP8 formats, Hopper's e4m3 and
// PyTorch's float8_e4m3fn) <-> fp32, on the host and the device: one sign
// bit, four exponent bits (bias 7), three mantissa bits; no infinities, one
// NaN a sign (S.1111.111); largest finite 448, smallest normal 2^-6,
// subnormals m * 2^-9. FloatToE4m3 rounds to nearest even and saturates:
// finite values beyond +-448 and the infinities become +-448, so no finite
// input turns into NaN (a NaN stays NaN). Tested by
// tests/engine/common/fp8_test.cc against ml_dtypes' float8_e4m3fn
// (tests/golden/fp8/e4m3.json, tests/golden/make_fp8_goldens.py).
#ifndef ONECARD_ENGINE_COMMON_FP8_H_
#define ONECARD_ENGINE_COMMON_FP8_H_

#include <cstdint>

#include "engine/common/fp16.h"
#include "engine/common/host_device.h"

namespace onecard::engine {

inline constexpr float kE4m3Max = 448.0f;

// E4M3 -> fp32, exact.
ONECARD_HOST_DEVICE inline float E4m3ToFloat(uint8_t code) {
  const uint32_t sign = static_cast<uint32_t>(code & 0x80u) << 24;
  const uint32_t exponent = (code >> 3) & 0xfu;
  const uint32_t mantissa = code & 0x7u;
  if (exponent == 0xf && mantissa == 0x7) return FloatFromBits(sign | 0x7fc00000u);
  if (exponent != 0) return FloatFromBits(sign | ((exponent + 120) << 23) | (mantissa << 20));
  // Subnormal: mantissa * 2^-9, exact in fp32.
  const float magnitude = static_cast<float>(mantissa) * (1.0f / 512.0f);
  return FloatFromBits(sign | BitsFromFloat(magnitude));
}

// fp32 -> E4M3, round to nearest even, saturating at +-448.
ONECARD_HOST_DEVICE inline uint8_t FloatToE4m3(float f) {
  const uint32_t bits = BitsFromFloat(f);
  const uint32_t sign = (bits >> 24) & 0x80u;
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint8_t>(sign | 0x7fu);   // NaN
  if (abs >= 0x43e00000u) return static_cast<uint8_t>(sign | 0x7eu);  // >= 448, inf
  const uint32_t exponent = abs >> 23;
  if (exponent >= 121) {  // normal E4M3 (>= 2^-6): keep 3 mantissa bits
    const uint32_t odd = (abs >> 20) & 1u;
    const uint32_t rounded = (abs + 0x7ffffu + odd) >> 20;  // exponent and 3 bits, maybe carried
    // Below 448 the carry reaches at most 448 itself (code 0x7e).
    return static_cast<uint8_t>(sign | (rounded - (120u << 3)));
  }
  // Subnormal: round |f| * 2^9 to an integer 0..8 (8 is the smallest normal, code 0x08).
  const uint32_t shift = 141 - exponent;               // 21.. for exponent <= 120
  if (shift >= 32) return static_cast<uint8_t>(sign);  // below 2^-10 (fp32 subnormals too)
  const uint32_t mantissa = (abs & 0x7fffffu) | 0x800000u;
  uint32_t q = mantissa >> shift;
  const uint32_t rem = mantissa & ((1u << shift) - 1);
  const uint32_t half = 1u << (shift - 1);
  if (rem > half || (rem == half && (q & 1u))) ++q;
  return static_cast<uint8_t>(sign | q);
}

// 1 / scale, correctly rounded on the host (IEEE division) and on the device
// (__frcp_rn): the same float on both.
ONECARD_HOST_DEVICE inline float ReciprocalScale(float scale) {
#if defined(__CUDA_ARCH__)
  return __frcp_rn(scale);
#else
  return 1.0f / scale;
#endif
}

// The code of x in a tensor stored with `scale` (the FP8 KV cache's form):
// FloatToE4m3(x * ReciprocalScale(scale)), a multiply instead of a division
// (a division a value made the CUDA RoPE + KV write kernel cost ~19 us more a
// layer inside a decode step on the H200, though it timed the same alone).
ONECARD_HOST_DEVICE inline uint8_t E4m3CodeOf(float x, float scale) {
  return FloatToE4m3(x * ReciprocalScale(scale));
}

// What x reads back as from a tensor stored in E4M3 with that scale:
// E4m3ToFloat(E4m3CodeOf(x, scale)) * scale (saturating at +-448 * scale).
ONECARD_HOST_DEVICE inline float RoundThroughE4m3(float x, float scale) {
  return E4m3ToFloat(E4m3CodeOf(x, scale)) * scale;
}

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_COMMON_FP8_H_
