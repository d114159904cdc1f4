// The Hopper prefill kernel of PagedAttention (see paged_attention_split.h;
// the mma.sync prefill kernel that other cards run is in
// paged_attention_flash.cu, decode in paged_attention_decode.cu):
//
// AttnFlashSm90Kernel: block = 128 query rows of one kv head, two
// warpgroups of 64 rows (4 warps of 16): 128 / group tokens of one chunk x
// the group's query heads (GQA packing: every K / V tile serves the whole
// group, and 128 rows: 128 FLOP a byte of K / V brought to the SM). Per
// 64-key tile t, each warpgroup issues S(t) = Q K(t)^T (D / 16 wgmma
// m64n64k16, Q's fragments in registers at head_dim 128, in shared memory
// at 64, see kQInSmem) and behind it O += P(t - 1) V(t - 1) (4 wgmma
// m64n{D}k16, P in registers, V read N-major), and turns S(t) into P(t)
// (scale, causal mask only on tiles that reach past the block's first
// query, online softmax in base 2) while the tensor cores run P V(t - 1).
// K / V tiles stream in with cp.async two tiles ahead, four stages, into
// 128-byte swizzled rows:
//
//   one tile of K (or V), head_dim D = 64 * panels, 64 keys:
//     panel p (dims 64p .. 64p + 63) = 64 rows of 128 bytes, 8 KB,
//     key j's dims 64p + 8c .. + 7 (16-byte chunk c) at
//       p * 8192 + j * 128 + ((c ^ (j % 8)) * 16)
//
// which both products read without bank conflicts: S's K operand K-major
// (a 16-dim step moves 32 bytes inside the row, 8-key groups 1 KB apart),
// O's V operand N-major (panels 8 KB apart, 8-key groups 1 KB apart).
// Blocks run heaviest first (the last query tiles of a chunk see the most
// keys), the kv heads of one tile side by side.
//
// An FP8 cache (kFp8): the copies land as codes in staging tiles that each
// thread widens itself (its own copies) to f16 in the swizzled tiles before
// the barrier that publishes them; Q and P are f16, the K scale multiplies
// the scores and the V scale the output.
//
// Its reference is PagedAttentionRef (paged_attention_ref.cc), as for every
// PagedAttention kernel; tested by tests/gpu/paged_attention_test.cc and
// paged_attention_fp8_test.cc.
#include <algorithm>

#include "engine/kernels/cuda_ptx.cuh"
#include "engine/kernels/cuda_wgmma.cuh"
#include "engine/kernels/kv_fp8.cuh"
#include "engine/kernels/paged_attention_internal.cuh"

namespace onecard::engine::attention {
namespace {

constexpr int kSm90Threads = 256;  // two warpgroups
constexpr int kSm90Rows = 128;     // query rows a block: 64 a warpgroup

template <int D, bool kFp8>
struct Sm90Shape {
  static constexpr int kPanels = D / 64;
  static constexpr int kPanelBytes = kTileKeys * 128;
  static constexpr int kTileBytes = kPanels * kPanelBytes;  // K or V of one tile
  // Tile t + 2 loads while S(t) and P V(t - 1) run: four stages.
  static constexpr int kStages = 4;
  static constexpr int kCodeBytes = kTileKeys * D;  // FP8: K or V codes of one tile
  static constexpr int kSteps = D / 16;             // k-steps of Q K^T
  // Q's A operand from shared memory (the 128 query rows as one swizzled
  // tile) rather than registers: at head_dim 64 ptxas 13.0 gave the P
  // fragments of P V the registers that held Q's, which the next tile's
  // Q K^T then read (measured: every tile after the first wrong); 128 does
  // not, and keeps the shared memory.
  static constexpr bool kQInSmem = D == 64;
  static constexpr int kQBytes = kQInSmem ? kSm90Rows * 128 : 0;
  // 1 KB of slack to align the tiles to the 1024-byte swizzle atom.
  static constexpr int kSmemBytes =
      1024 + kStages * 2 * kTileBytes + kQBytes + (kFp8 ? kStages * 2 * kCodeBytes : 0);
};

// Byte offset of key j's 16-byte chunk c (dims 8c .. 8c + 7) in a tile.
template <int D>
__device__ __forceinline__ int SwizzledChunk(int j, int c) {
  return (c >> 3) * (kTileKeys * 128) + j * 128 + (((c & 7) ^ (j & 7)) << 4);
}

template <int D, int kElems, int kElemBytes>
using KvChunksSm90 = KvChunks<D, kElems, kElemBytes, kSm90Threads>;

// Keys [k_begin, k_begin + kTileKeys) into the swizzled K and V tiles; keys
// >= kv_len are zeros.
template <int D>
__device__ __forceinline__ void LoadTileSm90(const AttnArgs& a, const KvChunksSm90<D, 8, 2>& chunks,
                                             const int32_t* table, int k_begin, int kv_len,
                                             unsigned char* ks, unsigned char* vs) {
  const auto* k = reinterpret_cast<const unsigned char*>(a.k_cache);
  const auto* v = reinterpret_cast<const unsigned char*>(a.v_cache);
  chunks.ForEach(a, table, k_begin, kv_len, [&](int j, int c, uint64_t off, bool valid) {
    const int dst = SwizzledChunk<D>(j, c);
    cuda::CpAsync16(ks + dst, k + off, valid);
    cuda::CpAsync16(vs + dst, v + off, valid);
  });
}

// FP8: the thread's own chunks of LoadKvCodes (landed) widened to f16 in
// the swizzled tiles.
template <int D>
__device__ __forceinline__ void WidenTileSm90(const unsigned char* ks8, const unsigned char* vs8,
                                              unsigned char* ks, unsigned char* vs) {
  constexpr int kChunks = D / 16;
  for (int i = threadIdx.x; i < kTileKeys * kChunks; i += kSm90Threads) {
    const int j = i / kChunks;
    const int c = i - j * kChunks;
    uint4 lo, hi;
    kvfp8::Widen16(*reinterpret_cast<const uint4*>(ks8 + j * D + c * 16), &lo, &hi);
    *reinterpret_cast<uint4*>(ks + SwizzledChunk<D>(j, 2 * c)) = lo;
    *reinterpret_cast<uint4*>(ks + SwizzledChunk<D>(j, 2 * c + 1)) = hi;
    kvfp8::Widen16(*reinterpret_cast<const uint4*>(vs8 + j * D + c * 16), &lo, &hi);
    *reinterpret_cast<uint4*>(vs + SwizzledChunk<D>(j, 2 * c)) = lo;
    *reinterpret_cast<uint4*>(vs + SwizzledChunk<D>(j, 2 * c + 1)) = hi;
  }
}

// o (+)= p x V for one 16-key step: m64n{D}k16, V N-major.
template <int D, bool kFp8>
__device__ __forceinline__ void MmaPv(float (&o)[D / 2], const uint32_t (&p)[4], uint64_t desc) {
  if constexpr (D == 128) {
    cuda::WgmmaM64N128K16<kFp8, 1>(o, p, desc, true);
  } else {
    cuda::WgmmaM64N64K16<kFp8, 1>(o, p, desc, true);
  }
}

// Writes one row's output (o values c0,c1 or c2,c3 of every 8-dim tile) / l.
template <int D>
__device__ __forceinline__ void StoreRowSm90(bf16* out_row, const float (&o)[D / 2], int half,
                                             float l, float out_scale, int tq) {
  const float inv = out_scale / l;
#pragma unroll
  for (int dn = 0; dn < D / 8; ++dn) {
    *reinterpret_cast<uint32_t*>(out_row + dn * 8 + 2 * tq) =
        cuda::PackBf16x2(o[4 * dn + 2 * half] * inv, o[4 * dn + 2 * half + 1] * inv);
  }
}

// One tile's raw scores sc (S's C fragments: sc[4 nt + e] is key
// key_base + 8 nt + 2 tq + (e & 1) of row r0 (e < 2) or r1): masked where a
// key may pass a row's position, turned into exp2(s score_scale - m) with
// the rows' running max m (scaled) updated; returns the old max's factors
// al (rows r0, r1) and adds the tile's sums into l.
struct SoftmaxRows {
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;
};

__device__ __forceinline__ void SoftmaxTile(float (&sc)[32], SoftmaxRows& r, bool masked,
                                            int key_base, int qpos0, int qpos1, float score_scale,
                                            int tq, float* al0, float* al1) {
  // The max of the raw scores scaled is the max of the scaled ones (the
  // scale is positive), so the scale folds into the exponent's FMA.
  if (masked) {
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int kpos = key_base + nt * 8 + 2 * tq + e;
        if (kpos > qpos0) sc[4 * nt + e] = -INFINITY;
        if (kpos > qpos1) sc[4 * nt + 2 + e] = -INFINITY;
      }
    }
  }
  float raw0 = -INFINITY, raw1 = -INFINITY;
#pragma unroll
  for (int nt = 0; nt < 8; ++nt) {
    raw0 = fmaxf(raw0, fmaxf(sc[4 * nt], sc[4 * nt + 1]));
    raw1 = fmaxf(raw1, fmaxf(sc[4 * nt + 2], sc[4 * nt + 3]));
  }
  raw0 = fmaxf(raw0, __shfl_xor_sync(0xffffffffu, raw0, 1));
  raw0 = fmaxf(raw0, __shfl_xor_sync(0xffffffffu, raw0, 2));
  raw1 = fmaxf(raw1, __shfl_xor_sync(0xffffffffu, raw1, 1));
  raw1 = fmaxf(raw1, __shfl_xor_sync(0xffffffffu, raw1, 2));
  // Every row sees key 0 in the first tile, so the maxima are finite here.
  const float mx0 = fmaxf(r.m0, raw0 * score_scale);
  const float mx1 = fmaxf(r.m1, raw1 * score_scale);
  *al0 = cuda::Exp2Approx(r.m0 - mx0);
  *al1 = cuda::Exp2Approx(r.m1 - mx1);
  r.m0 = mx0;
  r.m1 = mx1;
  float rs0 = 0.0f, rs1 = 0.0f;
#pragma unroll
  for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      sc[4 * nt + e] = cuda::Exp2Approx(fmaf(sc[4 * nt + e], score_scale, -mx0));
      sc[4 * nt + 2 + e] = cuda::Exp2Approx(fmaf(sc[4 * nt + 2 + e], score_scale, -mx1));
      rs0 += sc[4 * nt + e];
      rs1 += sc[4 * nt + 2 + e];
    }
  }
  r.l0 = r.l0 * *al0 + rs0;
  r.l1 = r.l1 * *al1 + rs1;
}

template <int D, bool kFp8>
__global__ void __launch_bounds__(kSm90Threads, 1) AttnFlashSm90Kernel(AttnArgs a) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using S = Sm90Shape<D, kFp8>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  unsigned char* smem = smem_raw + ((1024 - (cuda::SmemAddr(smem_raw) & 1023)) & 1023);
  unsigned char* k_tiles = smem;                                  // [kStages][kTileBytes]
  unsigned char* v_tiles = k_tiles + S::kStages * S::kTileBytes;  // [kStages][kTileBytes]
  unsigned char* q_tile = v_tiles + S::kStages * S::kTileBytes;   // kQInSmem: [kQBytes]
  unsigned char* k_codes = q_tile + S::kQBytes;                   // kFp8: [kStages][kCodeBytes]
  unsigned char* v_codes = k_codes + S::kStages * S::kCodeBytes;  // kFp8: [kStages][kCodeBytes]
  // GQA packing: the block's 128 rows are `tokens` query tokens x hg query
  // heads of one kv head (row r: token r / hg, head r % hg), so the group's
  // heads share each K / V tile.
  const int hg = min(a.group, kSm90Rows);
  const int tokens = kSm90Rows / hg;
  const int head_chunks = (a.group + hg - 1) / hg;
  const int kvh = static_cast<int>(blockIdx.x) / head_chunks;
  const int h_first = kvh * a.group + (static_cast<int>(blockIdx.x) - kvh * head_chunks) * hg;
  const int h_end = (kvh + 1) * a.group;  // the group's heads past h_first
  cuda::GridDependencyWait();
  cuda::LaunchDependents();
  PrefillTile tile_q;  // heaviest tiles first
  if (!FindPrefillTile(a, static_cast<int>(gridDim.y - 1 - blockIdx.y), tokens, &tile_q)) return;
  const int s = tile_q.s, q_begin = tile_q.q_begin, q_end = tile_q.q_end;
  const int pos0 = tile_q.pos0, last_pos = tile_q.last_pos;
  const int kv_len = last_pos + 1;
  const int num_tiles = (kv_len + kTileKeys - 1) / kTileKeys;
  const int32_t* table = a.block_tables + static_cast<int64_t>(s) * a.max_blocks_per_seq;
  const int wg = threadIdx.x >> 7;  // warpgroup: rows 64 wg ..
  const int warp = (threadIdx.x >> 5) & 3;
  const int lane = threadIdx.x & 31;
  const int g = lane >> 2;
  const int tq = lane & 3;
  // Row r's query (token, head) and whether it is stored: rows past the
  // tile's tokens or the group's heads copy a live row.
  auto row_token = [&](int r) { return min(q_begin + r / hg, q_end - 1); };
  auto row_head = [&](int r) { return min(h_first + r % hg, h_end - 1); };
  auto row_live = [&](int r) {
    return r < tokens * hg && q_begin + r / hg < q_end && h_first + r % hg < h_end;
  };
  auto row_q = [&](int r) {
    return a.q + row_token(r) * a.q_stride + static_cast<int64_t>(row_head(r)) * D;
  };
  const int r0 = wg * 64 + warp * 16 + g;
  const int r1 = r0 + 8;
  const int qpos0 = min(pos0 + r0 / hg, last_pos);
  const int qpos1 = min(pos0 + r1 / hg, last_pos);
  if constexpr (S::kQInSmem) {
    // FP8: f16 like K.
    for (int i = threadIdx.x; i < kSm90Rows * (D / 8); i += kSm90Threads) {
      const int r = i / (D / 8);
      const int c = i - r * (D / 8);
      uint4 v = *reinterpret_cast<const uint4*>(row_q(r) + c * 8);
      if constexpr (kFp8) {
        v = make_uint4(kvfp8::Bf16x2ToF16x2(v.x), kvfp8::Bf16x2ToF16x2(v.y),
                       kvfp8::Bf16x2ToF16x2(v.z), kvfp8::Bf16x2ToF16x2(v.w));
      }
      *reinterpret_cast<uint4*>(q_tile + SwizzledChunk<D>(r, c)) = v;
    }
  }
  // kQInSmem: unused (the compiler drops it).
  const bf16* q0 = row_q(r0);
  const bf16* q1 = row_q(r1);
  uint32_t qa[S::kQInSmem ? 1 : S::kSteps][4];
  if constexpr (!S::kQInSmem) LoadQueryFragments<kFp8>(q0, q1, tq, qa);
  const float score_scale = kFp8 ? a.scale_log2 * KScale(a, kvh) : a.scale_log2;
  float o[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) o[i] = 0.0f;
  SoftmaxRows sm;
  uint32_t pa[4][4];  // the previous tile's P, A fragments of its 16-key steps
  const uint32_t k_addr = cuda::SmemAddr(k_tiles);
  const uint32_t v_addr = cuda::SmemAddr(v_tiles);
  const uint32_t q_addr = cuda::SmemAddr(q_tile) + wg * 64 * 128;

  // Tile i goes to stage i % kStages (FP8: its codes to staging i % kStages,
  // widened by the threads that copied them).
  const KvChunksSm90<D, kFp8 ? 16 : 8, kFp8 ? 1 : 2> chunks(a, kvh);
  auto load = [&](int tile) {
    const int st = tile % S::kStages;
    if constexpr (kFp8) {
      LoadKvCodes<D, kSm90Threads>(a, chunks, table, tile * kTileKeys, kv_len,
                                   k_codes + st * S::kCodeBytes, v_codes + st * S::kCodeBytes);
    } else {
      LoadTileSm90<D>(a, chunks, table, tile * kTileKeys, kv_len, k_tiles + st * S::kTileBytes,
                      v_tiles + st * S::kTileBytes);
    }
  };
  // O += P V over the previous tile's stage.
  auto issue_pv = [&](int st) {
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {
      const uint64_t desc = cuda::SmemDescriptor128B(v_addr + st * S::kTileBytes + ks * 16 * 128,
                                                     S::kPanelBytes, 1024);
      MmaPv<D, kFp8>(o, pa[ks], desc);
    }
  };
  load(0);
  cuda::CpAsyncCommit();
  if (num_tiles > 1) load(1);
  cuda::CpAsyncCommit();
  // Iteration t: S(t) = Q K(t), and P V(t - 1) behind it on the tensor
  // cores while this warpgroup turns S(t) into P(t); tile t + 2 loads.
  for (int tile = 0; tile < num_tiles; ++tile) {
    const int st = tile % S::kStages;
    cuda::CpAsyncWait<1>();  // tile t landed (t + 1 may not have)
    if constexpr (kFp8) {
      WidenTileSm90<D>(k_codes + st * S::kCodeBytes, v_codes + st * S::kCodeBytes,
                       k_tiles + st * S::kTileBytes, v_tiles + st * S::kTileBytes);
    }
    cuda::FenceProxyAsyncShared();
    // Tile t is visible, and every warp is past iteration t - 1, so P V(t - 2)
    // is done and its stage (that of t + 2) is free.
    __syncthreads();

    float sc[32];
    cuda::KeepOperands(o);
    cuda::KeepOperands(pa);
    cuda::WgmmaFence();
#pragma unroll
    for (int kk = 0; kk < S::kSteps; ++kk) {
      const uint32_t k_step = (kk >> 2) * S::kPanelBytes + (kk & 3) * 32;
      const uint64_t desc =
          cuda::SmemDescriptor128B(k_addr + st * S::kTileBytes + k_step, 16, 1024);
      if constexpr (S::kQInSmem) {
        cuda::WgmmaM64N64K16Ss<kFp8>(sc, cuda::SmemDescriptor128B(q_addr + k_step, 16, 1024), desc,
                                     kk > 0);
      } else {
        cuda::WgmmaM64N64K16<kFp8, 0>(sc, qa[kk], desc, kk > 0);
      }
    }
    cuda::WgmmaCommit();
    // Tile t + 2's copies (block-table reads, addresses) go behind the
    // products.
    if (tile > 0) {
      issue_pv((tile - 1) % S::kStages);
      cuda::WgmmaCommit();
      if (tile + 2 < num_tiles) load(tile + 2);
      cuda::CpAsyncCommit();
      cuda::WgmmaWait<1>();  // S(t) done; P V(t - 1) may run on
    } else {
      if (num_tiles > 2) load(2);
      cuda::CpAsyncCommit();
      cuda::WgmmaWait<0>();
    }
    cuda::KeepOperands(sc);

    // Tiles with a key past the block's first query are masked.
    const int key_base = tile * kTileKeys;
    float al0, al1;
    SoftmaxTile(sc, sm, key_base + kTileKeys - 1 > pos0, key_base, qpos0, qpos1, score_scale, tq,
                &al0, &al1);
    cuda::WgmmaWait<0>();  // P V(t - 1) done: O and P are free
    cuda::KeepOperands(o);
#pragma unroll
    for (int dn = 0; dn < D / 8; ++dn) {
      o[4 * dn] *= al0;
      o[4 * dn + 1] *= al0;
      o[4 * dn + 2] *= al1;
      o[4 * dn + 3] *= al1;
    }
    // P's 16-key steps as A fragments (the C layout of S is the A layout of
    // P, two 8-key tiles a step).
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {
      pa[ks][0] = PackPair<kFp8>(sc[8 * ks], sc[8 * ks + 1]);
      pa[ks][1] = PackPair<kFp8>(sc[8 * ks + 2], sc[8 * ks + 3]);
      pa[ks][2] = PackPair<kFp8>(sc[8 * ks + 4], sc[8 * ks + 5]);
      pa[ks][3] = PackPair<kFp8>(sc[8 * ks + 6], sc[8 * ks + 7]);
    }
  }
  // The last tile's P V.
  cuda::KeepOperands(o);
  cuda::KeepOperands(pa);
  cuda::WgmmaFence();
  issue_pv((num_tiles - 1) % S::kStages);
  cuda::WgmmaCommit();
  cuda::WgmmaWait<0>();
  cuda::KeepOperands(o);
  cuda::CpAsyncWait<0>();
  float l0 = sm.l0, l1 = sm.l1;
  l0 += __shfl_xor_sync(0xffffffffu, l0, 1);
  l0 += __shfl_xor_sync(0xffffffffu, l0, 2);
  l1 += __shfl_xor_sync(0xffffffffu, l1, 1);
  l1 += __shfl_xor_sync(0xffffffffu, l1, 2);
  const float out_scale = kFp8 ? VScale(a, kvh) : 1.0f;
  if (row_live(r0)) {
    StoreRowSm90<D>(a.out + (static_cast<int64_t>(row_token(r0)) * a.num_heads + row_head(r0)) * D,
                    o, 0, l0, out_scale, tq);
  }
  if (row_live(r1)) {
    StoreRowSm90<D>(a.out + (static_cast<int64_t>(row_token(r1)) * a.num_heads + row_head(r1)) * D,
                    o, 1, l1, out_scale, tq);
  }
#endif  // __CUDA_ARCH_FEAT_SM90_ALL
}

template <int D, bool kFp8>
absl::Status LaunchSm90(const AttnArgs& a, int num_tokens, cudaStream_t stream) {
  constexpr auto kKernel = AttnFlashSm90Kernel<D, kFp8>;
  constexpr int kSmem = Sm90Shape<D, kFp8>::kSmemBytes;
  // The kernel's GQA packing: tiles of 128 / min(group, 128) tokens, which
  // never cross chunks: at most ceil(T / tokens) + num_seqs of them.
  const int hg = std::min(a.group, kSm90Rows);
  const int64_t tiles = cuda::CeilDiv(num_tokens, kSm90Rows / hg) + a.num_seqs;
  // The tiles are the grid's y (at most 65535): a step of more tokens (up
  // to 2^20 with 8 tokens a tile at group 16) takes the mma.sync kernel,
  // whose tiles are its x.
  if (tiles > 65535) return LaunchFlashPrefill(a, D, num_tokens, stream);
  const dim3 grid(a.num_kv_heads * cuda::CeilDiv(a.group, hg), static_cast<unsigned>(tiles));
  return LaunchAttention<kKernel, kSm90Threads>(kSmem, grid, stream, a);
}

}  // namespace

absl::Status LaunchFlashPrefillSm90(const AttnArgs& a, int head_dim, int num_tokens,
                                    cudaStream_t stream) {
  const bool fp8 = a.k_codes != nullptr;
  if (head_dim == 64) {
    return fp8 ? LaunchSm90<64, true>(a, num_tokens, stream)
               : LaunchSm90<64, false>(a, num_tokens, stream);
  }
  return fp8 ? LaunchSm90<128, true>(a, num_tokens, stream)
             : LaunchSm90<128, false>(a, num_tokens, stream);
}

}  // namespace onecard::engine::attention
