// The AVX-512 kernels of HostLinearForward (host_linear_kernels.h). This file
// is compiled for AVX-512 alone (see CMakeLists.txt) and includes no header
// with inline code shared elsewhere; it computes the layout's offsets itself.
//
// 4-bit: a thread takes whole tiles; within a row group it reads blocks of
// kBlockKt k tiles (16 KiB of a whole row group), prefetching the next block
// a line for each line it reads. In a block it walks tile, then 8 / R row
// pairs at a time over the block's k tiles, so that their 2 (8 / R) R lane
// accumulators stay in registers and share each load of x. Per 64-byte line:
// seven shifts, eight vpermps turning the low 4 bits of every dword into
// q - 8 in fp32 (no mask, no conversion), eight multiply-adds a row of x. At a
// group's end the lane sums are scaled into per-lane totals kept in a stack
// block; a tile's outputs are the lane totals' sums plus the offset terms
// (c . the sums of x over the groups).
// BF16: 1, 2 or 4 weight rows at a time, a 64-byte load a row giving its even
// (shifted up) and odd (masked) columns in fp32.
// Tested by tests/engine/runtime/cpu/host_linear_test.cc.
#include <immintrin.h>

#include <cstdint>

#include "engine/runtime/cpu/host_linear_kernels.h"

namespace onecard::engine::host_linear {
namespace {

constexpr int kBlockKt = 4;  // k tiles a block reads of each tile

int64_t GroupTiles(int64_t rg, int64_t n_tiles) {
  return n_tiles - 8 * rg < 8 ? n_tiles - 8 * rg : 8;
}

// What a row group's blocks need, fixed for the call.
struct RowGroup {
  const uint8_t* codes;    // the row group's first tile
  const uint32_t* scales;  // its first scale word
  int64_t k_tiles;
  int64_t tiles;      // in the row group (8 but in the last)
  int64_t kt_stride;  // bytes from a tile's k tile to its next
  int64_t groups;
};

// Totals of a row group: [tile][gr][h][rows][16], h: row gr + 8 h.
template <int R>
struct Totals {
  alignas(64) float sum[8][8][2][R][kLanes];   // the scaled lane totals
  alignas(64) float open[8][8][2][R][kLanes];  // a group's sums across blocks
};

// The fp32 scales of row pairs [gr, gr + P) in group gi: lane 2 pp holds
// row gr + pp's, lane 2 pp + 1 row gr + pp + 8's (the words' halves in order).
template <int P>
inline __m512 PairScales(const RowGroup& g, int64_t gi, int tile, int gr) {
  const uint32_t* words = g.scales + (gi * g.tiles + tile) * 8 + gr;
  return _mm512_cvtph_ps(_mm256_maskz_loadu_epi32(static_cast<__mmask8>((1u << P) - 1), words));
}

// A block's k tiles [kb, ke) and where they stand in their groups, worked out
// once a block (no division per line).
struct Block {
  int64_t kb;
  int64_t ke;
  int64_t gi;        // the (first) group of k tile kb
  int64_t in_group;  // k tiles of that group before kb (> 0: the group is open)
};

// Nibbles 2 np (row gr) and 2 np + 1 (row gr + 8) of P lines (row pairs)
// against x vector kInt4NibbleColumn[2 np] of each row of x.
template <int R, int P, int NP>
inline void NibblePair(const __m512i (&lines)[P], const float* xk, __m512 values,
                       __m512 (&acc)[P][2][R]) {
  __m512 x[R];
  for (int r = 0; r < R; ++r) {
    x[r] = _mm512_loadu_ps(xk + (kInt4NibbleColumn[2 * NP] * R + r) * kLanes);
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

// Scales the lane sums of P row pairs from gr into their totals, for the
// group gi that ends here; for groups of 32, gi (the lanes of columns 0..31
// of the k tile, i < 2) and gi + 1 (the others).
template <int R, int P>
inline void CloseGroup(const Int4Args& a, const RowGroup& g, int64_t gi, int tile, int gr,
                       __m512 (&acc)[P][2][R], float* sum) {
  const __m512 first = PairScales<P>(g, gi, tile, gr);
  const __m512 second = a.group == 32 ? PairScales<P>(g, gi + 1, tile, gr) : first;
  // Lane d = 4 t + i takes element e of `first` for i < 2, of `second` (16 + e) otherwise.
  const __m512i halves = _mm512_setr_epi32(0, 0, 16, 16, 0, 0, 16, 16, 0, 0, 16, 16, 0, 0, 16, 16);
  for (int pp = 0; pp < P; ++pp) {
    for (int h = 0; h < 2; ++h) {
      const __m512 s = _mm512_permutex2var_ps(
          first, _mm512_add_epi32(halves, _mm512_set1_epi32(2 * pp + h)), second);
      for (int r = 0; r < R; ++r) {
        float* t = sum + ((pp * 2 + h) * R + r) * kLanes;
        _mm512_store_ps(t, _mm512_fmadd_ps(acc[pp][h][r], s, _mm512_load_ps(t)));
        acc[pp][h][r] = _mm512_setzero_ps();
      }
    }
  }
}

// Row pairs [gr, gr + P) of tile `tile` over the k tiles of one block. The
// pairs share the x loads and give the multiply-adds 2 P R independent
// chains; each accumulator sees the same operations whatever R and P.
template <int R, int P>
void PairsBlock(const Int4Args& a, const RowGroup& g, const Block& b, int tile, int gr, float* sum,
                float* open) {
  const __m512 values = _mm512_setr_ps(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7);
  // k tiles a group spans (groups of 32: two groups a k tile, which close together).
  const int64_t group_kt = a.group > kTileCols ? a.group / kTileCols : 1;
  const int64_t gi_step = a.group == 32 ? 2 : 1;
  __m512 acc[P][2][R];
  for (int i = 0; i < P * 2 * R; ++i) {
    (&acc[0][0][0])[i] = b.in_group > 0 ? _mm512_load_ps(open + i * kLanes) : _mm512_setzero_ps();
  }
  const uint8_t* p = g.codes + (b.kb * g.tiles + tile) * kTileBytes + gr * 64;
  int64_t gi = b.gi, in_group = b.in_group;
  for (int64_t kt = b.kb; kt < b.ke; ++kt, p += g.kt_stride) {
    __m512i lines[P];
    for (int pp = 0; pp < P; ++pp) {
      _mm_prefetch(reinterpret_cast<const char*>(p + kBlockKt * g.kt_stride + pp * 64),
                   _MM_HINT_T0);
      lines[pp] = _mm512_loadu_si512(p + pp * 64);
    }
    const float* xk = a.x_lanes + kt * 4 * R * kLanes;
    NibblePair<R, P, 0>(lines, xk, values, acc);
    NibblePair<R, P, 1>(lines, xk, values, acc);
    NibblePair<R, P, 2>(lines, xk, values, acc);
    NibblePair<R, P, 3>(lines, xk, values, acc);
    if (++in_group < group_kt) continue;
    CloseGroup<R, P>(a, g, gi, tile, gr, acc, sum);
    gi += gi_step;
    in_group = 0;
  }
  if (in_group == 0) return;
  for (int i = 0; i < P * 2 * R; ++i) _mm512_store_ps(open + i * kLanes, (&acc[0][0][0])[i]);
}

// c . (sums of x over the groups) for the 16 rows of a tile, lane 2 gr + h
// holding row gr + 8 h (the order of a tile's 8 scale words).
template <int R>
void OffsetTerms(const Int4Args& a, const RowGroup& g, int tile, __m512 (&off)[R]) {
  for (int r = 0; r < R; ++r) off[r] = _mm512_setzero_ps();
  if (a.offset_term == OffsetTerm::kNone) return;
  for (int64_t gi = 0; gi < g.groups; ++gi) {
    const int64_t word = (gi * g.tiles + tile) * 8;
    const __m512 s =
        _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(g.scales + word)));
    const __m256i o = _mm256_loadu_si256(
        reinterpret_cast<const __m256i*>(a.offsets + (g.scales - a.scales) + word));
    const __m512 c =
        a.offset_term == OffsetTerm::kZero
            ? _mm512_mul_ps(s, _mm512_sub_ps(_mm512_set1_ps(8.0f),
                                             _mm512_cvtepi32_ps(_mm512_cvtepi16_epi32(o))))
            : _mm512_fmadd_ps(s, _mm512_set1_ps(8.0f), _mm512_cvtph_ps(o));
    for (int r = 0; r < R; ++r) {
      off[r] = _mm512_fmadd_ps(c, _mm512_set1_ps(a.x_sums[r * g.groups + gi]), off[r]);
    }
  }
}

template <int R>
void WriteTile(const Int4Args& a, const RowGroup& g, int64_t rg, int tile, const Totals<R>& tot) {
  __m512 off[R];
  OffsetTerms<R>(a, g, tile, off);
  const int64_t row0 = (rg * 8 + tile) * kTileRows;
  for (int r = 0; r < R; ++r) {
    alignas(64) float offs[kLanes];
    _mm512_store_ps(offs, off[r]);
    float* y = a.y + r * a.y_stride + row0;
    for (int gr = 0; gr < 8; ++gr) {
      for (int h = 0; h < 2; ++h) {
        const float lanes = _mm512_reduce_add_ps(_mm512_load_ps(tot.sum[tile][gr][h][r]));
        y[gr + 8 * h] = a.offset_term == OffsetTerm::kNone ? lanes : lanes + offs[2 * gr + h];
      }
    }
  }
}

// Tiles [t0, t1) of row group rg.
template <int R>
void Int4RowGroup(const Int4Args& a, int64_t rg, int t0, int t1) {
  const int64_t k_tiles = a.k / kTileCols, n_tiles = a.n / kTileRows;
  RowGroup g;
  g.k_tiles = k_tiles;
  g.tiles = GroupTiles(rg, n_tiles);
  g.codes = a.codes + rg * 8 * k_tiles * kTileBytes;
  g.groups = a.k / a.group;
  g.scales = a.scales + rg * 8 * g.groups * 8;
  g.kt_stride = g.tiles * kTileBytes;
  Totals<R> tot;
  for (int tile = t0; tile < t1; ++tile) {
    for (int gr = 0; gr < 8; ++gr) {
      for (int i = 0; i < 2 * R * kLanes; ++i) (&tot.sum[tile][gr][0][0][0])[i] = 0.0f;
    }
  }
  constexpr int kPairs = 8 / R;  // row pairs a pass: 2 kPairs R <= 16 accumulators
  const int64_t group_kt = a.group > kTileCols ? a.group / kTileCols : 1;
  for (int64_t kb = 0; kb < k_tiles; kb += kBlockKt) {
    const Block b = {.kb = kb,
                     .ke = kb + kBlockKt < k_tiles ? kb + kBlockKt : k_tiles,
                     .gi = (a.group == 32 ? 2 : 1) * (kb / group_kt),
                     .in_group = kb % group_kt};
    for (int tile = t0; tile < t1; ++tile) {
      for (int gr = 0; gr < 8; gr += kPairs) {
        PairsBlock<R, kPairs>(a, g, b, tile, gr, &tot.sum[tile][gr][0][0][0],
                              &tot.open[tile][gr][0][0][0]);
      }
    }
  }
  for (int tile = t0; tile < t1; ++tile) WriteTile<R>(a, g, rg, tile, tot);
}

template <int R>
void Int4TilesFor(const Int4Args& a, int64_t tile_begin, int64_t tile_end) {
  for (int64_t rg = tile_begin / 8; rg * 8 < tile_end; ++rg) {
    const int64_t t0 = tile_begin > rg * 8 ? tile_begin - rg * 8 : 0;
    const int64_t t1 = tile_end < rg * 8 + 8 ? tile_end - rg * 8 : 8;
    Int4RowGroup<R>(a, rg, static_cast<int>(t0), static_cast<int>(t1));
  }
}

// By rows of x, 1..kMaxRows.
constexpr Int4Tiles kInt4ByRows[kMaxRows] = {&Int4TilesFor<1>, &Int4TilesFor<2>, &Int4TilesFor<3>,
                                             &Int4TilesFor<4>, &Int4TilesFor<5>, &Int4TilesFor<6>,
                                             &Int4TilesFor<7>, &Int4TilesFor<8>};

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

void Int4ForRows(const Int4Args& a, int64_t tile_begin, int64_t tile_end) {
  kInt4ByRows[a.rows - 1](a, tile_begin, tile_end);
}

void Bf16ForRows(const Bf16Args& a, int64_t tile_begin, int64_t tile_end) {
  kBf16ByRows[a.rows - 1](a, tile_begin, tile_end);
}

const Kernels kAvx512Kernels = {.int4 = &Int4ForRows, .bf16 = &Bf16ForRows};

}  // namespace

const Kernels& Avx512Kernels() { return kAvx512Kernels; }

}  // namespace onecard::engine::host_linear
