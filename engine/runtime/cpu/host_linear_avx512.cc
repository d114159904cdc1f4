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
// Also the x layouts of both AVX-512 sets: sixteen columns a step (a gather
// for act order), rounded to BF16 with integer operations (FloatToBf16's
// result, NaN included), then permuted into lanes or packed into pairs.
// Tested by tests/engine/runtime/cpu/host_linear_test.cc.
#include <immintrin.h>

#include <cstdint>

#include "engine/runtime/cpu/host_linear_kernels.h"

namespace onecard::engine::host_linear {
namespace {

// BF16 bits (in each dword's low half) of v rounded to nearest even, NaN
// kept a quiet NaN: FloatToBf16 (engine/kernels/bf16.h) sixteen at a time.
inline __m512i RoundToBf16(__m512 v) {
  const __m512i u = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  const __m512i bias = _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb);
  const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(u, bias), 16);
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                                _mm512_set1_epi32(0x7f800000));
  return _mm512_mask_or_epi32(rounded, nan, _mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
}

// The fp32 value of BF16 bits in each dword's low half.
inline __m512 Bf16Value(__m512i bits) { return _mm512_castsi512_ps(_mm512_slli_epi32(bits, 16)); }

// Row r's 16 stored columns from col (all below k), gathered, as BF16 bits.
inline __m512i Bits16(const XArgs& a, int r, int64_t col) {
  const float* row = a.x + r * a.k;
  const __m512 v = a.columns == nullptr
                       ? _mm512_loadu_ps(row + col)
                       : _mm512_i32gather_ps(_mm512_loadu_si512(a.columns + col), row, 4);
  return RoundToBf16(v);
}

// Row r's k tile kt as BF16 bits (columns 16 i .. 16 i + 15 in bits[i]), and
// its half sums.
inline void TileBits(const XArgs& a, int r, int64_t kt, __m512i (&bits)[4]) {
  for (int i = 0; i < 4; ++i) bits[i] = Bits16(a, r, kt * kTileCols + 16 * i);
  if (a.half_sums == nullptr) return;
  for (int h = 0; h < 2; ++h) {
    a.half_sums[r * (a.k / 32) + 2 * kt + h] =
        _mm512_reduce_add_ps(_mm512_add_ps(Bf16Value(bits[2 * h]), Bf16Value(bits[2 * h + 1])));
  }
}

// 4-bit x in fp32 lanes: lane d = 4 t + i of vector j is column 16 i + 4 t + j,
// element 4 t + j of bits[i].
void Int4LanesX(const XArgs& a, int64_t begin, int64_t end) {
  // Element 4 t + j of bits[i] for i even (first source), bits[i] for i odd (second, + 16).
  const __m512i base = _mm512_setr_epi32(0, 16, 0, 16, 4, 20, 4, 20, 8, 24, 8, 24, 12, 28, 12, 28);
  for (int64_t kt = begin; kt < end; ++kt) {
    for (int r = 0; r < a.rows; ++r) {
      __m512i bits[4];
      TileBits(a, r, kt, bits);
      for (int j = 0; j < 4; ++j) {
        const __m512i idx = _mm512_add_epi32(base, _mm512_set1_epi32(j));
        const __m512i low = _mm512_permutex2var_epi32(bits[0], idx, bits[1]);   // i < 2
        const __m512i high = _mm512_permutex2var_epi32(bits[2], idx, bits[3]);  // i >= 2
        const __m512i lanes = _mm512_mask_blend_epi32(0xCCCC, low, high);
        _mm512_storeu_ps(a.lanes + ((kt * 4 + j) * a.rows + r) * kLanes, Bf16Value(lanes));
      }
    }
  }
}

// 4-bit x as BF16 pairs: dword d = 4 t + i of pair vector p holds columns
// 16 i + 4 t + 2 p and + 1, that is pair m = 8 i + 2 t + p of the tile's
// 32 column pairs.
void Int4PairsX(const XArgs& a, int64_t begin, int64_t end) {
  const __m512i idx = _mm512_setr_epi32(0, 8, 16, 24, 2, 10, 18, 26, 4, 12, 20, 28, 6, 14, 22, 30);
  for (int64_t kt = begin; kt < end; ++kt) {
    for (int r = 0; r < a.rows; ++r) {
      __m512i bits[4];
      TileBits(a, r, kt, bits);
      // Pairs 0..15 and 16..31: the bits packed two to a dword, in column order.
      const __m512i lo = _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi32_epi16(bits[0])),
                                            _mm512_cvtepi32_epi16(bits[1]), 1);
      const __m512i hi = _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi32_epi16(bits[2])),
                                            _mm512_cvtepi32_epi16(bits[3]), 1);
      for (int p = 0; p < 2; ++p) {
        _mm512_storeu_si512(
            a.pairs + ((kt * 2 + p) * a.rows + r) * kLanes,
            _mm512_permutex2var_epi32(lo, _mm512_add_epi32(idx, _mm512_set1_epi32(p)), hi));
      }
    }
  }
}

// Row r's columns 32 c + 16 h .. + 15 as BF16 bits, zero past k.
inline __m512i RunBits(const XArgs& a, int r, int64_t c, int h) {
  const int64_t col = c * kBf16RunCols + 16 * h;
  const int64_t left = a.k - col;
  const __mmask16 mask = left >= 16 ? 0xFFFF : left <= 0 ? 0 : (1u << left) - 1;
  return RoundToBf16(_mm512_maskz_loadu_ps(mask, a.x + r * a.k + col));
}

// BF16 weights' x: per 32 columns the even and the odd ones.
void Bf16LanesX(const XArgs& a, int64_t begin, int64_t end) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  for (int64_t c = begin; c < end; ++c) {
    for (int r = 0; r < a.rows; ++r) {
      const __m512 v0 = Bf16Value(RunBits(a, r, c, 0)), v1 = Bf16Value(RunBits(a, r, c, 1));
      for (int p = 0; p < 2; ++p) {
        _mm512_storeu_ps(
            a.lanes + ((c * 2 + p) * a.rows + r) * kLanes,
            _mm512_permutex2var_ps(v0, _mm512_add_epi32(even, _mm512_set1_epi32(p)), v1));
      }
    }
  }
}

// BF16 weights' x as BF16 pairs: per 32 columns their bits in order.
void Bf16PairsX(const XArgs& a, int64_t begin, int64_t end) {
  for (int64_t c = begin; c < end; ++c) {
    for (int r = 0; r < a.rows; ++r) {
      const __m256i lo = _mm512_cvtepi32_epi16(RunBits(a, r, c, 0));
      const __m256i hi = _mm512_cvtepi32_epi16(RunBits(a, r, c, 1));
      _mm512_storeu_si512(a.pairs + (c * a.rows + r) * kLanes,
                          _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1));
    }
  }
}

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

// Adds run c (32 columns; with kTail the `tail` columns of the last run) of
// BF16 rows [o, o + W) into the even and odd columns' sums of each row of x.
template <int R, int W, bool kTail>
inline void Bf16Run(const Bf16Args& a, int64_t o, int64_t c, int tail, __m512 (&even)[W][R],
                    __m512 (&odd)[W][R]) {
  const __m512i high = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
  const float* xc = a.x_lanes + c * 2 * R * kLanes;
  for (int w = 0; w < W; ++w) {
    const uint16_t* p = a.w + (o + w) * a.k + c * kBf16RunCols;
    const __m512i v =
        kTail ? _mm512_maskz_loadu_epi16((__mmask32{1} << tail) - 1, p) : _mm512_loadu_si512(p);
    const __m512 ev = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
    const __m512 od = _mm512_castsi512_ps(_mm512_and_si512(v, high));
    for (int r = 0; r < R; ++r) {
      even[w][r] = _mm512_fmadd_ps(ev, _mm512_loadu_ps(xc + r * kLanes), even[w][r]);
      odd[w][r] = _mm512_fmadd_ps(od, _mm512_loadu_ps(xc + (R + r) * kLanes), odd[w][r]);
    }
  }
}

// BF16 rows [o, o + W): even and odd columns' sums a row of x, summed at the end.
template <int R, int W>
void Bf16RowBlock(const Bf16Args& a, int64_t o, float* y) {
  __m512 even[W][R], odd[W][R];
  for (int w = 0; w < W; ++w) {
    for (int r = 0; r < R; ++r) even[w][r] = odd[w][r] = _mm512_setzero_ps();
  }
  const int64_t full = a.k / kBf16RunCols;
  const int tail = static_cast<int>(a.k % kBf16RunCols);
  for (int64_t c = 0; c < full; ++c) Bf16Run<R, W, false>(a, o, c, 0, even, odd);
  if (tail != 0) Bf16Run<R, W, true>(a, o, full, tail, even, odd);
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

const Kernels kAvx512Kernels = {.int4 = &Int4ForRows,
                                .bf16 = &Bf16ForRows,
                                .int4_layout = XLayout::kF32Lanes,
                                .int4_x = &Int4LanesX,
                                .bf16_x = &Bf16LanesX};

}  // namespace

const Kernels& Avx512Kernels() { return kAvx512Kernels; }

LayOutX Avx512Int4PairsX() { return &Int4PairsX; }
LayOutX Avx512Bf16PairsX() { return &Bf16PairsX; }

}  // namespace onecard::engine::host_linear
