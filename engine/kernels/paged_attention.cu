// PagedAttention on CUDA (see paged_attention.h and paged_attention_split.h).
//
// General kernel (decode and any shape): block (kv_head, token, split), 4
// warps. K/V tiles of 64 keys stream into shared memory with cp.async (two
// buffers); each warp takes 16 keys of a tile, eight at a time: the lanes
// split head_dim, the scores of all the group's query heads come from warp
// sums, and an online softmax (base 2, fp32) updates per-warp running
// max / sum / output. The warps are merged through shared memory at the end,
// and split partials by AttnCombineKernel.
//
// Flash kernel (prefill chunks, head_dim 64 / 128): block (64-query tile of
// one chunk, query head), 4 warps of 16 rows. S = Q K^T and O += P V with
// mma.sync m16n8k16 (K via ldmatrix, V via ldmatrix.trans from padded rows,
// so no bank conflicts), causal mask by position, online softmax in
// registers, P rounded to bf16 for the second product (as FlashAttention 2).
//
// Tested by tests/gpu/paged_attention_test.cc against PagedAttentionRef.
#include <algorithm>
#include <cmath>

#include "engine/kernels/cuda_common.cuh"
#include "engine/kernels/cuda_ptx.cuh"
#include "engine/kernels/paged_attention.h"
#include "engine/kernels/paged_attention_split.h"
#include "engine/runtime/cuda_check.h"

namespace onecard::engine {
namespace {

using cuda::bf16;

constexpr int kTileKeys = 64;
constexpr int kWarps = 4;
constexpr int kThreads = 128;
constexpr float kLog2e = 1.4426950408889634f;
constexpr int kMaxGroup = 16;

struct AttnArgs {
  const bf16* q;
  int64_t q_stride;
  const bf16* k_cache;
  const bf16* v_cache;
  bf16* out;
  float* o_part;    // [num_tokens, num_heads, num_splits, head_dim]
  float2* ml_part;  // [num_tokens, num_heads, num_splits]: (max, sum), base 2
  int32_t block_size;
  int32_t num_kv_heads;
  int32_t num_heads;
  int32_t group;  // num_heads / num_kv_heads
  int32_t num_seqs;
  const int32_t* cu_query_lens;
  const int32_t* start_pos;
  const int32_t* block_tables;
  int32_t max_blocks_per_seq;
  float scale_log2;  // scale * log2(e)
  int32_t num_splits;
};

// The chunk holding token t: the largest s with cu[s] <= t.
__device__ __forceinline__ int FindSeq(const int32_t* cu, int num_seqs, int t) {
  int lo = 0, hi = num_seqs - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) >> 1;
    if (cu[mid] <= t) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

// Element offset of (position p, kv head, dim 0) in a layer's pool.
__device__ __forceinline__ int64_t KvOffset(const AttnArgs& a, const int32_t* table, int p,
                                            int kvh, int head_dim) {
  const int64_t slot = static_cast<int64_t>(table[p / a.block_size]) * a.block_size +
                       p % a.block_size;
  return (slot * a.num_kv_heads + kvh) * head_dim;
}

// ---------------------------------------------------------------- general

// Loads keys [k_begin, k_begin + n) (n <= kTileKeys) of one kv head into
// ks/vs ([kTileKeys][D], unpadded).
template <int D>
__device__ __forceinline__ void LoadTileGeneral(const AttnArgs& a, const int32_t* table, int kvh,
                                                int k_begin, int n, bf16* ks, bf16* vs) {
  constexpr int kChunks = D / 8;
  for (int i = threadIdx.x; i < kTileKeys * kChunks; i += kThreads) {
    const int j = i / kChunks;
    const int c = i - j * kChunks;
    if (j < n) {
      const int64_t off = KvOffset(a, table, k_begin + j, kvh, D) + c * 8;
      cuda::CpAsync16(ks + j * D + c * 8, a.k_cache + off, true);
      cuda::CpAsync16(vs + j * D + c * 8, a.v_cache + off, true);
    }
  }
}

template <int D, int G>
struct WarpState {
  static constexpr int kDpl = (D + 31) / 32;  // dims per lane
  float q[G][kDpl];
  float m[G];
  float l[G];
  float acc[G][kDpl];
};

// Loads the lane's kDpl dims of one smem row (vector loads when aligned).
template <int D, int kDpl>
__device__ __forceinline__ void LoadDims(const bf16* row, int lane, bool ok, float* out) {
  if constexpr (D % 32 == 0 && kDpl == 4) {
    const uint2 v = ok ? *reinterpret_cast<const uint2*>(row + lane * 4) : make_uint2(0, 0);
    out[0] = __uint_as_float(v.x << 16);
    out[1] = __uint_as_float(v.x & 0xffff0000u);
    out[2] = __uint_as_float(v.y << 16);
    out[3] = __uint_as_float(v.y & 0xffff0000u);
  } else if constexpr (D % 32 == 0 && kDpl == 2) {
    const uint32_t v = ok ? *reinterpret_cast<const uint32_t*>(row + lane * 2) : 0u;
    out[0] = __uint_as_float(v << 16);
    out[1] = __uint_as_float(v & 0xffff0000u);
  } else {
#pragma unroll
    for (int j = 0; j < kDpl; ++j) {
      const int d = lane * kDpl + j;
      out[j] = (ok && d < D) ? cuda::ToFloat(row[d]) : 0.0f;
    }
  }
}

// Keys j0 .. j0 + cnt - 1 (cnt <= kKeys) of the tile in shared memory, for
// one warp: scores of the group's heads, then the online-softmax update.
template <int D, int G, int kKeys>
__device__ __forceinline__ void ProcessKeys(WarpState<D, G>& st, const bf16* ks, const bf16* vs,
                                            int j0, int cnt, int lane) {
  constexpr int kDpl = WarpState<D, G>::kDpl;
  float sc[kKeys][G];
  float vv[kKeys][kDpl];
#pragma unroll
  for (int jj = 0; jj < kKeys; ++jj) {
    float kv[kDpl];
    LoadDims<D, kDpl>(ks + (j0 + jj) * D, lane, jj < cnt, kv);
    LoadDims<D, kDpl>(vs + (j0 + jj) * D, lane, jj < cnt, vv[jj]);
#pragma unroll
    for (int g = 0; g < G; ++g) {
      float part = 0.0f;
#pragma unroll
      for (int j = 0; j < kDpl; ++j) part += st.q[g][j] * kv[j];
      sc[jj][g] = jj < cnt ? cuda::WarpSum(part) : -INFINITY;
    }
  }
#pragma unroll
  for (int g = 0; g < G; ++g) {
    float mx = st.m[g];
#pragma unroll
    for (int jj = 0; jj < kKeys; ++jj) mx = fmaxf(mx, sc[jj][g]);
    const float alpha = exp2f(st.m[g] - mx);  // 0 while m is -inf; mx is finite
    st.m[g] = mx;
    st.l[g] *= alpha;
#pragma unroll
    for (int j = 0; j < kDpl; ++j) st.acc[g][j] *= alpha;
#pragma unroll
    for (int jj = 0; jj < kKeys; ++jj) {
      const float p = exp2f(sc[jj][g] - mx);  // 0 for -inf (absent keys)
      st.l[g] += p;
#pragma unroll
      for (int j = 0; j < kDpl; ++j) st.acc[g][j] += p * vv[jj][j];
    }
  }
}

// Merges the warps' states and writes the output or the split's partial.
template <int D, int G>
__device__ void FinishGeneral(const AttnArgs& a, const WarpState<D, G>& st, float* red, int t,
                              int kvh, int split) {
  constexpr int kDpl = WarpState<D, G>::kDpl;
  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  float* red_m = red + kWarps * G * D;
  float* red_l = red_m + kWarps * G;
#pragma unroll
  for (int g = 0; g < G; ++g) {
#pragma unroll
    for (int j = 0; j < kDpl; ++j) {
      const int d = lane * kDpl + j;
      if (d < D) red[(warp * G + g) * D + d] = st.acc[g][j];
    }
    if (lane == 0) {
      red_m[warp * G + g] = st.m[g];
      red_l[warp * G + g] = st.l[g];
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < a.group * D; i += kThreads) {
    const int g = i / D;
    const int d = i - g * D;
    float mx = -INFINITY;
    for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, red_m[w * G + g]);
    float num = 0.0f, den = 0.0f;
    if (mx != -INFINITY) {
      for (int w = 0; w < kWarps; ++w) {
        const float scale = exp2f(red_m[w * G + g] - mx);
        num += red[(w * G + g) * D + d] * scale;
        den += red_l[w * G + g] * scale;
      }
    }
    const int h = kvh * a.group + g;
    if (a.num_splits == 1) {
      a.out[(static_cast<int64_t>(t) * a.num_heads + h) * D + d] = __float2bfloat16_rn(num / den);
    } else {
      const int64_t idx = (static_cast<int64_t>(t) * a.num_heads + h) * a.num_splits + split;
      a.o_part[idx * D + d] = den > 0.0f ? num / den : 0.0f;
      if (d == 0) a.ml_part[idx] = make_float2(mx, den);
    }
  }
}

template <int D, int G>
__global__ void __launch_bounds__(kThreads) AttnGeneralKernel(AttnArgs a) {
  constexpr int kDpl = WarpState<D, G>::kDpl;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16* ks = reinterpret_cast<bf16*>(smem_raw);  // [2][kTileKeys][D]
  bf16* vs = ks + 2 * kTileKeys * D;             // [2][kTileKeys][D]
  const int kvh = blockIdx.x;
  const int t = blockIdx.y;
  const int split = blockIdx.z;
  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  const int s = FindSeq(a.cu_query_lens, a.num_seqs, t);
  const int len = a.start_pos[s] + (t - a.cu_query_lens[s]) + 1;  // keys 0 .. pos
  const int per_split = (len + a.num_splits - 1) / a.num_splits;
  const int k_lo = split * per_split;
  const int k_hi = min(len, k_lo + per_split);
  const int32_t* table = a.block_tables + static_cast<int64_t>(s) * a.max_blocks_per_seq;

  WarpState<D, G> st;
#pragma unroll
  for (int g = 0; g < G; ++g) {
    st.m[g] = -INFINITY;
    st.l[g] = 0.0f;
    const bf16* qh = a.q + t * a.q_stride + static_cast<int64_t>(kvh * a.group + g) * D;
#pragma unroll
    for (int j = 0; j < kDpl; ++j) {
      const int d = lane * kDpl + j;
      st.q[g][j] = (g < a.group && d < D) ? cuda::ToFloat(qh[d]) * a.scale_log2 : 0.0f;
      st.acc[g][j] = 0.0f;
    }
  }
  const int num_tiles = k_hi > k_lo ? (k_hi - k_lo + kTileKeys - 1) / kTileKeys : 0;
  if (num_tiles > 0) LoadTileGeneral<D>(a, table, kvh, k_lo, min(kTileKeys, k_hi - k_lo), ks, vs);
  cuda::CpAsyncCommit();
  for (int tile = 0; tile < num_tiles; ++tile) {
    const int buf = tile & 1;
    const int begin = k_lo + tile * kTileKeys;
    if (tile + 1 < num_tiles) {
      const int next = begin + kTileKeys;
      LoadTileGeneral<D>(a, table, kvh, next, min(kTileKeys, k_hi - next),
                         ks + (buf ^ 1) * kTileKeys * D, vs + (buf ^ 1) * kTileKeys * D);
    }
    cuda::CpAsyncCommit();
    cuda::CpAsyncWait<1>();
    __syncthreads();
    const int n = min(kTileKeys, k_hi - begin);
    constexpr int kKeys = G <= 8 ? 8 : 4;  // keeps G x kKeys scores in registers
#pragma unroll
    for (int grp = 0; grp < 16 / kKeys; ++grp) {
      const int j0 = warp * 16 + grp * kKeys;
      if (j0 < n) {
        ProcessKeys<D, G, kKeys>(st, ks + buf * kTileKeys * D, vs + buf * kTileKeys * D, j0,
                                 min(kKeys, n - j0), lane);
      }
    }
    __syncthreads();  // the buffer is refilled next iteration
  }
  cuda::CpAsyncWait<0>();
  __syncthreads();
  FinishGeneral<D, G>(a, st, reinterpret_cast<float*>(smem_raw), t, kvh, split);
}

__global__ void AttnCombineKernel(const float* __restrict__ o_part,
                                  const float2* __restrict__ ml_part, bf16* __restrict__ out,
                                  int num_heads, int num_splits, int head_dim) {
  const int t = blockIdx.x;
  const int h = blockIdx.y;
  const int64_t base = (static_cast<int64_t>(t) * num_heads + h) * num_splits;
  float mx = -INFINITY;
  for (int i = 0; i < num_splits; ++i) {
    const float2 ml = ml_part[base + i];
    if (ml.y > 0.0f) mx = fmaxf(mx, ml.x);
  }
  for (int d = threadIdx.x; d < head_dim; d += blockDim.x) {
    float num = 0.0f, den = 0.0f;
    for (int i = 0; i < num_splits; ++i) {
      const float2 ml = ml_part[base + i];
      if (ml.y > 0.0f) {
        const float w = ml.y * exp2f(ml.x - mx);
        num += w * o_part[(base + i) * head_dim + d];
        den += w;
      }
    }
    out[(static_cast<int64_t>(t) * num_heads + h) * head_dim + d] = __float2bfloat16_rn(num / den);
  }
}

// ------------------------------------------------------------------ flash

template <int D>
struct FlashShape {
  static constexpr int kRow = D + 8;  // padded smem row (elements): no bank conflicts
  static constexpr int kSteps = D / 16;  // k-steps of Q K^T
  static constexpr int kDimTiles = D / 8;  // n-tiles of P V
  static constexpr int kSmemBytes = 2 * 2 * kTileKeys * kRow * 2;
};

// Keys [k_begin, k_begin + kTileKeys) of one kv head; keys >= kv_len are zeros.
template <int D>
__device__ __forceinline__ void LoadTileFlash(const AttnArgs& a, const int32_t* table, int kvh,
                                              int k_begin, int kv_len, bf16* ks, bf16* vs) {
  constexpr int kChunks = D / 8;
  constexpr int kRow = FlashShape<D>::kRow;
  for (int i = threadIdx.x; i < kTileKeys * kChunks; i += kThreads) {
    const int j = i / kChunks;
    const int c = i - j * kChunks;
    const int p = k_begin + j;
    const bool valid = p < kv_len;
    const int64_t off = valid ? KvOffset(a, table, p, kvh, D) + c * 8 : 0;
    cuda::CpAsync16(ks + j * kRow + c * 8, a.k_cache + off, valid);
    cuda::CpAsync16(vs + j * kRow + c * 8, a.v_cache + off, valid);
  }
}

template <int D>
struct FlashRows {
  float o[FlashShape<D>::kDimTiles][4];
  float m0, m1, l0, l1;  // rows g and g + 8 of the warp's 16
};

// One 64-key tile: scores, mask, online softmax, and O += P V.
template <int D>
__device__ __forceinline__ void FlashTile(FlashRows<D>& r, const uint32_t (*qa)[4],
                                          const bf16* kb, const bf16* vb, int key_base, int qpos0,
                                          int qpos1, float scale_log2, int lane) {
  using S = FlashShape<D>;
  const int tq = lane & 3;
  float sacc[8][4];
#pragma unroll
  for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
    for (int e = 0; e < 4; ++e) sacc[nt][e] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < S::kSteps; kk += 2) {
      uint32_t b[4];
      cuda::LdMatrixX4(b, kb + (nt * 8 + (lane & 7)) * S::kRow + kk * 16 + (lane >> 3) * 8);
      cuda::MmaBf16(sacc[nt], qa[kk], b[0], b[1]);
      cuda::MmaBf16(sacc[nt], qa[kk + 1], b[2], b[3]);
    }
  }
  float mx0 = r.m0, mx1 = r.m1;
#pragma unroll
  for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int kpos = key_base + nt * 8 + 2 * tq + e;
      sacc[nt][e] = kpos <= qpos0 ? sacc[nt][e] * scale_log2 : -INFINITY;
      sacc[nt][2 + e] = kpos <= qpos1 ? sacc[nt][2 + e] * scale_log2 : -INFINITY;
      mx0 = fmaxf(mx0, sacc[nt][e]);
      mx1 = fmaxf(mx1, sacc[nt][2 + e]);
    }
  }
  mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
  mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
  mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
  mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
  // Every row sees key 0 in the first tile, so mx0 / mx1 are finite here.
  const float al0 = exp2f(r.m0 - mx0);
  const float al1 = exp2f(r.m1 - mx1);
  r.m0 = mx0;
  r.m1 = mx1;
  float rs0 = 0.0f, rs1 = 0.0f;
#pragma unroll
  for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      sacc[nt][e] = exp2f(sacc[nt][e] - mx0);
      sacc[nt][2 + e] = exp2f(sacc[nt][2 + e] - mx1);
      rs0 += sacc[nt][e];
      rs1 += sacc[nt][2 + e];
    }
  }
  r.l0 = r.l0 * al0 + rs0;
  r.l1 = r.l1 * al1 + rs1;
#pragma unroll
  for (int dn = 0; dn < S::kDimTiles; ++dn) {
    r.o[dn][0] *= al0;
    r.o[dn][1] *= al0;
    r.o[dn][2] *= al1;
    r.o[dn][3] *= al1;
  }
#pragma unroll
  for (int ks = 0; ks < 4; ++ks) {
    const uint32_t pa[4] = {cuda::PackBf16x2(sacc[2 * ks][0], sacc[2 * ks][1]),
                            cuda::PackBf16x2(sacc[2 * ks][2], sacc[2 * ks][3]),
                            cuda::PackBf16x2(sacc[2 * ks + 1][0], sacc[2 * ks + 1][1]),
                            cuda::PackBf16x2(sacc[2 * ks + 1][2], sacc[2 * ks + 1][3])};
#pragma unroll
    for (int dn = 0; dn < S::kDimTiles; dn += 2) {
      uint32_t b[4];
      const int key = ks * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
      cuda::LdMatrixX4Trans(b, vb + key * S::kRow + dn * 8 + (lane >> 4) * 8);
      cuda::MmaBf16(r.o[dn], pa, b[0], b[1]);
      cuda::MmaBf16(r.o[dn + 1], pa, b[2], b[3]);
    }
  }
}

// Writes one row's output (o values c0,c1 or c2,c3 of every dim tile) / l.
template <int D>
__device__ __forceinline__ void StoreFlashRow(bf16* out_row, const float (*o)[4], int half,
                                              float l, int tq) {
  const float inv = 1.0f / l;
#pragma unroll
  for (int dn = 0; dn < FlashShape<D>::kDimTiles; ++dn) {
    *reinterpret_cast<uint32_t*>(out_row + dn * 8 + 2 * tq) =
        cuda::PackBf16x2(o[dn][2 * half] * inv, o[dn][2 * half + 1] * inv);
  }
}

template <int D>
__global__ void __launch_bounds__(kThreads) AttnFlashKernel(AttnArgs a) {
  using S = FlashShape<D>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16* ks = reinterpret_cast<bf16*>(smem_raw);  // [2][kTileKeys][kRow]
  bf16* vs = ks + 2 * kTileKeys * S::kRow;        // [2][kTileKeys][kRow]
  const int h = blockIdx.y;
  const int kvh = h / a.group;
  int b = blockIdx.x;
  int s = -1;
  for (int i = 0; i < a.num_seqs; ++i) {
    const int tiles = (a.cu_query_lens[i + 1] - a.cu_query_lens[i] + 63) / 64;
    if (b < tiles) {
      s = i;
      break;
    }
    b -= tiles;
  }
  if (s < 0) return;
  const int q_begin = a.cu_query_lens[s] + b * 64;
  const int q_end = min(a.cu_query_lens[s + 1], q_begin + 64);
  const int pos0 = a.start_pos[s] + (q_begin - a.cu_query_lens[s]);
  const int last_pos = pos0 + (q_end - q_begin) - 1;
  const int kv_len = last_pos + 1;
  const int num_tiles = (kv_len + kTileKeys - 1) / kTileKeys;
  const int32_t* table = a.block_tables + static_cast<int64_t>(s) * a.max_blocks_per_seq;
  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  const int g = lane >> 2;
  const int tq = lane & 3;
  const int r0 = warp * 16 + g;
  const int r1 = r0 + 8;
  const int qpos0 = min(pos0 + r0, last_pos);  // rows past the chunk copy its last row
  const int qpos1 = min(pos0 + r1, last_pos);
  const bf16* q0 = a.q + min(q_begin + r0, q_end - 1) * a.q_stride + static_cast<int64_t>(h) * D;
  const bf16* q1 = a.q + min(q_begin + r1, q_end - 1) * a.q_stride + static_cast<int64_t>(h) * D;
  uint32_t qa[S::kSteps][4];
#pragma unroll
  for (int kk = 0; kk < S::kSteps; ++kk) {
    qa[kk][0] = *reinterpret_cast<const uint32_t*>(q0 + kk * 16 + 2 * tq);
    qa[kk][1] = *reinterpret_cast<const uint32_t*>(q1 + kk * 16 + 2 * tq);
    qa[kk][2] = *reinterpret_cast<const uint32_t*>(q0 + kk * 16 + 8 + 2 * tq);
    qa[kk][3] = *reinterpret_cast<const uint32_t*>(q1 + kk * 16 + 8 + 2 * tq);
  }
  FlashRows<D> r;
  r.m0 = r.m1 = -INFINITY;
  r.l0 = r.l1 = 0.0f;
#pragma unroll
  for (int dn = 0; dn < S::kDimTiles; ++dn) {
#pragma unroll
    for (int e = 0; e < 4; ++e) r.o[dn][e] = 0.0f;
  }
  LoadTileFlash<D>(a, table, kvh, 0, kv_len, ks, vs);
  cuda::CpAsyncCommit();
  for (int tile = 0; tile < num_tiles; ++tile) {
    const int buf = tile & 1;
    if (tile + 1 < num_tiles) {
      LoadTileFlash<D>(a, table, kvh, (tile + 1) * kTileKeys, kv_len,
                       ks + (buf ^ 1) * kTileKeys * S::kRow, vs + (buf ^ 1) * kTileKeys * S::kRow);
    }
    cuda::CpAsyncCommit();
    cuda::CpAsyncWait<1>();
    __syncthreads();
    FlashTile<D>(r, qa, ks + buf * kTileKeys * S::kRow, vs + buf * kTileKeys * S::kRow,
                 tile * kTileKeys, qpos0, qpos1, a.scale_log2, lane);
    __syncthreads();
  }
  cuda::CpAsyncWait<0>();
  r.l0 += __shfl_xor_sync(0xffffffffu, r.l0, 1);
  r.l0 += __shfl_xor_sync(0xffffffffu, r.l0, 2);
  r.l1 += __shfl_xor_sync(0xffffffffu, r.l1, 1);
  r.l1 += __shfl_xor_sync(0xffffffffu, r.l1, 2);
  if (q_begin + r0 < q_end) {
    StoreFlashRow<D>(a.out + (static_cast<int64_t>(q_begin + r0) * a.num_heads + h) * D, r.o, 0,
                     r.l0, tq);
  }
  if (q_begin + r1 < q_end) {
    StoreFlashRow<D>(a.out + (static_cast<int64_t>(q_begin + r1) * a.num_heads + h) * D, r.o, 1,
                     r.l1, tq);
  }
}

// --------------------------------------------------------------- dispatch

// Raises a kernel's dynamic shared-memory limit (once per kernel).
template <typename Kernel>
absl::Status AllowSmem(Kernel kernel, int bytes) {
  if (bytes <= 48 * 1024) return absl::OkStatus();
  CUDA_RETURN_IF_ERROR(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  return absl::OkStatus();
}

template <int D, int G>
absl::Status LaunchGeneralG(const AttnArgs& a, int num_tokens, cudaStream_t stream) {
  const int tiles = 2 * 2 * kTileKeys * D * static_cast<int>(sizeof(bf16));
  const int reduce = (kWarps * G * D + 2 * kWarps * G) * static_cast<int>(sizeof(float));
  const int smem = std::max(tiles, reduce);
  static const absl::Status allowed = AllowSmem(AttnGeneralKernel<D, G>, smem);
  RETURN_IF_ERROR(allowed);
  const dim3 grid(a.num_kv_heads, num_tokens, a.num_splits);
  AttnGeneralKernel<D, G><<<grid, kThreads, smem, stream>>>(a);
  CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

template <int D>
absl::Status LaunchGeneral(const AttnArgs& a, int num_tokens, cudaStream_t stream) {
  if (a.group <= 4) return LaunchGeneralG<D, 4>(a, num_tokens, stream);
  if (a.group <= 8) return LaunchGeneralG<D, 8>(a, num_tokens, stream);
  return LaunchGeneralG<D, 16>(a, num_tokens, stream);
}

template <int D>
absl::Status LaunchFlash(const AttnArgs& a, int num_tokens, cudaStream_t stream) {
  constexpr int kSmem = FlashShape<D>::kSmemBytes;
  static const absl::Status allowed = AllowSmem(AttnFlashKernel<D>, kSmem);
  RETURN_IF_ERROR(allowed);
  // Tiles never cross chunks: at most ceil(T / 64) + num_seqs of them.
  const dim3 grid(static_cast<unsigned>(cuda::CeilDiv(num_tokens, 64) + a.num_seqs),
                  a.num_heads);
  AttnFlashKernel<D><<<grid, kThreads, kSmem, stream>>>(a);
  CUDA_RETURN_IF_ERROR(cudaGetLastError());
  return absl::OkStatus();
}

absl::Status LaunchGeneralForDim(const AttnArgs& a, int head_dim, int num_tokens,
                                 cudaStream_t stream) {
  switch (head_dim) {
    case 16: return LaunchGeneral<16>(a, num_tokens, stream);
    case 24: return LaunchGeneral<24>(a, num_tokens, stream);
    case 32: return LaunchGeneral<32>(a, num_tokens, stream);
    case 64: return LaunchGeneral<64>(a, num_tokens, stream);
    case 96: return LaunchGeneral<96>(a, num_tokens, stream);
    default: return LaunchGeneral<128>(a, num_tokens, stream);
  }
}

absl::Status Validate(const PagedAttentionParams& p, const PagedAttentionSplitOptions& o) {
  constexpr char kOp[] = "PagedAttention";
  if (p.dtype != DType::kBF16) return cuda::Unsupported(kOp, p.dtype, "BF16");
  const int d = p.layout.head_dim;
  if (d != 16 && d != 24 && d != 32 && d != 64 && d != 96 && d != 128) {
    return absl::UnimplementedError(cuda::Cat(
        kOp, ": head_dim ", d, " is not supported; supported: 16, 24, 32, 64, 96, 128"));
  }
  if (p.layout.num_kv_heads <= 0 || p.num_heads % p.layout.num_kv_heads != 0 ||
      p.num_heads / p.layout.num_kv_heads > kMaxGroup) {
    return absl::UnimplementedError(cuda::Cat(kOp, ": num_heads ", p.num_heads,
                                                 " over num_kv_heads ", p.layout.num_kv_heads,
                                                 " must be a group of at most ", kMaxGroup));
  }
  if (p.num_tokens < 0 || p.num_seqs <= 0 || p.layout.block_size <= 0 || o.num_splits < 1 ||
      p.q_token_stride < static_cast<int64_t>(p.num_heads) * d) {
    return absl::InvalidArgumentError(cuda::Cat(
        kOp, ": bad sizes num_tokens=", p.num_tokens, " num_seqs=", p.num_seqs,
        " block_size=", p.layout.block_size, " num_splits=", o.num_splits,
        " q_token_stride=", p.q_token_stride));
  }
  if (o.num_splits > 1 &&
      o.workspace_bytes < PagedAttentionWorkspaceBytes(p.num_tokens, p.num_heads, d,
                                                       o.num_splits)) {
    return absl::InvalidArgumentError(cuda::Cat(kOp, ": workspace of ", o.workspace_bytes,
                                                   " bytes is too small for ", o.num_splits,
                                                   " splits"));
  }
  if (o.kernel == AttentionKernel::kFlash && d != 64 && d != 128) {
    return absl::UnimplementedError(
        cuda::Cat(kOp, ": the flash kernel takes head_dim 64 or 128, not ", d));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status PagedAttentionSplit(const PagedAttentionParams& p,
                                 const PagedAttentionSplitOptions& o, cudaStream_t stream) {
  RETURN_IF_ERROR(Validate(p, o));
  if (p.num_tokens == 0) return absl::OkStatus();
  const int d = p.layout.head_dim;
  AttnArgs a;
  a.q = static_cast<const bf16*>(p.q);
  a.q_stride = p.q_token_stride;
  a.k_cache = static_cast<const bf16*>(p.k_cache);
  a.v_cache = static_cast<const bf16*>(p.v_cache);
  a.out = static_cast<bf16*>(p.out);
  a.block_size = p.layout.block_size;
  a.num_kv_heads = p.layout.num_kv_heads;
  a.num_heads = p.num_heads;
  a.group = p.num_heads / p.layout.num_kv_heads;
  a.num_seqs = p.num_seqs;
  a.cu_query_lens = p.cu_query_lens;
  a.start_pos = p.start_pos;
  a.block_tables = p.block_tables;
  a.max_blocks_per_seq = p.max_blocks_per_seq;
  a.scale_log2 = p.scale * kLog2e;
  const bool flash = (d == 64 || d == 128) &&
                     (o.kernel == AttentionKernel::kFlash ||
                      (o.kernel == AttentionKernel::kAuto && p.num_tokens > p.num_seqs));
  if (flash) {
    a.num_splits = 1;
    return d == 64 ? LaunchFlash<64>(a, p.num_tokens, stream)
                   : LaunchFlash<128>(a, p.num_tokens, stream);
  }
  a.num_splits = o.num_splits;
  const int64_t parts = static_cast<int64_t>(p.num_tokens) * p.num_heads * o.num_splits;
  a.o_part = static_cast<float*>(o.workspace);
  a.ml_part = reinterpret_cast<float2*>(static_cast<char*>(o.workspace) +
                                        parts * d * static_cast<int64_t>(sizeof(float)));
  RETURN_IF_ERROR(LaunchGeneralForDim(a, d, p.num_tokens, stream));
  if (o.num_splits > 1) {
    AttnCombineKernel<<<dim3(p.num_tokens, p.num_heads), 128, 0, stream>>>(
        a.o_part, a.ml_part, a.out, p.num_heads, o.num_splits, d);
    CUDA_RETURN_IF_ERROR(cudaGetLastError());
  }
  return absl::OkStatus();
}

absl::Status PagedAttention(const PagedAttentionParams& params, cudaStream_t stream) {
  return PagedAttentionSplit(params, PagedAttentionSplitOptions{}, stream);
}

}  // namespace onecard::engine
