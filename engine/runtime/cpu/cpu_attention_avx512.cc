// ScoresAvx512 and WeightedValuesAvx512 (cpu_attention_kernels.h), for head
// sizes of 64 and 128 (four or eight 16-float vectors), computing the same
// bits as the portable AttendGroup (cpu_attention.cc): every product rounded
// and added in the same order, no fused multiply-add.
// Scores go sixteen positions at a time: each position's dot product with a
// head's query is a vector of 16 lane sums, and the sixteen vectors are
// reduced together by a tree of lane shuffles and adds (SumEach) that adds
// the same pairs as the portable code's per-score tree, so a score costs
// about two adds and three shuffles instead of a horizontal sum of its own.
// The weighted sum keeps each head's output in registers while the V rows
// pass once for as many heads as fit (24 accumulators).
// Nothing here includes inline code the rest of the program shares (see the
// header).
#include <immintrin.h>

#include <cstdint>

#include "engine/runtime/cpu/cpu_attention_kernels.h"

namespace onecard::engine::cpu_attention {
namespace {

constexpr int kAccumulators = 24;  // zmm registers a weighted sum keeps its outputs in

const float* Row(const float* pool, const GroupArgs& a, int32_t j) {
  return pool + a.block_table[j / a.block_size] * a.block_stride +
         (j % a.block_size) * a.slot_stride + a.head_offset;
}

// Lane r of the result: the sum of the sixteen lanes of v[r], added in the
// portable code's order (LaneDot in cpu_attention.cc: lane l + 8 onto lane l,
// then l + 4, l + 2, l + 1), sixteen rows at a time: each level adds the same
// pairs of lanes, for all rows at once, with lane shuffles between levels.
inline __m512 SumEach(const __m512 v[16]) {
  __m512 t[8];  // rows 2i, 2i + 1: lanes l + (l + 8), l = 0..7, one row a 256-bit half
  for (int i = 0; i < 8; ++i) {
    t[i] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  }
  __m512 s[4];  // rows 4i..4i + 3, one a 128-bit lane: l + (l + 4), l = 0..3
  for (int i = 0; i < 4; ++i) {
    s[i] = _mm512_add_ps(_mm512_shuffle_f32x4(t[2 * i], t[2 * i + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(t[2 * i], t[2 * i + 1], _MM_SHUFFLE(3, 1, 3, 1)));
  }
  __m512 u[2];  // 128-bit lane k: rows 8i + k, 8i + 4 + k: l + (l + 2), l = 0..1
  for (int i = 0; i < 2; ++i) {
    const __m512d a = _mm512_castps_pd(s[2 * i]), b = _mm512_castps_pd(s[2 * i + 1]);
    u[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(a, b)),
                         _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)));
  }
  // 128-bit lane k: rows k, 4 + k, 8 + k, 12 + k (0 + 1); then row r to lane r.
  const __m512 z = _mm512_add_ps(_mm512_shuffle_ps(u[0], u[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                 _mm512_shuffle_ps(u[0], u[1], _MM_SHUFFLE(3, 1, 3, 1)));
  const __m512i row_order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  return _mm512_permutexvar_ps(row_order, z);
}

template <int kVectors>
void Scores(const GroupArgs& a) {
  const __m512 scale = _mm512_set1_ps(a.scale);
  for (int32_t j0 = 0; j0 < a.context; j0 += 16) {
    const int n = a.context - j0 < 16 ? a.context - j0 : 16;
    const float* rows[16];
    for (int r = 0; r < n; ++r) rows[r] = Row(a.k_cache, a, j0 + r);
    const __mmask16 valid = static_cast<__mmask16>((1u << n) - 1);
    for (int32_t h = 0; h < a.group; ++h) {
      const float* q = a.q + static_cast<int64_t>(h) * (16 * kVectors);
      __m512 dots[16];
      for (int r = 0; r < 16; ++r) {
        if (r >= n) {
          dots[r] = _mm512_setzero_ps();
          continue;
        }
        // As LaneDot: each product rounded, then added to its lane (from 0).
        __m512 d = _mm512_setzero_ps();
        for (int c = 0; c < kVectors; ++c) {
          d = _mm512_add_ps(
              d, _mm512_mul_ps(_mm512_loadu_ps(q + 16 * c), _mm512_loadu_ps(rows[r] + 16 * c)));
        }
        dots[r] = d;
      }
      _mm512_mask_storeu_ps(a.scores + static_cast<int64_t>(h) * a.context + j0, valid,
                            _mm512_mul_ps(SumEach(dots), scale));
    }
  }
}

// Heads h0 .. h0 + kHeads - 1: their outputs stay in registers over the V rows.
template <int kVectors, int kHeads>
void WeightedValues(const GroupArgs& a, int32_t h0) {
  __m512 acc[kHeads * kVectors];
  for (int i = 0; i < kHeads * kVectors; ++i) acc[i] = _mm512_setzero_ps();
  const float* probs = a.scores + static_cast<int64_t>(h0) * a.context;
  for (int32_t j = 0; j < a.context; ++j) {
    const float* v = Row(a.v_cache, a, j);
    __m512 p[kHeads];
    for (int h = 0; h < kHeads; ++h)
      p[h] = _mm512_set1_ps(probs[static_cast<int64_t>(h) * a.context + j]);
    for (int c = 0; c < kVectors; ++c) {
      const __m512 vc = _mm512_loadu_ps(v + 16 * c);
      for (int h = 0; h < kHeads; ++h) {
        acc[h * kVectors + c] = _mm512_add_ps(acc[h * kVectors + c], _mm512_mul_ps(p[h], vc));
      }
    }
  }
  for (int h = 0; h < kHeads; ++h) {
    float* out = a.out + static_cast<int64_t>(h0 + h) * (16 * kVectors);
    for (int c = 0; c < kVectors; ++c) _mm512_storeu_ps(out + 16 * c, acc[h * kVectors + c]);
  }
}

// The last `left` heads (fewer than a whole run), from h0.
template <int kVectors, int kHeads>
void WeightedValuesLeft(const GroupArgs& a, int32_t h0, int32_t left) {
  if constexpr (kHeads > 0) {
    if (left == kHeads) return WeightedValues<kVectors, kHeads>(a, h0);
    WeightedValuesLeft<kVectors, kHeads - 1>(a, h0, left);
  }
}

template <int kVectors, int kMaxHeads>
void WeightedValuesAll(const GroupArgs& a) {
  static_assert(kMaxHeads * kVectors <= kAccumulators);
  int32_t h0 = 0;
  for (; h0 + kMaxHeads <= a.group; h0 += kMaxHeads) WeightedValues<kVectors, kMaxHeads>(a, h0);
  WeightedValuesLeft<kVectors, kMaxHeads - 1>(a, h0, a.group - h0);
}

}  // namespace

void ScoresAvx512(const GroupArgs& a) {
  if (a.head_dim == 64) {
    Scores<4>(a);
  } else {
    Scores<8>(a);
  }
}

void WeightedValuesAvx512(const GroupArgs& a) {
  if (a.head_dim == 64) {
    WeightedValuesAll<4, 6>(a);
  } else {
    WeightedValuesAll<8, 3>(a);
  }
}

}  // namespace onecard::engine::cpu_attention
