// The portable row kernels of CpuLinearForward (cpu_linear_kernels.h): plain
// integer loops over each block, one fp32 sum a row in block order; and the
// packing of Q4_0 / Q4_1 rows (PackQ4Row, UnpackQ4Group).
// Tested by tests/engine/runtime/cpu/cpu_linear_test.cc.
#include <cstring>

#include "engine/common/fp16.h"
#include "engine/model/quant_blocks.h"
#include "engine/runtime/cpu/cpu_linear_kernels.h"

namespace onecard::engine::cpu_linear {
namespace {

int32_t Sum32(const XRow& x, int64_t b) { return x.sum16[2 * b] + x.sum16[2 * b + 1]; }

// Q4_0 (y = d (q - 8)) and Q4_1 (y = d q + m); whole groups of eight blocks
// are packed (PackQ4Row) and read back as blocks a group at a time.
template <typename Block, bool kMin>
float DotQ4(const uint8_t* w, const XRow& x, int64_t cols) {
  const auto* blocks = reinterpret_cast<const Block*>(w);
  const int64_t nb = cols / 32, nb8 = nb - nb % 8;
  Block group[8];
  float sum = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    if (b < nb8 && b % 8 == 0) {
      UnpackQ4Group(kMin, w + b * sizeof(Block), reinterpret_cast<uint8_t*>(group));
    }
    const Block& blk = b < nb8 ? group[b % 8] : blocks[b];
    const int8_t* q = x.q + b * 32;
    int32_t dot = 0;
    for (int j = 0; j < 16; ++j) dot += (blk.qs[j] & 15) * q[j] + (blk.qs[j] >> 4) * q[j + 16];
    if constexpr (kMin) {
      sum += HalfToFloat(blk.d) * x.d[b] * static_cast<float>(dot);
      sum += HalfToFloat(blk.m) * x.d[b] * static_cast<float>(Sum32(x, b));
    } else {
      sum += HalfToFloat(blk.d) * x.d[b] * static_cast<float>(dot - 8 * Sum32(x, b));
    }
  }
  return sum;
}

float DotQ8_0(const uint8_t* w, const XRow& x, int64_t cols) {
  const auto* blocks = reinterpret_cast<const BlockQ8_0*>(w);
  float sum = 0.0f;
  for (int64_t b = 0; b < cols / 32; ++b) {
    const BlockQ8_0& blk = blocks[b];
    const int8_t* q = x.q + b * 32;
    int32_t dot = 0;
    for (int j = 0; j < 32; ++j) dot += blk.qs[j] * q[j];
    sum += HalfToFloat(blk.d) * x.d[b] * static_cast<float>(dot);
  }
  return sum;
}

// Q4_K (qh null) and Q5_K: sub-block j of a super-block is the low (j even)
// or high nibbles of qs[32 (j / 2) ...], plus bit j of qh[l] as 16. The
// sub-blocks' scales and mins multiply their integer sums in integers; the
// super-block's activations (x.q + 256 b, scale x.d[b]) have one scale.
float DotK4K5(uint16_t d_bits, uint16_t dmin_bits, const uint8_t* scales, const uint8_t* qs,
              const uint8_t* qh, const XRowK& x, int64_t b) {
  int32_t sum_sc = 0, sum_m = 0;
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    Q4KScaleMin(scales, j, &sc, &m);
    const uint8_t* codes = qs + 32 * (j / 2);
    const int shift = 4 * (j % 2);
    const int8_t* q = x.q + b * 256 + j * 32;
    int32_t dot = 0;
    for (int l = 0; l < 32; ++l) {
      int code = (codes[l] >> shift) & 15;
      if (qh != nullptr) code += ((qh[l] >> j) & 1) << 4;
      dot += code * q[l];
    }
    sum_sc += sc * dot;
    sum_m += m * (x.sum16[16 * b + 2 * j] + x.sum16[16 * b + 2 * j + 1]);
  }
  const float dx = x.d[b];
  return HalfToFloat(d_bits) * dx * static_cast<float>(sum_sc) -
         HalfToFloat(dmin_bits) * dx * static_cast<float>(sum_m);
}

float DotQ4_K(const uint8_t* w, const XRowK& x, int64_t cols) {
  const auto* blocks = reinterpret_cast<const BlockQ4_K*>(w);
  float sum = 0.0f;
  for (int64_t i = 0; i < cols / 256; ++i) {
    const BlockQ4_K& blk = blocks[i];
    sum += DotK4K5(blk.d, blk.dmin, blk.scales, blk.qs, nullptr, x, i);
  }
  return sum;
}

float DotQ5_K(const uint8_t* w, const XRowK& x, int64_t cols) {
  const auto* blocks = reinterpret_cast<const BlockQ5_K*>(w);
  float sum = 0.0f;
  for (int64_t i = 0; i < cols / 256; ++i) {
    const BlockQ5_K& blk = blocks[i];
    sum += DotK4K5(blk.d, blk.dmin, blk.scales, blk.qs, blk.qh, x, i);
  }
  return sum;
}

// Element e of a Q6_K super-block: half n = e / 128, quarter t = (e % 128) / 32,
// l = e % 32; low bits in ql[64 n + l + 32 (t % 2)] (high nibble for t >= 2),
// high bits (qh[32 n + l] >> 2 t) & 3; scale e / 16; value d sc (q - 32). The
// 16 scales multiply their groups' integer sums in integers.
float DotQ6_K(const uint8_t* w, const XRowK& x, int64_t cols) {
  const auto* blocks = reinterpret_cast<const BlockQ6_K*>(w);
  float sum = 0.0f;
  for (int64_t i = 0; i < cols / 256; ++i) {
    const BlockQ6_K& blk = blocks[i];
    int32_t sum_sc = 0;
    for (int g = 0; g < 16; ++g) {  // 16 columns a scale
      const int8_t* q = x.q + i * 256 + g * 16;
      int32_t dot = 0;
      for (int k = 0; k < 16; ++k) {
        const int e = g * 16 + k;
        const int n = e / 128, t = (e % 128) / 32, l = e % 32;
        const uint8_t low = blk.ql[64 * n + l + 32 * (t % 2)];
        const int code =
            ((t >= 2 ? low >> 4 : low) & 15) | (((blk.qh[32 * n + l] >> (2 * t)) & 3) << 4);
        dot += code * q[k];
      }
      sum_sc += blk.scales[g] * (dot - 32 * x.sum16[i * 16 + g]);
    }
    sum += HalfToFloat(blk.d) * x.d[i] * static_cast<float>(sum_sc);
  }
  return sum;
}

// A one-row kernel over n rows, one after the other.
template <typename X, float (*F)(const uint8_t*, const X&, int64_t)>
void Rows(const uint8_t* w, const X* x, int n, int64_t cols, float* out) {
  for (int r = 0; r < n; ++r) out[r] = F(w, x[r], cols);
}

}  // namespace

namespace {

// Code l (0..31) of a Q4 block's 16 bytes of nibbles.
uint8_t Code(const uint8_t* qs, int l) { return l < 16 ? qs[l] & 15 : qs[l - 16] >> 4; }

}  // namespace

void PackQ4Row(bool with_min, uint8_t* row, int64_t cols) {
  const int bytes = with_min ? 20 : 18, codes_at = with_min ? 4 : 2;
  const int64_t nb = cols / 32, nb8 = nb - nb % 8;
  uint8_t group[160];
  for (int64_t b0 = 0; b0 < nb8; b0 += 8) {
    uint8_t* blocks = row + b0 * bytes;
    for (int j = 0; j < 8; ++j) {
      std::memcpy(group + 2 * j, blocks + j * bytes, 2);
      if (with_min) std::memcpy(group + 16 + 2 * j, blocks + j * bytes + 2, 2);
    }
    uint8_t* codes = group + (with_min ? 32 : 16);
    for (int c = 0; c < 4; ++c) {
      const uint8_t* lo = blocks + 2 * c * bytes + codes_at;
      const uint8_t* hi = lo + bytes;
      for (int l = 0; l < 32; ++l) {
        codes[32 * c + l] = static_cast<uint8_t>(Code(lo, l) | Code(hi, l) << 4);
      }
    }
    std::memcpy(blocks, group, 8 * bytes);
  }
}

void UnpackQ4Group(bool with_min, const uint8_t* group, uint8_t* blocks) {
  const int bytes = with_min ? 20 : 18, codes_at = with_min ? 4 : 2;
  const uint8_t* codes = group + (with_min ? 32 : 16);
  for (int j = 0; j < 8; ++j) {
    uint8_t* blk = blocks + j * bytes;
    std::memcpy(blk, group + 2 * j, 2);
    if (with_min) std::memcpy(blk + 2, group + 16 + 2 * j, 2);
    const uint8_t* chunk = codes + 32 * (j / 2);
    const int shift = 4 * (j % 2);
    for (int l = 0; l < 16; ++l) {
      blk[codes_at + l] =
          static_cast<uint8_t>(((chunk[l] >> shift) & 15) | ((chunk[l + 16] >> shift) & 15) << 4);
    }
  }
}

const Kernels& GenericKernels() {
  static const Kernels k{Rows<XRow, DotQ4<BlockQ4_0, false>>,
                         Rows<XRow, DotQ4<BlockQ4_1, true>>,
                         Rows<XRow, DotQ8_0>,
                         Rows<XRowK, DotQ4_K>,
                         Rows<XRowK, DotQ5_K>,
                         Rows<XRowK, DotQ6_K>};
  return k;
}

}  // namespace onecard::engine::cpu_linear
