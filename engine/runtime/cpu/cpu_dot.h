// The one dot-product kernel of the cpu backend (MatMul and attention): eight
// interleaved fp32 partial sums, lane l summing k = l, l + 8, l + 16, ... in
// order, the tail k >= n - n % 8 added to lanes 0, 1, ... in turn, then a
// fixed reduction tree. The eight lanes are two 4-float GCC/Clang vectors
// (one SSE register each, so they stay in registers on any x86-64; a single
// 8-float vector would be split through memory without AVX). DotRows<R>
// computes R dot products against one x at once (one load of x feeds R weight
// rows); every output follows the same order whatever R, so results do not
// depend on tiling. Targets including this compile with -ffp-contract=off (no
// multiply-add fusion in one path and not another).
// Tested through cpu_matmul_test.cc and cpu_attention_test.cc.
#ifndef ONECARD_ENGINE_RUNTIME_CPU_CPU_DOT_H_
#define ONECARD_ENGINE_RUNTIME_CPU_CPU_DOT_H_

#include <cstdint>
#include <cstring>

namespace onecard::engine::cpu {

inline constexpr int kLanes = 8;

using Quad = float __attribute__((vector_size(4 * sizeof(float))));

inline Quad LoadQuad(const float* p) {
  Quad v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// Lanes 0..3 in lo, 4..7 in hi.
inline float ReduceLanes(const Quad& lo, const Quad& hi) {
  return ((lo[0] + lo[1]) + (lo[2] + lo[3])) + ((hi[0] + hi[1]) + (hi[2] + hi[3]));
}

// out[j] = x . w[j] over n elements, for j < kRows. With prefetch_ahead > 0,
// each w[j] + prefetch_ahead is prefetched as w[j] is read, one cache line
// at a time (MatMul uses it to fetch the next tile's rows: the hardware
// prefetcher alone stalls on many short row streams).
template <int kRows>
inline void DotRows(const float* x, const float* const* w, int64_t n, float* out,
                    int64_t prefetch_ahead = 0) {
  Quad lo[kRows] = {}, hi[kRows] = {};
  const int64_t n_main = n - n % kLanes;
  for (int64_t k = 0; k < n_main; k += kLanes) {
    if (prefetch_ahead > 0 && k % 16 == 0) {  // 16 floats: one 64-byte line
      for (int j = 0; j < kRows; ++j) __builtin_prefetch(w[j] + k + prefetch_ahead);
    }
    const Quad x_lo = LoadQuad(x + k), x_hi = LoadQuad(x + k + 4);
    for (int j = 0; j < kRows; ++j) {
      lo[j] += x_lo * LoadQuad(w[j] + k);
      hi[j] += x_hi * LoadQuad(w[j] + k + 4);
    }
  }
  for (int j = 0; j < kRows; ++j) {
    float lanes[kLanes];
    std::memcpy(lanes, &lo[j], sizeof(Quad));
    std::memcpy(lanes + 4, &hi[j], sizeof(Quad));
    for (int64_t k = n_main; k < n; ++k) lanes[k - n_main] += x[k] * w[j][k];
    Quad tail_lo, tail_hi;
    std::memcpy(&tail_lo, lanes, sizeof(Quad));
    std::memcpy(&tail_hi, lanes + 4, sizeof(Quad));
    out[j] = ReduceLanes(tail_lo, tail_hi);
  }
}

inline float Dot(const float* x, const float* y, int64_t n) {
  float out;
  DotRows<1>(x, &y, n, &out);
  return out;
}

}  // namespace onecard::engine::cpu

#endif  // ONECARD_ENGINE_RUNTIME_CPU_CPU_DOT_H_
