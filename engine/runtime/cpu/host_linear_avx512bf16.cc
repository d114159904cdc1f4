// The AVX-512 BF16 kernels of HostLinearForward (host_linear_kernels.h):
// 4-bit weights through host_linear_int4_avx512.inc, and BF16 weights, with
// BF16 dot products (vdpbf16ps: two exact products a lane; x as BF16 pairs,
// half the bytes of fp32 lanes, so that 8 rows of x stream from L2 at the
// weights' pace). This file is compiled for AVX-512 with
// AVX512_BF16 alone (see CMakeLists.txt) and includes no header with inline
// code shared elsewhere.
//
// 4-bit lines: (line >> 4 S) as 16-bit indices picks, with vpermw, the BF16
// value q - 8 (exact) of nibble S in each dword's low half and of nibble
// S + 4 in its high half: the codes of one row (gr for even S, gr + 8 for
// odd S) at columns j and j + 1 (j = 0 for S < 2, else 2) of the lane's four.
// One vdpbf16ps against the BF16 pairs (x[j], x[j + 1]) adds both products.
// Per 64-byte line: three shifts, four vpermw, four dot products a row of x.
// Tested by tests/engine/runtime/cpu/host_linear_test.cc.
#include <immintrin.h>

#include <cstdint>

#include "engine/runtime/cpu/host_linear_kernels.h"

namespace onecard::engine::host_linear {
namespace {

// Nibbles S and S + 4 of P lines (row gr + 8 (S & 1), columns j, j + 1 with
// j = 2 (S >> 1)) against the x pairs of rows [R0, R0 + R).
template <int RT, int R, int R0, int P, int S>
inline void Quarter(const __m512i (&lines)[P], const uint32_t* xk, __m512 (&acc)[P][2][R]) {
  const __m512i table = _mm512_load_si512(kInt4CodeBf16);
  __m512bh x[R];
  for (int r = 0; r < R; ++r) {
    x[r] = reinterpret_cast<__m512bh>(_mm512_loadu_si512(xk + ((S >> 1) * RT + R0 + r) * kLanes));
  }
  for (int pp = 0; pp < P; ++pp) {
    const __m512i idx = S == 0 ? lines[pp] : _mm512_srli_epi16(lines[pp], 4 * S);
    const __m512bh q = reinterpret_cast<__m512bh>(_mm512_permutexvar_epi16(idx, table));
    for (int r = 0; r < R; ++r) acc[pp][S & 1][r] = _mm512_dpbf16_ps(acc[pp][S & 1][r], q, x[r]);
  }
}

struct Lines {
  template <int RT, int R, int R0, int P>
  static void Add(const Int4Args& a, int64_t kt, const __m512i (&lines)[P],
                  __m512 (&acc)[P][2][R]) {
    const uint32_t* xk = a.x_pairs + kt * 2 * RT * kLanes;  // [2 (j / 2)][RT][16]
    Quarter<RT, R, R0, P, 0>(lines, xk, acc);
    Quarter<RT, R, R0, P, 1>(lines, xk, acc);
    Quarter<RT, R, R0, P, 2>(lines, xk, acc);
    Quarter<RT, R, R0, P, 3>(lines, xk, acc);
  }
};

#include "engine/runtime/cpu/host_linear_int4_avx512.inc"

// Adds run c (32 columns; with kTail the `tail` columns of the last run) of
// BF16 rows [o, o + W) into their dot products with each row of x.
template <int R, int W, bool kTail>
inline void DotRun(const Bf16Args& a, int64_t o, int64_t c, int tail, __m512 (&acc)[W][R]) {
  __m512bh x[R];
  for (int r = 0; r < R; ++r) {
    x[r] = reinterpret_cast<__m512bh>(_mm512_loadu_si512(a.x_pairs + (c * R + r) * kLanes));
  }
  for (int w = 0; w < W; ++w) {
    const uint16_t* p = a.w + (o + w) * a.k + c * kBf16RunCols;
    const __m512i v =
        kTail ? _mm512_maskz_loadu_epi16((__mmask32{1} << tail) - 1, p) : _mm512_loadu_si512(p);
    for (int r = 0; r < R; ++r) {
      acc[w][r] = _mm512_dpbf16_ps(acc[w][r], reinterpret_cast<__m512bh>(v), x[r]);
    }
  }
}

// BF16 rows [o, o + W) against every row of x.
template <int R, int W>
void DotRowBlock(const Bf16Args& a, int64_t o) {
  __m512 acc[W][R];
  for (int w = 0; w < W; ++w) {
    for (int r = 0; r < R; ++r) acc[w][r] = _mm512_setzero_ps();
  }
  const int64_t full = a.k / kBf16RunCols;
  const int tail = static_cast<int>(a.k % kBf16RunCols);
  for (int64_t c = 0; c < full; ++c) DotRun<R, W, false>(a, o, c, 0, acc);
  if (tail != 0) DotRun<R, W, true>(a, o, full, tail, acc);
  for (int w = 0; w < W; ++w) {
    for (int r = 0; r < R; ++r) a.y[r * a.y_stride + o + w] = _mm512_reduce_add_ps(acc[w][r]);
  }
}

template <int R>
void Bf16TilesFor(const Bf16Args& a, int64_t tile_begin, int64_t tile_end) {
  constexpr int kW = R <= 2 ? 8 / R : R <= 4 ? 4 : 2;  // weight rows a pass: <= 16 sums
  const int64_t end = tile_end * kTileRows < a.n ? tile_end * kTileRows : a.n;
  int64_t o = tile_begin * kTileRows;
  for (; o + kW <= end; o += kW) DotRowBlock<R, kW>(a, o);
  for (; o < end; ++o) DotRowBlock<R, 1>(a, o);
}

constexpr Bf16Tiles kBf16ByRows[kMaxRows] = {&Bf16TilesFor<1>, &Bf16TilesFor<2>, &Bf16TilesFor<3>,
                                             &Bf16TilesFor<4>, &Bf16TilesFor<5>, &Bf16TilesFor<6>,
                                             &Bf16TilesFor<7>, &Bf16TilesFor<8>};

void Bf16ForRows(const Bf16Args& a, int64_t tile_begin, int64_t tile_end) {
  kBf16ByRows[a.rows - 1](a, tile_begin, tile_end);
}

}  // namespace

const Kernels& Avx512Bf16Kernels() {
  static const Kernels kernels = {.int4 = &Int4ForRows,
                                  .bf16 = &Bf16ForRows,
                                  .int4_layout = XLayout::kBf16Pairs,
                                  .int4_x = Avx512Int4PairsX(),
                                  .bf16_layout = XLayout::kBf16Pairs,
                                  .bf16_x = Avx512Bf16PairsX()};
  return kernels;
}

}  // namespace onecard::engine::host_linear
