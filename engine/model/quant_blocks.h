// The GGUF (ggml) quantized block layouts, defined once for the CPU loaders
// and the CUDA kernels: structs with static_assert'ed sizes, elements and bytes
// per block of every DType, fp16 / bf16 <-> fp32 conversions and the per-block
// dequantizers (all host/device inline). Block layouts and the order of the
// dequantization arithmetic follow ggml (ggml-common.h, ggml-quants.c).
// Tested by tests/engine/model/dequantize_test.cc against the gguf package.
#ifndef ONECARD_ENGINE_MODEL_QUANT_BLOCKS_H_
#define ONECARD_ENGINE_MODEL_QUANT_BLOCKS_H_

#include <cstdint>
#include <cstring>

#include "engine/common/dtype.h"
#include "engine/common/fp16.h"
#include "engine/common/host_device.h"

namespace onecard::engine {

inline constexpr int kQuantBlock32 = 32;      // Q8_0, Q4_0, Q4_1
inline constexpr int kQuantSuperBlock = 256;  // QK_K: Q4_K, Q5_K, Q6_K

// fp16 values are stored as their IEEE binary16 bits.
struct BlockQ8_0 {
  static constexpr int kElements = kQuantBlock32;
  uint16_t d;                // scale
  int8_t qs[kQuantBlock32];  // y = d * q
};
static_assert(sizeof(BlockQ8_0) == 34, "Q8_0 block is 34 bytes");

struct BlockQ4_0 {
  static constexpr int kElements = kQuantBlock32;
  uint16_t d;                     // scale
  uint8_t qs[kQuantBlock32 / 2];  // y[j] = d * (lo(qs[j]) - 8), y[j+16] = hi
};
static_assert(sizeof(BlockQ4_0) == 18, "Q4_0 block is 18 bytes");

struct BlockQ4_1 {
  static constexpr int kElements = kQuantBlock32;
  uint16_t d;                     // scale
  uint16_t m;                     // min
  uint8_t qs[kQuantBlock32 / 2];  // y[j] = d * lo(qs[j]) + m, y[j+16] = hi
};
static_assert(sizeof(BlockQ4_1) == 20, "Q4_1 block is 20 bytes");

// 8 sub-blocks of 32, each with a 6-bit scale and a 6-bit min packed in
// scales[12]; y = d * sc * q - dmin * m.
struct BlockQ4_K {
  static constexpr int kElements = kQuantSuperBlock;
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qs[kQuantSuperBlock / 2];
};
static_assert(sizeof(BlockQ4_K) == 144, "Q4_K block is 144 bytes");

// Q4_K's scales and codes plus a fifth bit of each code in qh (bit 2 j of
// qh[l] for code l of sub-block 2 j, bit 2 j + 1 for sub-block 2 j + 1);
// y = d * sc * q - dmin * m, q in 0..31.
struct BlockQ5_K {
  static constexpr int kElements = kQuantSuperBlock;
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qh[kQuantSuperBlock / 8];
  uint8_t qs[kQuantSuperBlock / 2];
};
static_assert(sizeof(BlockQ5_K) == 176, "Q5_K block is 176 bytes");

// 16 sub-blocks of 16 with int8 scales; 6-bit quants split in low 4 bits (ql)
// and high 2 bits (qh); y = d * scale * (q - 32).
struct BlockQ6_K {
  static constexpr int kElements = kQuantSuperBlock;
  uint8_t ql[kQuantSuperBlock / 2];
  uint8_t qh[kQuantSuperBlock / 4];
  int8_t scales[kQuantSuperBlock / 16];
  uint16_t d;
};
static_assert(sizeof(BlockQ6_K) == 210, "Q6_K block is 210 bytes");

// Elements in one block of `dtype` (1 for plain element types).
ONECARD_HOST_DEVICE constexpr int64_t BlockElements(DType dtype) {
  switch (dtype) {
    case DType::kQ8_0:
    case DType::kQ4_0:
    case DType::kQ4_1:
      return kQuantBlock32;
    case DType::kQ4_K:
    case DType::kQ5_K:
    case DType::kQ6_K:
      return kQuantSuperBlock;
    default:
      return 1;
  }
}

// Bytes of one block of `dtype` (the element size for plain types).
ONECARD_HOST_DEVICE constexpr int64_t BlockBytes(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return 4;
    case DType::kF16:
      return 2;
    case DType::kBF16:
      return 2;
    case DType::kQ8_0:
      return sizeof(BlockQ8_0);
    case DType::kQ4_0:
      return sizeof(BlockQ4_0);
    case DType::kQ4_1:
      return sizeof(BlockQ4_1);
    case DType::kQ4_K:
      return sizeof(BlockQ4_K);
    case DType::kQ5_K:
      return sizeof(BlockQ5_K);
    case DType::kQ6_K:
      return sizeof(BlockQ6_K);
    case DType::kI32:
      return 4;
    case DType::kI64:
      return 8;
    case DType::kU8:
    case DType::kF8E4M3:
      return 1;
  }
  return 0;
}

ONECARD_HOST_DEVICE inline float Bf16ToFloat(uint16_t b) {
  return FloatFromBits(static_cast<uint32_t>(b) << 16);
}

// fp32 -> bf16, round to nearest even; NaNs stay quiet NaNs (as ggml).
ONECARD_HOST_DEVICE inline uint16_t FloatToBf16(float f) {
  uint32_t bits = BitsFromFloat(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) {
    return static_cast<uint16_t>((bits >> 16) | 0x40u);
  }
  return static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

// Dequantizers: one block to BlockElements() floats at y.
ONECARD_HOST_DEVICE inline void DequantizeBlock(const BlockQ8_0& b, float* y) {
  float d = HalfToFloat(b.d);
  for (int j = 0; j < kQuantBlock32; ++j) y[j] = static_cast<float>(b.qs[j]) * d;
}

ONECARD_HOST_DEVICE inline void DequantizeBlock(const BlockQ4_0& b, float* y) {
  float d = HalfToFloat(b.d);
  for (int j = 0; j < kQuantBlock32 / 2; ++j) {
    y[j] = d * static_cast<float>((b.qs[j] & 0x0f) - 8);
    y[j + kQuantBlock32 / 2] = d * static_cast<float>((b.qs[j] >> 4) - 8);
  }
}

ONECARD_HOST_DEVICE inline void DequantizeBlock(const BlockQ4_1& b, float* y) {
  float d = HalfToFloat(b.d);
  float m = HalfToFloat(b.m);
  for (int j = 0; j < kQuantBlock32 / 2; ++j) {
    y[j] = d * static_cast<float>(b.qs[j] & 0x0f) + m;
    y[j + kQuantBlock32 / 2] = d * static_cast<float>(b.qs[j] >> 4) + m;
  }
}

// Sub-block j (0..7) of a Q4_K block: its 6-bit scale and min.
ONECARD_HOST_DEVICE inline void Q4KScaleMin(const uint8_t* scales, int j, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = scales[j] & 63;
    *m = scales[j + 4] & 63;
  } else {
    *sc = (scales[j + 4] & 0x0f) | ((scales[j - 4] >> 6) << 4);
    *m = (scales[j + 4] >> 4) | ((scales[j] >> 6) << 4);
  }
}

// Q4_K and Q5_K super-blocks (qh: Q5_K's fifth bits, nullptr for Q4_K), in
// the order of ggml's dequantize_row_q4_K / dequantize_row_q5_K.
ONECARD_HOST_DEVICE inline void DequantizeK4K5(uint16_t d_bits, uint16_t dmin_bits,
                                               const uint8_t* scales, const uint8_t* q,
                                               const uint8_t* qh, float* y) {
  float d = HalfToFloat(d_bits);
  float dmin = HalfToFloat(dmin_bits);
  for (int j = 0; j < kQuantSuperBlock / 64; ++j) {  // 64 values: two sub-blocks
    uint8_t sc, m;
    Q4KScaleMin(scales, 2 * j, &sc, &m);
    float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(m);
    Q4KScaleMin(scales, 2 * j + 1, &sc, &m);
    float d2 = d * static_cast<float>(sc), m2 = dmin * static_cast<float>(m);
    const uint8_t lo_bit = static_cast<uint8_t>(1u << (2 * j)), hi_bit = lo_bit << 1;
    for (int l = 0; l < 32; ++l) {
      const int high = qh != nullptr && (qh[l] & lo_bit) ? 16 : 0;
      y[l] = d1 * static_cast<float>((q[l] & 0x0f) + high) - m1;
    }
    for (int l = 0; l < 32; ++l) {
      const int high = qh != nullptr && (qh[l] & hi_bit) ? 16 : 0;
      y[32 + l] = d2 * static_cast<float>((q[l] >> 4) + high) - m2;
    }
    q += 32;
    y += 64;
  }
}

ONECARD_HOST_DEVICE inline void DequantizeBlock(const BlockQ4_K& b, float* y) {
  DequantizeK4K5(b.d, b.dmin, b.scales, b.qs, nullptr, y);
}

ONECARD_HOST_DEVICE inline void DequantizeBlock(const BlockQ5_K& b, float* y) {
  DequantizeK4K5(b.d, b.dmin, b.scales, b.qs, b.qh, y);
}

ONECARD_HOST_DEVICE inline void DequantizeBlock(const BlockQ6_K& b, float* y) {
  float d = HalfToFloat(b.d);
  const uint8_t* ql = b.ql;
  const uint8_t* qh = b.qh;
  const int8_t* sc = b.scales;
  for (int n = 0; n < kQuantSuperBlock / 128; ++n) {
    for (int l = 0; l < 32; ++l) {
      int is = l / 16;
      int q1 = ((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4)) - 32;
      int q2 = ((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32;
      int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[l] = d * static_cast<float>(sc[is]) * static_cast<float>(q1);
      y[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
      y[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
      y[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
    }
    y += 128;
    ql += 64;
    qh += 32;
    sc += 8;
  }
}

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_MODEL_QUANT_BLOCKS_H_
