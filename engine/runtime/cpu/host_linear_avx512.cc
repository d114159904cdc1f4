// The AVX-512 kernels of HostLinearForward (host_linear_kernels.h): 4-bit
// weights through host_linear_int4_avx512.inc with fp32 multiply-adds, and
// BF16 weights. This file is compiled for AVX-512 alone (see CMakeLists.txt)
// and includes no header with inline code shared elsewhere; it computes the
// layout's offsets itself.
//
// 4-bit lines: per 64-byte line, seven shifts and eight vpermps turn the low 4
// bits of every dword into q - 8 in fp32 (no mask, no conversion), then eight
// multiply-adds a row of x (in fp32 lanes).
// BF16: 1, 2 or 4 weight rows at a time, a 64-byte load a row giving its even
// (shifted up) and odd (masked) columns in fp32.
// Tested by tests/engine/runtime/cpu/host_linear_test.cc.
#include <immintrin.h>

#include <cstdint>

#include "engine/runtime/cpu/host_linear_kernels.h"

namespace onecard::engine::host_linear {
namespace {

// Nibbles 2 NP (row gr) and 2 NP + 1 (row gr + 8) of P lines against x
// vector kInt4NibbleColumn[2 NP] of rows [R0, R0 + R).
template <int RT, int R, int R0, int P, int NP>
inline void NibblePair(const __m512i (&lines)[P], const float* xk, __m512 (&acc)[P][2][R]) {
  const __m512 values = _mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7);
  __m512 x[R];
  for (int r = 0; r < R; ++r) {
    x[r] = _mm512_loadu_ps(xk + (kInt4NibbleColumn[2 * NP] * RT + R0 + r) * kLanes);
  }
  for (int pp = 0; pp < P; ++pp) {
    // vpermps reads the low 4 bits of each index: code q picks q - 8.
    const __m512i lo = NP == 0 ? lines[pp] : _mm512_srli_epi32(lines[pp], 8 * NP);
    const __m512 q0 = _mm512_permutexvar_ps(lo, values);
    const __m512 q1 = _mm512_permutexvar_ps(_mm512_srli_epi32(lines[pp], 8 * NP + 4), values);
    for (int r = 0; r < R; ++r) {
      acc[pp][0][r] = _mm512_fmadd_ps(q0, x[r], acc[pp][0][r]);
      acc[pp][1][r] = _mm512_fmadd_ps(q1, x[r], acc[pp][1][r]);
    }
  }
}

struct Lines {
  template <int RT, int R, int R0, int P>
  static void Add(const Int4Args& a, int64_t kt, const __m512i (&lines)[P],
                  __m512 (&acc)[P][2][R]) {
    const float* xk = a.x_lanes + kt * 4 * RT * kLanes;  // [4 (j)][RT][16]
    NibblePair<RT, R, R0, P, 0>(lines, xk, acc);
    NibblePair<RT, R, R0, P, 1>(lines, xk, acc);
    NibblePair<RT, R, R0, P, 2>(lines, xk, acc);
    NibblePair<RT, R, R0, P, 3>(lines, xk, acc);
  }
};

#include "engine/runtime/cpu/host_linear_int4_avx512.inc"

// BF16 rows [o, o + W): even and odd columns' sums a row of x, summed at the end.
template <int R, int W>
void Bf16RowBlock(const Bf16Args& a, int64_t o, float* y) {
  __m512 even[W][R], odd[W][R];
  for (int w = 0; w < W; ++w) {
    for (int r = 0; r < R; ++r) even[w][r] = odd[w][r] = _mm512_setzero_ps();
  }
  const __m512i high = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
  const int64_t runs = (a.k + kBf16RunCols - 1) / kBf16RunCols;
  const int tail = static_cast<int>(a.k % kBf16RunCols);
  for (int64_t c = 0; c < runs; ++c) {
    const float* xc = a.x_lanes + c * 2 * R * kLanes;
    for (int w = 0; w < W; ++w) {
      const uint16_t* p = a.w + (o + w) * a.k + c * kBf16RunCols;
      const __m512i v = c + 1 < runs || tail == 0
                            ? _mm512_loadu_si512(p)
                            : _mm512_maskz_loadu_epi16((__mmask32{1} << tail) - 1, p);
      const __m512 ev = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
      const __m512 od = _mm512_castsi512_ps(_mm512_and_si512(v, high));
      for (int r = 0; r < R; ++r) {
        even[w][r] = _mm512_fmadd_ps(ev, _mm512_loadu_ps(xc + r * kLanes), even[w][r]);
        odd[w][r] = _mm512_fmadd_ps(od, _mm512_loadu_ps(xc + (R + r) * kLanes), odd[w][r]);
      }
    }
  }
  for (int w = 0; w < W; ++w) {
    for (int r = 0; r < R; ++r) {
      y[r * a.y_stride + o + w] = _mm512_reduce_add_ps(_mm512_add_ps(even[w][r], odd[w][r]));
    }
  }
}

template <int R>
void Bf16TilesFor(const Bf16Args& a, int64_t tile_begin, int64_t tile_end) {
  constexpr int kW = R <= 2 ? 4 : R <= 4 ? 2 : 1;  // weight rows a pass: <= 16 accumulators
  const int64_t end = tile_end * kTileRows < a.n ? tile_end * kTileRows : a.n;
  int64_t o = tile_begin * kTileRows;
  for (; o + kW <= end; o += kW) Bf16RowBlock<R, kW>(a, o, a.y);
  for (; o < end; ++o) Bf16RowBlock<R, 1>(a, o, a.y);
}

constexpr Bf16Tiles kBf16ByRows[kMaxRows] = {&Bf16TilesFor<1>, &Bf16TilesFor<2>, &Bf16TilesFor<3>,
                                             &Bf16TilesFor<4>, &Bf16TilesFor<5>, &Bf16TilesFor<6>,
                                             &Bf16TilesFor<7>, &Bf16TilesFor<8>};

void Bf16ForRows(const Bf16Args& a, int64_t tile_begin, int64_t tile_end) {
  kBf16ByRows[a.rows - 1](a, tile_begin, tile_end);
}

const Kernels kAvx512Kernels = {
    .int4 = &Int4ForRows, .bf16 = &Bf16ForRows, .int4_x = XLayout::kF32Lanes};

}  // namespace

const Kernels& Avx512Kernels() { return kAvx512Kernels; }

}  // namespace onecard::engine::host_linear
