// IEEE binary16 (fp16) <-> fp32 conversions and float bit casts, on the host
// and the device: for the GGUF block layouts (engine/model/quant_blocks.h)
// and the 4-bit weights' scales (engine/kernels/int4_*). Tested by
// tests/engine/model/dequantize_test.cc and tests/engine/kernels/int4_matrix_test.cc.
#ifndef ONECARD_ENGINE_COMMON_FP16_H_
#define ONECARD_ENGINE_COMMON_FP16_H_

#include <cstdint>
#include <cstring>

#include "engine/common/host_device.h"

namespace onecard::engine {

ONECARD_HOST_DEVICE inline float FloatFromBits(uint32_t bits) {
  float f;
  memcpy(&f, &bits, sizeof(f));
  return f;
}

ONECARD_HOST_DEVICE inline uint32_t BitsFromFloat(float f) {
  uint32_t bits;
  memcpy(&bits, &f, sizeof(bits));
  return bits;
}

// IEEE binary16 -> fp32, exact (subnormals, infinities and NaNs included).
ONECARD_HOST_DEVICE inline float HalfToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1f) return FloatFromBits(sign | 0x7f800000u | (mantissa << 13));
  if (exponent != 0) return FloatFromBits(sign | ((exponent + 112) << 23) | (mantissa << 13));
  if (mantissa == 0) return FloatFromBits(sign);
  exponent = 113;  // subnormal: normalize
  while ((mantissa & 0x400u) == 0) {
    mantissa <<= 1;
    --exponent;
  }
  return FloatFromBits(sign | (exponent << 23) | ((mantissa & 0x3ffu) << 13));
}

// fp32 -> IEEE binary16, round to nearest even; overflow gives infinity.
ONECARD_HOST_DEVICE inline uint16_t FloatToHalf(float f) {
  uint32_t bits = BitsFromFloat(f);
  uint32_t sign = (bits >> 16) & 0x8000u;
  uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520
  if (abs >= 0x38800000u) {                                              // normal half
    uint32_t odd = (abs >> 13) & 1u;
    return static_cast<uint16_t>(sign | ((abs + 0xc8000fffu + odd) >> 13));
  }
  uint32_t exponent = abs >> 23;
  if (exponent < 102) return static_cast<uint16_t>(sign);  // below 2^-25: zero
  uint32_t mantissa = (abs & 0x7fffffu) | 0x800000u;
  uint32_t shift = 126 - exponent;  // 14..24
  uint32_t q = mantissa >> shift;
  uint32_t rem = mantissa & ((1u << shift) - 1);
  uint32_t half = 1u << (shift - 1);
  if (rem > half || (rem == half && (q & 1u))) ++q;
  return static_cast<uint16_t>(sign | q);
}

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_COMMON_FP16_H_
