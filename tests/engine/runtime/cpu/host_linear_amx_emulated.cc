// The AMX kernels of HostLinearForward (engine/runtime/cpu/host_linear_amx.inc)
// over an emulated tile unit, for host_linear_amx_test.cc. This file alone is
// compiled for AVX-512 BF16 (the kernels' decoding and x layouts), so the
// test's own code, its static initialization among it, runs on any processor
// and skips where this one's cannot. The emulation follows the instructions'
// definitions in Intel's SDM: LDTILECFG's rows and bytes a row, TILELOADD /
// TILESTORED row by row at a stride, and TDPBF16PS:
//   for m < rows(C), k < colsb(A) / 4, n < colsb(C) / 4:
//     C[m][n] += A[m].bf16[2k] * B[k].bf16[2n];
//     C[m][n] += A[m].bf16[2k + 1] * B[k].bf16[2n + 1]
// in fp32, round to nearest even, BF16 denormal inputs read as zero and
// denormal results written as zero.
#include "tests/engine/runtime/cpu/host_linear_amx_emulated.h"

#include <immintrin.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>

#include "engine/kernels/int4_matrix.h"
#include "engine/runtime/cpu/cpu_linear.h"
#include "engine/runtime/cpu/host_linear.h"

namespace onecard::engine::host_linear {
namespace {

#include "engine/runtime/cpu/host_linear_amx.inc"

// A tile register: up to 16 rows of 64 bytes, as configured.
struct Tile {
  int rows = 0;
  int colsb = 0;
  uint8_t bytes[16][64];
};

// Eight tile registers, configured per thread.
struct EmulatedTiles {
  static inline thread_local Tile tiles[8];

  static void Configure(const TileConfig& config) {
    for (int t = 0; t < 8; ++t) {
      tiles[t].rows = config.tile_rows[t];
      tiles[t].colsb = config.colsb[t];
      std::memset(tiles[t].bytes, 0, sizeof(tiles[t].bytes));
    }
  }
  static void Release() {
    for (Tile& t : tiles) t = Tile{};
  }
  template <int T>
  static void Zero() {
    std::memset(tiles[T].bytes, 0, sizeof(tiles[T].bytes));
  }
  template <int T>
  static void Load(const void* base, int64_t stride) {
    for (int r = 0; r < tiles[T].rows; ++r) {
      std::memcpy(tiles[T].bytes[r], static_cast<const uint8_t*>(base) + r * stride,
                  tiles[T].colsb);
    }
  }
  template <int T>
  static void Store(void* base, int64_t stride) {
    for (int r = 0; r < tiles[T].rows; ++r) {
      std::memcpy(static_cast<uint8_t*>(base) + r * stride, tiles[T].bytes[r], tiles[T].colsb);
    }
  }
  // A BF16 element as fp32, denormals as zero.
  static float Bf16(const uint8_t* p) {
    uint16_t h;
    std::memcpy(&h, p, 2);
    if ((h & 0x7f80) == 0) h &= 0x8000;
    const uint32_t bits = uint32_t{h} << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  static float FlushDenormal(float f) { return std::fpclassify(f) == FP_SUBNORMAL ? 0.0f * f : f; }
  template <int C, int A, int B>
  static void Dot() {
    Tile& c = tiles[C];
    const Tile& a = tiles[A];
    const Tile& b = tiles[B];
    for (int m = 0; m < c.rows; ++m) {
      for (int k = 0; k < a.colsb / 4; ++k) {
        for (int n = 0; n < c.colsb / 4; ++n) {
          float acc;
          std::memcpy(&acc, c.bytes[m] + 4 * n, 4);
          const float p0 = Bf16(a.bytes[m] + 4 * k) * Bf16(b.bytes[k] + 4 * n);  // exact
          acc = FlushDenormal(acc + p0);
          const float p1 = Bf16(a.bytes[m] + 4 * k + 2) * Bf16(b.bytes[k] + 4 * n + 2);
          acc = FlushDenormal(acc + p1);
          std::memcpy(c.bytes[m] + 4 * n, &acc, 4);
        }
      }
    }
  }
};

}  // namespace

const Kernels& EmulatedAmxKernels() {
  static const Kernels kernels = AmxKernelsOver<EmulatedTiles>();
  return kernels;
}

}  // namespace onecard::engine::host_linear
