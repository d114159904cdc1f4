// ScoresAvx2 and WeightedValuesAvx2 (cpu_attention_kernels.h), for head
// sizes of 64 and 128, computing the same bits as the portable AttendGroup
// (cpu_attention.cc): every product rounded and added in the same order, no
// fused multiply-add.
// Scores go eight positions at a time. A position's dot product with a
// head's query keeps the portable code's sixteen lane sums in two 8-float
// vectors (lanes 0-7 and 8-15), whose sum is the first level of its tree;
// the eight positions' vectors are then reduced together by lane shuffles
// and adds (SumEach) that add the same pairs as the rest of that tree.
// The weighted sum keeps up to 12 output vectors in registers (three heads
// by 32 values) while the V rows pass; a head size of 128 takes four passes.
// Nothing here includes inline code the rest of the program shares (see the
// header).
#include <immintrin.h>

#include <cstdint>

#include "engine/runtime/cpu/cpu_attention_kernels.h"

namespace onecard::engine::cpu_attention {
namespace {

constexpr int kPassVectors = 4;  // 8-float output vectors of a head a weighted-sum pass keeps
constexpr int kPassHeads = 3;    // heads a pass keeps (12 accumulators of 16 registers)

const float* Row(const float* pool, const GroupArgs& a, int32_t j) {
  return pool + a.block_table[j / a.block_size] * a.block_stride +
         (j % a.block_size) * a.slot_stride + a.head_offset;
}

// Lane r of the result: the sum of the eight lanes of c[r] in the portable
// code's order after its first level (LaneDot in cpu_attention.cc: lane l + 4
// onto lane l, then l + 2, then l + 1), eight rows at a time.
inline __m256 SumEach(const __m256 c[8]) {
  __m256 t[4];  // rows 2i (low half), 2i + 1 (high half): l + (l + 4), l = 0..3
  for (int i = 0; i < 4; ++i) {
    t[i] = _mm256_add_ps(_mm256_permute2f128_ps(c[2 * i], c[2 * i + 1], 0x20),
                         _mm256_permute2f128_ps(c[2 * i], c[2 * i + 1], 0x31));
  }
  // Low half: rows 4i, 4i + 2; high half: 4i + 1, 4i + 3; each l + (l + 2), l = 0..1.
  __m256 u[2];
  for (int i = 0; i < 2; ++i) {
    const __m256d a = _mm256_castps_pd(t[2 * i]), b = _mm256_castps_pd(t[2 * i + 1]);
    u[i] = _mm256_add_ps(_mm256_castpd_ps(_mm256_unpacklo_pd(a, b)),
                         _mm256_castpd_ps(_mm256_unpackhi_pd(a, b)));
  }
  // Low half: rows 0, 2, 4, 6; high half: 1, 3, 5, 7 (lane 0 + lane 1);
  // then row r to lane r.
  const __m256 z = _mm256_add_ps(_mm256_shuffle_ps(u[0], u[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                 _mm256_shuffle_ps(u[0], u[1], _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm256_permutevar8x32_ps(z, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

template <int kHeadDim>
void Scores(const GroupArgs& a) {
  const __m256 scale = _mm256_set1_ps(a.scale);
  for (int32_t j0 = 0; j0 < a.context; j0 += 8) {
    const int n = a.context - j0 < 8 ? a.context - j0 : 8;
    const float* rows[8];
    for (int r = 0; r < n; ++r) rows[r] = Row(a.k_cache, a, j0 + r);
    for (int32_t h = 0; h < a.group; ++h) {
      const float* q = a.q + static_cast<int64_t>(h) * kHeadDim;
      __m256 c[8];
      for (int r = 0; r < 8; ++r) {
        if (r >= n) {
          c[r] = _mm256_setzero_ps();
          continue;
        }
        // As LaneDot: lanes 0-7 and 8-15 of each 16 values, each product
        // rounded, then added to its lane (from 0); then lane l + 8 onto l.
        __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
        for (int i = 0; i < kHeadDim; i += 16) {
          lo = _mm256_add_ps(lo,
                             _mm256_mul_ps(_mm256_loadu_ps(q + i), _mm256_loadu_ps(rows[r] + i)));
          hi = _mm256_add_ps(
              hi, _mm256_mul_ps(_mm256_loadu_ps(q + i + 8), _mm256_loadu_ps(rows[r] + i + 8)));
        }
        c[r] = _mm256_add_ps(lo, hi);
      }
      const __m256 scores = _mm256_mul_ps(SumEach(c), scale);
      float* out = a.scores + static_cast<int64_t>(h) * a.context + j0;
      if (n == 8) {
        _mm256_storeu_ps(out, scores);
      } else {
        alignas(32) float part[8];
        _mm256_store_ps(part, scores);
        for (int r = 0; r < n; ++r) out[r] = part[r];
      }
    }
  }
}

// Vectors v0 .. v0 + kPassVectors - 1 of heads h0 .. h0 + kHeads - 1: their
// outputs stay in registers over the V rows.
template <int kHeadDim, int kHeads>
void WeightedValues(const GroupArgs& a, int32_t h0, int v0) {
  __m256 acc[kHeads * kPassVectors];
  for (int i = 0; i < kHeads * kPassVectors; ++i) acc[i] = _mm256_setzero_ps();
  const float* probs = a.scores + static_cast<int64_t>(h0) * a.context;
  for (int32_t j = 0; j < a.context; ++j) {
    const float* v = Row(a.v_cache, a, j) + 8 * v0;
    __m256 p[kHeads];
    for (int h = 0; h < kHeads; ++h)
      p[h] = _mm256_set1_ps(probs[static_cast<int64_t>(h) * a.context + j]);
    for (int c = 0; c < kPassVectors; ++c) {
      const __m256 vc = _mm256_loadu_ps(v + 8 * c);
      for (int h = 0; h < kHeads; ++h) {
        acc[h * kPassVectors + c] =
            _mm256_add_ps(acc[h * kPassVectors + c], _mm256_mul_ps(p[h], vc));
      }
    }
  }
  for (int h = 0; h < kHeads; ++h) {
    float* out = a.out + static_cast<int64_t>(h0 + h) * kHeadDim + 8 * v0;
    for (int c = 0; c < kPassVectors; ++c) _mm256_storeu_ps(out + 8 * c, acc[h * kPassVectors + c]);
  }
}

// Every pass of heads h0 .. h0 + kHeads - 1.
template <int kHeadDim, int kHeads>
void WeightedValuesHeads(const GroupArgs& a, int32_t h0) {
  for (int v0 = 0; v0 < kHeadDim / 8; v0 += kPassVectors) {
    WeightedValues<kHeadDim, kHeads>(a, h0, v0);
  }
}

template <int kHeadDim>
void WeightedValuesAll(const GroupArgs& a) {
  int32_t h0 = 0;
  for (; h0 + kPassHeads <= a.group; h0 += kPassHeads) {
    WeightedValuesHeads<kHeadDim, kPassHeads>(a, h0);
  }
  if (a.group - h0 == 2) WeightedValuesHeads<kHeadDim, 2>(a, h0);
  if (a.group - h0 == 1) WeightedValuesHeads<kHeadDim, 1>(a, h0);
}

}  // namespace

void ScoresAvx2(const GroupArgs& a) {
  if (a.head_dim == 64) {
    Scores<64>(a);
  } else {
    Scores<128>(a);
  }
}

void WeightedValuesAvx2(const GroupArgs& a) {
  if (a.head_dim == 64) {
    WeightedValuesAll<64>(a);
  } else {
    WeightedValuesAll<128>(a);
  }
}

}  // namespace onecard::engine::cpu_attention
