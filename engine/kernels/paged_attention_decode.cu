// The tensor-core decode kernel of PagedAttention (see paged_attention_split.h):
// every chunk one query token, head_dim 64 or 128.
//
// Block (kv head, token, split), 4 warps. The 16 mma rows (m16n8k16 bf16,
// fp32 accumulators) are the query heads of one kv head (GQA; rows past the
// group are zeros), so its K/V are read once for the whole group. The
// split's keys go in rounds of 64, warp w taking keys 16 w .. 16 w + 15 of
// each. K and V of a round are separate loads through a ring of three padded
// shared-memory slots (K0 V0 K1 V1 ... in turn, cp.async): while the warps
// score round r, V(r) and K(r + 1) are in flight; while they apply round r's
// weights, K(r + 1) and V(r + 1). The query tile sits in shared memory too
// (ldmatrix per use), which keeps a thread under 128 registers: with 56.6 KB
// of shared memory, 4 blocks fit an SM (PagedAttentionDecodeSplits sizes the
// grid to those slots).
//
// Before waiting on the previous kernel (programmatic dependent launch) a
// block reads what the step's metadata copy wrote: its sequence (token t is
// sequence t when every chunk is one token; else a binary search) and its
// context length. A thread finds its keys' cache slots with one division a
// round. The warps merge through padded fp32 rows (no bank conflicts),
// keeping only the group's rows; split partials go to the combine kernel
// (paged_attention.cu).
//
// With `rope` (PagedAttentionSplitOptions::rope, a decode step) the kernel
// also does the step's RopeKvWrite: q is the projection's raw output, copied
// into the query tile in a copy group ahead of K(0) and rotated there while
// K(0) and V(0) are in flight; the block holding the token's own position
// also copies that key's raw K and V (0.5 KB more shared memory, still 4
// blocks an SM), rotates the key, and writes both to the pools and to its
// ring rows (RopeLoad, RopeRotate). One launch and one pass over qkv fewer a
// layer than RopeKvWrite + attention.
//
// An FP8 cache (kFp8; PagedAttentionParams::kv_fp8) halves the bytes a round
// moves, and takes another pipeline: a round's K and V land as codes in one
// of three stages (a copy group a round, issued two rounds ahead), and the
// warps read them as they landed, widening to f16 in registers: K's
// fragments are a thread's adjacent codes because the products' k order is
// a permutation of the dims shared with the query (ScoreKeysFp8), V's
// because their n order is a permutation of the dims that the merge undoes
// (ApplyWeightsFp8). So a round has one barrier (its codes in for every
// warp; the stage two rounds ahead free) and no shared-memory pass besides
// the copies. The products are f16 (the query tile converted once, the
// weights P packed as f16), the K scale multiplies the scores and the V
// scale the output. 52.3 KB of shared memory at head_dim 128 (52.8 with the
// fused RoPE), still 4 blocks an SM.
//
// Its reference is PagedAttentionRef (paged_attention_ref.cc), as for every
// PagedAttention kernel (after RopeKvWriteRef when fused). Tested by
// tests/gpu/paged_attention_test.cc and paged_attention_fp8_test.cc.
#include "engine/kernels/cuda_ptx.cuh"
#include "engine/kernels/kv_fp8.cuh"
#include "engine/kernels/l2_prefetch.cuh"
#include "engine/kernels/paged_attention_internal.cuh"
#include "engine/kernels/paged_attention_split.h"
#include "engine/kernels/rope_internal.cuh"

namespace onecard::engine::attention {
namespace {

template <int D, bool kFp8>
struct DecodeShape {
  static constexpr int kRow = D + 8;                       // padded 16-bit smem row (elements)
  static constexpr int kSteps = D / 16;                    // k-steps of Q K^T
  static constexpr int kDimTiles = D / 8;                  // n-tiles of P V
  static constexpr int kChunks = kFp8 ? D / 16 : D / 8;    // 16-byte chunks of a pool row
  static constexpr int kKeysPerPass = kThreads / kChunks;  // key rows one pass of the block loads
  static constexpr int kLoads = kTileKeys / kKeysPerPass;  // chunks a thread loads a K or V tile
  static constexpr int kSlotElems = kTileKeys * kRow;
  // BF16: a ring of three slots the copies land in. FP8: three stages of
  // codes, each a K tile and a V tile, which the products read as they
  // landed (CodeOffset: rows swizzled at head_dim 128, V's padded at 64).
  static constexpr int kSlots = kFp8 ? 0 : 3;
  static constexpr int kRingBytes = kSlots * kSlotElems * 2;
  static constexpr int kKRow = D;                      // FP8: bytes a K code row
  static constexpr int kVRow = D == 128 ? D : D + 16;  // FP8: bytes a V code row
  static constexpr int kVTileOffset = kTileKeys * kKRow;
  static constexpr int kCodeStageBytes = kVTileOffset + kTileKeys * kVRow;
  static constexpr int kCodeStages = 3;
  static constexpr int kStagingBytes = kFp8 ? kCodeStages * kCodeStageBytes : 0;
  static constexpr int kQueryOffset = kRingBytes + kStagingBytes;
  static constexpr int kSmemBytes = kQueryOffset + 16 * kRow * 2;  // + the query tile
  static constexpr int kStageBytes = 2 * D * 2;  // fused RoPE: the new key's raw K and V
  static constexpr int kRedRow = D + 8;  // padded fp32 merge row: rows 32 bytes apart in banks
  static constexpr int kRedBytes = (kWarps * 16 * kRedRow + 2 * kWarps * 16) * 4;
  static_assert(kRedBytes <= kQueryOffset, "the merge reuses the K/V slots");
};

constexpr int kDecodeBlocksPerSm = kPagedAttentionDecodeBlocksPerSm;

// The cache slots of the thread's keys of a round (positions p0 + i *
// kKeysPerPass): one division a round, then steps; -1 past the split (the
// key is zero-filled).
template <int D, bool kFp8>
__device__ __forceinline__ void KeySlots(const AttnArgs& a, const int32_t* table, int p0, int k_hi,
                                         int32_t* slot) {
  using S = DecodeShape<D, kFp8>;
  const KvPlace at = PlaceOf(a, p0);
  int blk = at.blk, in = at.in_blk;
#pragma unroll
  for (int i = 0; i < S::kLoads; ++i) {
    const int p = p0 + i * S::kKeysPerPass;
    slot[i] = p < k_hi ? table[blk] * a.block_size + in : -1;
    in += S::kKeysPerPass;
    while (in >= a.block_size) {
      in -= a.block_size;
      ++blk;
    }
  }
}

// BF16: one K or V tile, the thread's kLoads chunks (rows key0 + i *
// kKeysPerPass) into a ring slot, except row `skip` (-1: none), which the
// fused RoPE writes itself.
template <int D>
__device__ __forceinline__ void IssueTile(const void* cache, const AttnArgs& a, const int32_t* slot,
                                          int kvh, int key0, int chunk, bf16* dst, int skip = -1) {
  using S = DecodeShape<D, false>;
#pragma unroll
  for (int i = 0; i < S::kLoads; ++i) {
    const int row = key0 + i * S::kKeysPerPass;
    if (row == skip) continue;
    const int64_t off = (static_cast<int64_t>(max(slot[i], 0)) * a.num_kv_heads + kvh) * D;
    cuda::CpAsync16(reinterpret_cast<char*>(dst) + row * (S::kRow * 2) + chunk * 16,
                    static_cast<const char*>(cache) + off * 2 + chunk * 16, slot[i] >= 0);
  }
}

// FP8: byte offset of 16-byte chunk c (dims 16 c ..) of key row j in a
// staging tile of K (kV false) or V codes. Head_dim 128: rows of 128 bytes,
// chunk c stored at c ^ (j & 7), so the reads of ScoreKeysFp8 (a row's
// chunks 2 tq, 2 tq + 1 for keys g) and ApplyWeightsFp8 (chunk g of rows
// 2 tq ..) fall in distinct banks; head_dim 64: K rows of 64 bytes, V rows
// of 80 (the same for its 8-byte reads).
template <int D, bool kV>
__device__ __forceinline__ int CodeOffset(int j, int c) {
  if constexpr (D == 128) {
    return j * D + ((c ^ (j & 7)) << 4);
  } else {
    return j * (kV ? DecodeShape<D, true>::kVRow : D) + (c << 4);
  }
}

// FP8: the thread's kLoads chunks of a K or V tile of codes (rows key0 + i *
// kKeysPerPass) into a staging tile, except row `skip` (-1: none).
template <int D, bool kV>
__device__ __forceinline__ void IssueCodes(const void* pool, const AttnArgs& a, const int32_t* slot,
                                           int kvh, int key0, int chunk, unsigned char* dst,
                                           int skip) {
  using S = DecodeShape<D, true>;
#pragma unroll
  for (int i = 0; i < S::kLoads; ++i) {
    const int row = key0 + i * S::kKeysPerPass;
    if (row == skip) continue;
    const int64_t off = (static_cast<int64_t>(max(slot[i], 0)) * a.num_kv_heads + kvh) * D;
    cuda::CpAsync16(dst + CodeOffset<D, kV>(row, chunk),
                    static_cast<const unsigned char*>(pool) + off + chunk * 16, slot[i] >= 0);
  }
}

// Online-softmax state of the thread's rows g and g + 8.
template <int D>
struct DecodeRows {
  float o[D / 8][4];
  float m[2];
  float l[2];
};

// The warp's 16 raw scores sc (nt: keys 8 nt .. of key_base; entries 2 h,
// 2 h + 1 row g + 8 h) masked at k_hi, the running max / sum updated and o
// rescaled; the weights packed as the A operand of P V. kFp8: f16.
template <int D, bool kFp8>
__device__ __forceinline__ void UpdateRows(DecodeRows<D>& r, float (&sc)[2][4], int key_base,
                                           int k_hi, float scale_log2, int tq, uint32_t* pa) {
  using S = DecodeShape<D, kFp8>;
#pragma unroll
  for (int h = 0; h < 2; ++h) {  // row g + 8 h: accumulator entries 2 h, 2 h + 1
    float mx = r.m[h];
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const bool valid = key_base + nt * 8 + 2 * tq + e < k_hi;
        sc[nt][2 * h + e] = valid ? sc[nt][2 * h + e] * scale_log2 : -INFINITY;
        mx = fmaxf(mx, sc[nt][2 * h + e]);
      }
    }
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    // No valid key seen yet (-inf): subtract 0, so every weight is 0, not NaN.
    const float use = mx == -INFINITY ? 0.0f : mx;
    const float alpha = exp2f(r.m[h] - use);
    r.m[h] = mx;
    float sum = 0.0f;
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        sc[nt][2 * h + e] = exp2f(sc[nt][2 * h + e] - use);
        sum += sc[nt][2 * h + e];
      }
    }
    r.l[h] = r.l[h] * alpha + sum;
#pragma unroll
    for (int dn = 0; dn < S::kDimTiles; ++dn) {
      r.o[dn][2 * h] *= alpha;
      r.o[dn][2 * h + 1] *= alpha;
    }
  }
  // A fragment (PTX ISA): (g, keys 2t..), (g + 8, 2t..), (g, 2t + 8..), (g + 8, 2t + 8..).
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float lo = sc[i / 2][2 * (i % 2)];
    const float hi = sc[i / 2][2 * (i % 2) + 1];
    pa[i] = kFp8 ? kvfp8::PackF16x2(lo, hi) : cuda::PackBf16x2(lo, hi);
  }
}

// BF16: scores of the warp's 16 keys (kb: their first row of a ring slot)
// against the query tile qs, then UpdateRows.
template <int D>
__device__ __forceinline__ void ScoreKeys(DecodeRows<D>& r, const bf16* qs, const bf16* kb,
                                          int key_base, int k_hi, float scale_log2, int lane,
                                          uint32_t* pa) {
  using S = DecodeShape<D, false>;
  float sc[2][4] = {};
#pragma unroll
  for (int kk = 0; kk < S::kSteps; kk += 2) {
    uint32_t qa0[4], qa1[4];
    cuda::LdMatrixX4(qa0, qs + (lane & 15) * S::kRow + kk * 16 + (lane >> 4) * 8);
    cuda::LdMatrixX4(qa1, qs + (lane & 15) * S::kRow + kk * 16 + 16 + (lane >> 4) * 8);
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
      uint32_t b[4];
      cuda::LdMatrixX4(b, kb + (nt * 8 + (lane & 7)) * S::kRow + kk * 16 + (lane >> 3) * 8);
      cuda::MmaBf16(sc[nt], qa0, b[0], b[1]);
      cuda::MmaBf16(sc[nt], qa1, b[2], b[3]);
    }
  }
  UpdateRows<D, false>(r, sc, key_base, k_hi, scale_log2, lane & 3, pa);
}

// FP8: the same from the K codes as they landed (kt: a staging tile; the
// warp's keys are its rows 16 warp ..), widened in registers. The products'
// k order is a permutation of the dims, the same for the query (a dot
// product does not depend on it): in k-step kk, thread tq's k positions 2 tq,
// 2 tq + 1, 2 tq + 8, 2 tq + 9 are dims tq D / 4 + 4 kk + 0, 1, 2, 3. So a
// thread's K fragments of a key are its D / 4 adjacent codes (one 4-code
// word a k-step: two 16-byte reads at head_dim 128), and its query
// fragments 8 adjacent f16 values a pair of k-steps.
template <int D>
__device__ __forceinline__ void ScoreKeysFp8(DecodeRows<D>& r, const bf16* qs,
                                             const unsigned char* kt, int warp, int key_base,
                                             int k_hi, float scale_log2, int lane, uint32_t* pa) {
  using S = DecodeShape<D, true>;
  constexpr int kSpan = D / 4;  // a thread's dims (codes) of a row
  const int g = lane >> 2;
  const int tq = lane & 3;
  uint32_t kc[2][kSpan / 4];  // keys g and 8 + g: a 4-code word a k-step
#pragma unroll
  for (int nt = 0; nt < 2; ++nt) {
    const int row = warp * 16 + nt * 8 + g;
#pragma unroll
    for (int i = 0; i < kSpan / 16; ++i) {
      const uint4 w =
          *reinterpret_cast<const uint4*>(kt + CodeOffset<D, false>(row, tq * (kSpan / 16) + i));
      kc[nt][4 * i] = w.x;
      kc[nt][4 * i + 1] = w.y;
      kc[nt][4 * i + 2] = w.z;
      kc[nt][4 * i + 3] = w.w;
    }
  }
  const bf16* q0 = qs + g * S::kRow + tq * kSpan;  // f16 values (QueryToF16)
  const bf16* q1 = q0 + 8 * S::kRow;
  float sc[2][4] = {};
#pragma unroll
  for (int kk = 0; kk < S::kSteps; kk += 2) {
    const uint4 x0 = *reinterpret_cast<const uint4*>(q0 + kk * 4);  // row g, steps kk, kk + 1
    const uint4 x1 = *reinterpret_cast<const uint4*>(q1 + kk * 4);  // row g + 8
    const uint32_t qa0[4] = {x0.x, x1.x, x0.y, x1.y};
    const uint32_t qa1[4] = {x0.z, x1.z, x0.w, x1.w};
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
      cuda::MmaF16(sc[nt], qa0, kvfp8::WidenF16x2(kc[nt][kk]), kvfp8::WidenF16x2(kc[nt][kk] >> 16));
      cuda::MmaF16(sc[nt], qa1, kvfp8::WidenF16x2(kc[nt][kk + 1]),
                   kvfp8::WidenF16x2(kc[nt][kk + 1] >> 16));
    }
  }
  UpdateRows<D, true>(r, sc, key_base, k_hi, scale_log2, tq, pa);
}

// BF16: o += P V over the warp's 16 keys (vb: their first row of a ring slot).
template <int D>
__device__ __forceinline__ void ApplyWeights(DecodeRows<D>& r, const uint32_t* pa, const bf16* vb,
                                             int lane) {
  using S = DecodeShape<D, false>;
  const int key = (lane & 7) + ((lane >> 3) & 1) * 8;
#pragma unroll
  for (int dn = 0; dn < S::kDimTiles; dn += 2) {
    uint32_t b[4];
    cuda::LdMatrixX4Trans(b, vb + key * S::kRow + dn * 8 + (lane >> 4) * 8);
    cuda::MmaBf16(r.o[dn], pa, b[0], b[1]);
    cuda::MmaBf16(r.o[dn + 1], pa, b[2], b[3]);
  }
}

// FP8: o += P V over the warp's 16 keys from the V codes as they landed
// (vt: a staging tile; the warp's keys are its rows 16 warp ..). The
// products' n order is a permutation of the dims: n-tile dn's column n is
// dim n D / 8 + dn (the kernel's merge undoes it), so a thread's B fragments of a
// key are its D / 8 adjacent codes (dims g D / 8 ..: one 16-byte read at
// head_dim 128), for the four keys of its k positions 2 tq, 2 tq + 1,
// 2 tq + 8, 2 tq + 9; byte permutes pair the keys, then widen to f16.
template <int D>
__device__ __forceinline__ void ApplyWeightsFp8(DecodeRows<D>& r, const uint32_t* pa,
                                                const unsigned char* vt, int warp, int lane) {
  constexpr int kWords = D / 32;  // a thread's 4-code words of a key
  const int g = lane >> 2;
  const int tq = lane & 3;
  uint32_t v[4][kWords];  // keys 2 tq, 2 tq + 1, 2 tq + 8, 2 tq + 9
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int row = warp * 16 + 2 * tq + (i & 1) + (i >> 1) * 8;
    if constexpr (D == 128) {
      const uint4 w = *reinterpret_cast<const uint4*>(vt + CodeOffset<D, true>(row, g));
      v[i][0] = w.x;
      v[i][1] = w.y;
      v[i][2] = w.z;
      v[i][3] = w.w;
    } else {
      const uint2 w =
          *reinterpret_cast<const uint2*>(vt + CodeOffset<D, true>(row, g >> 1) + (g & 1) * 8);
      v[i][0] = w.x;
      v[i][1] = w.y;
    }
  }
#pragma unroll
  for (int w = 0; w < kWords; ++w) {
    // Bytes (key a, key b) of dims 4 w, 4 w + 1 (x) and 4 w + 2, 4 w + 3 (y).
    const uint32_t x01 = __byte_perm(v[0][w], v[1][w], 0x5140);
    const uint32_t y01 = __byte_perm(v[0][w], v[1][w], 0x7362);
    const uint32_t x23 = __byte_perm(v[2][w], v[3][w], 0x5140);
    const uint32_t y23 = __byte_perm(v[2][w], v[3][w], 0x7362);
    cuda::MmaF16(r.o[4 * w], pa, kvfp8::WidenF16x2(x01), kvfp8::WidenF16x2(x23));
    cuda::MmaF16(r.o[4 * w + 1], pa, kvfp8::WidenF16x2(x01 >> 16), kvfp8::WidenF16x2(x23 >> 16));
    cuda::MmaF16(r.o[4 * w + 2], pa, kvfp8::WidenF16x2(y01), kvfp8::WidenF16x2(y23));
    cuda::MmaF16(r.o[4 * w + 3], pa, kvfp8::WidenF16x2(y01 >> 16), kvfp8::WidenF16x2(y23 >> 16));
  }
}

// FP8: the landed BF16 query tile converted to f16 in place (after a barrier).
template <int D>
__device__ __forceinline__ void QueryToF16(bf16* qs) {
  using S = DecodeShape<D, true>;
  for (int i = threadIdx.x; i < 16 * D / 2; i += kThreads) {
    const int row = i / (D / 2);
    uint32_t* p = reinterpret_cast<uint32_t*>(qs + row * S::kRow) + (i - row * (D / 2));
    *p = kvfp8::Bf16x2ToF16x2(*p);
  }
}

// Token t's query heads of kv head kvh's group into the query tile (16 rows;
// rows past the group zeros), as cp.async copies in the caller's group.
template <int D>
__device__ __forceinline__ void LoadQueryTile(const AttnArgs& a, int t, int kvh, bf16* qs) {
  using S = DecodeShape<D, false>;
  constexpr int kQChunks = D / 8;  // 16-byte chunks of a BF16 query row
  const bf16* q = a.q + t * a.q_stride + static_cast<int64_t>(kvh * a.group) * D;
  for (int i = threadIdx.x; i < 16 * kQChunks; i += kThreads) {
    const int row = i / kQChunks;
    const int c = i - row * kQChunks;
    const bool in_group = row < a.group;
    cuda::CpAsync16(qs + row * S::kRow + c * 8, q + (in_group ? row : 0) * D + c * 8, in_group);
  }
}

// The fused RoPE (kRope; a.q the raw packed qkv rows). Before the block's
// first K/V loads, in a copy group of their own: the group's raw query heads
// into the query tile (rows past the group zeros) and, in the block whose
// split holds the token's own position (new_row >= 0: its row from the
// split's first key; the key has a slot), that key's raw K and V into
// `stage` ([2][D]).
template <int D>
__device__ __forceinline__ void RopeLoad(const AttnArgs& a, int t, int kvh, int new_row, bf16* qs,
                                         bf16* stage) {
  constexpr int kRawChunks = D / 8;  // 16-byte chunks of a BF16 head
  LoadQueryTile<D>(a, t, kvh, qs);
  const bf16* x = a.q + t * a.q_stride;
  if (new_row >= 0 && threadIdx.x < 2 * kRawChunks) {
    const int64_t k_col = static_cast<int64_t>(a.num_heads + kvh) * D;
    const int64_t v_col = static_cast<int64_t>(a.num_heads + a.num_kv_heads + kvh) * D;
    const int j = threadIdx.x;
    const int64_t src = j < kRawChunks ? k_col + j * 8 : v_col + (j - kRawChunks) * 8;
    cuda::CpAsync16(stage + j * 8, x + src, true);
  }
}

// Once RopeLoad's group has landed (for every thread): the query tile rotated
// in place (bias added first); the new key's K rotated and V biased, written
// to the pools and, when the key falls in a round whose loads were issued
// before (they skipped its row), where those loads would have put it: BF16,
// the first round's ring rows K(0) and V(0); FP8, the codes into the staging
// tiles of the first two rounds (`staging`), which the loop widens (V) or
// reads (K) as it does the copies'. A later round loads it from the pool,
// after the loop's barriers that order these writes first. Same arithmetic
// as RopeKvWrite (rope_internal.cuh). A thread's dims are the same in every
// head (kThreads is a multiple of D / 4): one pair of angles.
template <int D, bool kFp8>
__device__ __forceinline__ void RopeRotate(const AttnArgs& a, int t, int kvh, int new_row, bf16* qs,
                                           const bf16* stage, bf16* ring, unsigned char* staging) {
  using S = DecodeShape<D, kFp8>;
  constexpr int kHalf = D / 2;
  constexpr int kQuads = D / 4;  // (i0, i0 + 1) pairs of pairs a head
  static_assert(kThreads % kQuads == 0, "a thread's dims are fixed");
  const int i0 = 2 * (threadIdx.x % kQuads);
  const rope::Angles2 an = rope::AnglesAt(static_cast<float>(a.positions[t]), a.inv_freq, i0);
  const bf16* bias = a.qkv_bias;
  for (int i = threadIdx.x; i < a.group * kQuads; i += kThreads) {
    const int row = i / kQuads;
    bf16* x = qs + row * S::kRow;
    const bf16* b =
        bias == nullptr ? nullptr : bias + static_cast<int64_t>(kvh * a.group + row) * D;
    __nv_bfloat162 lo, hi;
    rope::Rotate2(x, b, i0, kHalf, an, &lo, &hi);
    *reinterpret_cast<__nv_bfloat162*>(x + i0) = lo;
    *reinterpret_cast<__nv_bfloat162*>(x + i0 + kHalf) = hi;
  }
  if (new_row < 0) return;
  const int64_t pool = (static_cast<int64_t>(a.slot_mapping[t]) * a.num_kv_heads + kvh) * D;
  const bool in_ring = new_row < (kFp8 ? 2 : 1) * kTileKeys;
  // FP8: the row's round's staging tiles (K, then V).
  unsigned char* codes = staging + (new_row / kTileKeys) * S::kCodeStageBytes;
  const int j = new_row % kTileKeys;
  if (threadIdx.x < kQuads) {
    const bf16* b = bias == nullptr ? nullptr : bias + static_cast<int64_t>(a.num_heads + kvh) * D;
    __nv_bfloat162 lo, hi;
    rope::Rotate2(stage, b, i0, kHalf, an, &lo, &hi);
    if constexpr (kFp8) {
      const float scale = a.k_scale[kvh];
      const uint16_t c_lo = kvfp8::Encode2(lo, scale);
      const uint16_t c_hi = kvfp8::Encode2(hi, scale);
      if (in_ring) {
        *reinterpret_cast<uint16_t*>(codes + CodeOffset<D, false>(j, i0 >> 4) + (i0 & 15)) = c_lo;
        *reinterpret_cast<uint16_t*>(codes + CodeOffset<D, false>(j, (i0 + kHalf) >> 4) +
                                     ((i0 + kHalf) & 15)) = c_hi;
      }
      uint8_t* k_write = static_cast<uint8_t*>(a.k_write);
      *reinterpret_cast<uint16_t*>(k_write + pool + i0) = c_lo;
      *reinterpret_cast<uint16_t*>(k_write + pool + i0 + kHalf) = c_hi;
    } else {
      if (in_ring) {
        *reinterpret_cast<__nv_bfloat162*>(ring + new_row * S::kRow + i0) = lo;
        *reinterpret_cast<__nv_bfloat162*>(ring + new_row * S::kRow + i0 + kHalf) = hi;
      }
      bf16* k_write = static_cast<bf16*>(a.k_write);
      *reinterpret_cast<__nv_bfloat162*>(k_write + pool + i0) = lo;
      *reinterpret_cast<__nv_bfloat162*>(k_write + pool + i0 + kHalf) = hi;
    }
  } else if (threadIdx.x < kQuads + D / 8) {
    const int c = 8 * (threadIdx.x - kQuads);
    const bf16* b = bias == nullptr
                        ? nullptr
                        : bias + static_cast<int64_t>(a.num_heads + a.num_kv_heads + kvh) * D;
    const uint4 v = rope::LoadBiased8(stage + D, b, c);
    if constexpr (kFp8) {
      const uint2 v_codes = kvfp8::Encode8(v, a.v_scale[kvh]);
      if (in_ring) {
        *reinterpret_cast<uint2*>(codes + S::kVTileOffset + CodeOffset<D, true>(j, c >> 4) +
                                  (c & 15)) = v_codes;
      }
      *reinterpret_cast<uint2*>(static_cast<uint8_t*>(a.v_write) + pool + c) = v_codes;
    } else {
      if (in_ring) *reinterpret_cast<uint4*>(ring + S::kSlotElems + new_row * S::kRow + c) = v;
      *reinterpret_cast<uint4*>(static_cast<bf16*>(a.v_write) + pool + c) = v;
    }
  }
}

// kRope: with the step's RopeKvWrite fused in (RopeLoad, RopeRotate). kFp8:
// the pools are E4M3 codes (a.k_codes / a.v_codes, a.k_scale / a.v_scale).
template <int D, bool kRope, bool kFp8>
__global__ void __launch_bounds__(kThreads, kDecodeBlocksPerSm) AttnDecodeKernel(AttnArgs a) {
  using S = DecodeShape<D, kFp8>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16* ring = reinterpret_cast<bf16*>(smem_raw);     // [kSlots][kTileKeys][kRow]
  unsigned char* staging = smem_raw + S::kRingBytes;  // kFp8: [2][kCodeStageBytes] (K, V codes)
  bf16* qs = reinterpret_cast<bf16*>(smem_raw + S::kQueryOffset);  // [16][kRow]: the group's heads
  const int kvh = blockIdx.x;
  const int t = blockIdx.y;
  const int split = blockIdx.z;
  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  const int g = lane >> 2;
  const int tq = lane & 3;
  const void* k_pool = kFp8 ? static_cast<const void*>(a.k_codes) : a.k_cache;
  const void* v_pool = kFp8 ? static_cast<const void*>(a.v_codes) : a.v_cache;

  // Constant data for the kernel after this one: asked for before the wait.
  if (warp == kThreads / 32 - 1 && a.prefetch.Bytes() > 0) {
    cuda::IssueL2Prefetch(a.prefetch, (int64_t{split} * gridDim.y + t) * gridDim.x + kvh,
                          int64_t{gridDim.x} * gridDim.y * gridDim.z, lane);
  }
  // Metadata (copied before the step's kernels ran): safe before the wait.
  int s = t;
  int pos = a.start_pos[t];
  if (a.cu_query_lens[t] != t || a.cu_query_lens[t + 1] != t + 1) {
    s = FindSeq(a.cu_query_lens, a.num_seqs, t);
    pos = a.start_pos[s] + (t - a.cu_query_lens[s]);
  }
  const int len = pos + 1;
  const int per_split =
      (((len + a.num_splits - 1) / a.num_splits) + kTileKeys - 1) / kTileKeys * kTileKeys;
  const int k_lo = split * per_split;
  const int k_hi = min(len, k_lo + per_split);
  const int rounds = k_hi > k_lo ? (k_hi - k_lo + kTileKeys - 1) / kTileKeys : 0;
  // The token's own key (fused RoPE): its row from k_lo in the split that
  // holds it. A token whose key is not written (slot < 0) reads the pool's,
  // as after RopeKvWrite.
  const int new_row =
      kRope && pos >= k_lo && pos < k_hi && a.slot_mapping[t] >= 0 ? pos - k_lo : -1;
  const int32_t* table = a.block_tables + static_cast<int64_t>(s) * a.max_blocks_per_seq;
  const int key0 = threadIdx.x / S::kChunks;
  const int chunk = threadIdx.x % S::kChunks;
  int32_t slot[S::kLoads];  // cache slots of the round being issued

  cuda::PdlEnter(a.early_dependents);  // q and the newest key come from the previous kernel
  const float score_scale = kFp8 ? a.scale_log2 * KScale(a, kvh) : a.scale_log2;
  DecodeRows<D> r;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    r.m[h] = -INFINITY;
    r.l[h] = 0.0f;
  }
#pragma unroll
  for (int dn = 0; dn < S::kDimTiles; ++dn) {
#pragma unroll
    for (int e = 0; e < 4; ++e) r.o[dn][e] = 0.0f;
  }

  bf16* stage = qs + 16 * S::kRow;  // kRope: the new key's raw K and V
  if constexpr (kRope) {
    if (rounds > 0) RopeLoad<D>(a, t, kvh, new_row, qs, stage);
    cuda::CpAsyncCommit();
  } else if constexpr (kFp8) {
    if (rounds > 0) LoadQueryTile<D>(a, t, kvh, qs);  // a group of its own: converted first
    cuda::CpAsyncCommit();
  } else {
    LoadQueryTile<D>(a, t, kvh, qs);  // joins K(0)'s copy group
  }
  // BF16: load i of the ring (K(r) = 2 r, V(r) = 2 r + 1) goes to slot
  // i % 3. FP8: round r's K and V codes to stage r % 2, a copy group a round.
  bf16* k_dst0 = ring;
  bf16* v_dst0 = ring + S::kSlotElems;
  const int skip = new_row < kTileKeys ? new_row : -1;
  auto issue_fp8 = [&](int round, int skip_row) {
    unsigned char* codes = staging + (round % S::kCodeStages) * S::kCodeStageBytes;
    KeySlots<D, kFp8>(a, table, k_lo + round * kTileKeys + key0, k_hi, slot);
    IssueCodes<D, false>(k_pool, a, slot, kvh, key0, chunk, codes, skip_row);
    IssueCodes<D, true>(v_pool, a, slot, kvh, key0, chunk, codes + S::kVTileOffset, skip_row);
  };
  if constexpr (kFp8) {
    // Rounds 0 and 1 (RopeRotate writes the new key's row of either).
    if (rounds > 0) issue_fp8(0, skip);
    cuda::CpAsyncCommit();
    if (rounds > 1) {
      issue_fp8(1, new_row >= kTileKeys && new_row < 2 * kTileKeys ? new_row - kTileKeys : -1);
    }
    cuda::CpAsyncCommit();
  } else {
    if (rounds > 0) {
      KeySlots<D, kFp8>(a, table, k_lo + key0, k_hi, slot);
      IssueTile<D>(k_pool, a, slot, kvh, key0, chunk, k_dst0, skip);
    }
    cuda::CpAsyncCommit();
    if (rounds > 0) IssueTile<D>(v_pool, a, slot, kvh, key0, chunk, v_dst0, skip);
    cuda::CpAsyncCommit();
  }
  // Fused RoPE: rotate while the first copies are in flight; the first
  // round's barrier publishes the results. FP8: then the query tile to f16.
  if constexpr (kRope || kFp8) {
    if (rounds > 0) {
      cuda::CpAsyncWait<2>();  // the query's group is in
      __syncthreads();         // ... for every thread
      if constexpr (kRope) RopeRotate<D, kFp8>(a, t, kvh, new_row, qs, stage, ring, staging);
      if constexpr (kFp8) {
        if constexpr (kRope) __syncthreads();  // the rotated rows are in place
        QueryToF16<D>(qs);
      }
    }
  }
  for (int round = 0; round < rounds; ++round) {
    const bool more = round + 1 < rounds;
    const int warp_row = warp * 16 * S::kRow;
    const int key_base = k_lo + round * kTileKeys + warp * 16;
    uint32_t pa[4];
    if constexpr (kFp8) {
      const unsigned char* codes = staging + (round % S::kCodeStages) * S::kCodeStageBytes;
      cuda::CpAsyncWait<1>();  // the round's codes are in (the next round's may not be)
      __syncthreads();         // ... for every thread; every warp is past round - 1, whose
                               // stage round + 2 takes
      if (round + 2 < rounds) issue_fp8(round + 2, -1);
      cuda::CpAsyncCommit();
      ScoreKeysFp8<D>(r, qs, codes, warp, key_base, k_hi, score_scale, lane, pa);
      ApplyWeightsFp8<D>(r, pa, codes + S::kVTileOffset, warp, lane);
    } else {
      cuda::CpAsyncWait<1>();  // K(round) is in
      __syncthreads();         // ... for every warp; V(round - 1)'s slot is free
      if (more) {
        KeySlots<D, kFp8>(a, table, k_lo + (round + 1) * kTileKeys + key0, k_hi, slot);
        IssueTile<D>(k_pool, a, slot, kvh, key0, chunk,
                     ring + ((2 * round + 2) % S::kSlots) * S::kSlotElems);
      }
      cuda::CpAsyncCommit();
      ScoreKeys<D>(r, qs, ring + ((2 * round) % S::kSlots) * S::kSlotElems + warp_row, key_base,
                   k_hi, score_scale, lane, pa);
      cuda::CpAsyncWait<1>();  // V(round) is in
      __syncthreads();         // ... for every warp; K(round)'s slot is free
      if (more) {
        IssueTile<D>(v_pool, a, slot, kvh, key0, chunk,
                     ring + ((2 * round + 3) % S::kSlots) * S::kSlotElems);
      }
      cuda::CpAsyncCommit();
      ApplyWeights<D>(r, pa, ring + ((2 * round + 1) % S::kSlots) * S::kSlotElems + warp_row, lane);
    }
  }
  cuda::CpAsyncWait<0>();
  __syncthreads();  // the ring becomes the merge buffer

#pragma unroll
  for (int h = 0; h < 2; ++h) {
    r.l[h] += __shfl_xor_sync(0xffffffffu, r.l[h], 1);
    r.l[h] += __shfl_xor_sync(0xffffffffu, r.l[h], 2);
  }
  float* red = reinterpret_cast<float*>(smem_raw);  // [kWarps][16][kRedRow]
  float* red_m = red + kWarps * 16 * S::kRedRow;    // [kWarps][16]
  float* red_l = red_m + kWarps * 16;               // [kWarps][16]
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = g + 8 * h;
    if (row < a.group) {
      if constexpr (kFp8) {
        // Column n of n-tile dn is dim n D / 8 + dn (ApplyWeightsFp8).
        float* dst = red + (warp * 16 + row) * S::kRedRow + 2 * tq * (D / 8);
#pragma unroll
        for (int dn = 0; dn < S::kDimTiles; ++dn) {
          dst[dn] = r.o[dn][2 * h];
          dst[D / 8 + dn] = r.o[dn][2 * h + 1];
        }
      } else {
        float* dst = red + (warp * 16 + row) * S::kRedRow + 2 * tq;
#pragma unroll
        for (int dn = 0; dn < S::kDimTiles; ++dn) {
          *reinterpret_cast<float2*>(dst + dn * 8) =
              make_float2(r.o[dn][2 * h], r.o[dn][2 * h + 1]);
        }
      }
      if (tq == 0) {
        red_m[warp * 16 + row] = r.m[h];
        red_l[warp * 16 + row] = r.l[h];
      }
    }
  }
  __syncthreads();
  MergeWarpsAndStore<D, S::kRedRow>(a, red, red_m, red_l, 16, t, kvh, split,
                                    kFp8 ? VScale(a, kvh) : 1.0f);
}

template <int D, bool kRope, bool kFp8>
absl::Status LaunchDecode(const AttnArgs& a, int num_tokens, cudaStream_t stream) {
  using S = DecodeShape<D, kFp8>;
  return LaunchAttention<AttnDecodeKernel<D, kRope, kFp8>>(
      kRope ? S::kSmemBytes + S::kStageBytes : S::kSmemBytes,
      dim3(a.num_kv_heads, num_tokens, a.num_splits), stream, a);
}

template <int D, bool kFp8>
absl::Status LaunchDecodeDim(const AttnArgs& a, int num_tokens, bool rope, cudaStream_t stream) {
  return rope ? LaunchDecode<D, true, kFp8>(a, num_tokens, stream)
              : LaunchDecode<D, false, kFp8>(a, num_tokens, stream);
}

}  // namespace

absl::Status LaunchFlashDecode(const AttnArgs& a, int head_dim, int num_tokens, bool rope,
                               cudaStream_t stream) {
  if (a.k_codes != nullptr) {
    return head_dim == 64 ? LaunchDecodeDim<64, true>(a, num_tokens, rope, stream)
                          : LaunchDecodeDim<128, true>(a, num_tokens, rope, stream);
  }
  return head_dim == 64 ? LaunchDecodeDim<64, false>(a, num_tokens, rope, stream)
                        : LaunchDecodeDim<128, false>(a, num_tokens, rope, stream);
}

}  // namespace onecard::engine::attention
