// The tensor-core (mma.sync m16n8k16 bf16, fp32 accumulators) prefill kernel
// of PagedAttention (see paged_attention_split.h; decode is in
// paged_attention_decode.cu):
//
// Prefill (AttnFlashKernel): block (64-query tile of one chunk, query head),
// 4 warps of 16 rows. S = Q K^T and O += P V with K via ldmatrix and V via
// ldmatrix.trans from padded shared-memory rows (no bank conflicts), causal
// mask by position, online softmax in registers (base 2), P rounded to bf16
// for the second product (as FlashAttention 2). 64-key tiles stream in with
// cp.async, two buffers.
//
// An FP8 cache (kFp8; PagedAttentionParams::kv_fp8): the copies land as
// codes in staging tiles that each thread widens itself (its own copies) to
// f16 in the 16-bit tiles before the barrier that publishes them; Q is
// converted to f16 fragments, P packed as f16, the K scale multiplies the
// scores and the V scale the output. 100 KB of shared memory at head_dim
// 128 (2 blocks an SM, against 3 for BF16).
//
// No x_ref.cc of its own by design: this kernel implements the PagedAttention
// op (paged_attention.h), so its reference, PagedAttentionRef
// (paged_attention_ref.cc), is its reference. Tested by tests/gpu/paged_attention_test.cc.
#include "engine/kernels/cuda_ptx.cuh"
#include "engine/kernels/kv_fp8.cuh"
#include "engine/kernels/paged_attention_internal.cuh"

namespace onecard::engine::attention {
namespace {

template <int D>
struct FlashShape {
  static constexpr int kRow = D + 8;       // padded smem row (elements): no bank conflicts
  static constexpr int kSteps = D / 16;    // k-steps of Q K^T
  static constexpr int kDimTiles = D / 8;  // n-tiles of P V
  static constexpr int kTileBytes = 2 * 2 * kTileKeys * kRow * 2;  // [2 buffers][K, V] 16-bit
  static constexpr int kStagingBytes = 2 * 2 * kTileKeys * D;      // FP8: [2][K, V] codes
  static constexpr int kSmemBytes = kTileBytes;
  static constexpr int kSmemBytesFp8 = kTileBytes + kStagingBytes;
};

// Keys [k_begin, k_begin + kTileKeys) of one kv head; keys >= kv_len are zeros.
template <int D>
__device__ __forceinline__ void LoadTileFlash(const AttnArgs& a,
                                              const KvChunks<D, 8, 2, kThreads>& chunks,
                                              const int32_t* table, int k_begin, int kv_len,
                                              bf16* ks, bf16* vs) {
  constexpr int kRow = FlashShape<D>::kRow;
  const auto* k = reinterpret_cast<const unsigned char*>(a.k_cache);
  const auto* v = reinterpret_cast<const unsigned char*>(a.v_cache);
  chunks.ForEach(a, table, k_begin, kv_len, [&](int j, int c, uint64_t off, bool valid) {
    cuda::CpAsync16(ks + j * kRow + c * 8, k + off, valid);
    cuda::CpAsync16(vs + j * kRow + c * 8, v + off, valid);
  });
}

// FP8: the thread's own chunks of LoadKvCodes (landed) widened to f16.
template <int D>
__device__ __forceinline__ void WidenTileFlash(const unsigned char* ks8, const unsigned char* vs8,
                                               bf16* ks, bf16* vs) {
  constexpr int kChunks = D / 16;
  constexpr int kRow = FlashShape<D>::kRow;
  for (int i = threadIdx.x; i < kTileKeys * kChunks; i += kThreads) {
    const int j = i / kChunks;
    const int c = i - j * kChunks;
    uint4 lo, hi;
    kvfp8::Widen16(*reinterpret_cast<const uint4*>(ks8 + j * D + c * 16), &lo, &hi);
    reinterpret_cast<uint4*>(ks + j * kRow + c * 16)[0] = lo;
    reinterpret_cast<uint4*>(ks + j * kRow + c * 16)[1] = hi;
    kvfp8::Widen16(*reinterpret_cast<const uint4*>(vs8 + j * D + c * 16), &lo, &hi);
    reinterpret_cast<uint4*>(vs + j * kRow + c * 16)[0] = lo;
    reinterpret_cast<uint4*>(vs + j * kRow + c * 16)[1] = hi;
  }
}

template <int D>
struct FlashRows {
  float o[FlashShape<D>::kDimTiles][4];
  float m0, m1, l0, l1;  // rows g and g + 8 of the warp's 16
};

template <bool kFp8>
__device__ __forceinline__ void Mma(float* c, const uint32_t* a, uint32_t b0, uint32_t b1) {
  if constexpr (kFp8) {
    cuda::MmaF16(c, a, b0, b1);
  } else {
    cuda::MmaBf16(c, a, b0, b1);
  }
}

// One 64-key tile: scores, mask, online softmax, and O += P V. kFp8: f16
// operands.
template <int D, bool kFp8>
__device__ __forceinline__ void FlashTile(FlashRows<D>& r, const uint32_t (*qa)[4], const bf16* kb,
                                          const bf16* vb, int key_base, int qpos0, int qpos1,
                                          float scale_log2, int lane) {
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
      Mma<kFp8>(sacc[nt], qa[kk], b[0], b[1]);
      Mma<kFp8>(sacc[nt], qa[kk + 1], b[2], b[3]);
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
    const uint32_t pa[4] = {PackPair<kFp8>(sacc[2 * ks][0], sacc[2 * ks][1]),
                            PackPair<kFp8>(sacc[2 * ks][2], sacc[2 * ks][3]),
                            PackPair<kFp8>(sacc[2 * ks + 1][0], sacc[2 * ks + 1][1]),
                            PackPair<kFp8>(sacc[2 * ks + 1][2], sacc[2 * ks + 1][3])};
#pragma unroll
    for (int dn = 0; dn < S::kDimTiles; dn += 2) {
      uint32_t b[4];
      const int key = ks * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
      cuda::LdMatrixX4Trans(b, vb + key * S::kRow + dn * 8 + (lane >> 4) * 8);
      Mma<kFp8>(r.o[dn], pa, b[0], b[1]);
      Mma<kFp8>(r.o[dn + 1], pa, b[2], b[3]);
    }
  }
}

// Writes one row's output (o values c0,c1 or c2,c3 of every dim tile) / l.
template <int D>
__device__ __forceinline__ void StoreFlashRow(bf16* out_row, const float (*o)[4], int half, float l,
                                              float out_scale, int tq) {
  const float inv = out_scale / l;
#pragma unroll
  for (int dn = 0; dn < FlashShape<D>::kDimTiles; ++dn) {
    *reinterpret_cast<uint32_t*>(out_row + dn * 8 + 2 * tq) =
        cuda::PackBf16x2(o[dn][2 * half] * inv, o[dn][2 * half + 1] * inv);
  }
}

template <int D, bool kFp8>
__global__ void __launch_bounds__(kThreads) AttnFlashKernel(AttnArgs a) {
  using S = FlashShape<D>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  bf16* ks = reinterpret_cast<bf16*>(smem_raw);   // [2][kTileKeys][kRow]
  bf16* vs = ks + 2 * kTileKeys * S::kRow;        // [2][kTileKeys][kRow]
  unsigned char* ks8 = smem_raw + S::kTileBytes;  // kFp8: [2][kTileKeys][D] codes
  unsigned char* vs8 = ks8 + 2 * kTileKeys * D;   // kFp8: [2][kTileKeys][D] codes
  const int h = blockIdx.y;
  const int kvh = h / a.group;
  cuda::GridDependencyWait();
  cuda::LaunchDependents();
  PrefillTile tile_q;
  if (!FindPrefillTile(a, blockIdx.x, 64, &tile_q)) return;
  const int s = tile_q.s, q_begin = tile_q.q_begin, q_end = tile_q.q_end;
  const int pos0 = tile_q.pos0, last_pos = tile_q.last_pos;
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
  LoadQueryFragments<kFp8>(q0, q1, tq, qa);
  const float score_scale = kFp8 ? a.scale_log2 * KScale(a, kvh) : a.scale_log2;
  FlashRows<D> r;
  r.m0 = r.m1 = -INFINITY;
  r.l0 = r.l1 = 0.0f;
#pragma unroll
  for (int dn = 0; dn < S::kDimTiles; ++dn) {
#pragma unroll
    for (int e = 0; e < 4; ++e) r.o[dn][e] = 0.0f;
  }
  // Tile i goes to buffer i % 2 (FP8: its codes to staging buffer i % 2,
  // widened into buffer i % 2 by the threads that copied them).
  const KvChunks<D, kFp8 ? 16 : 8, kFp8 ? 1 : 2, kThreads> chunks(a, kvh);
  auto load = [&](int tile, int buf) {
    if constexpr (kFp8) {
      LoadKvCodes<D, kThreads>(a, chunks, table, tile * kTileKeys, kv_len,
                               ks8 + buf * kTileKeys * D, vs8 + buf * kTileKeys * D);
    } else {
      LoadTileFlash<D>(a, chunks, table, tile * kTileKeys, kv_len, ks + buf * kTileKeys * S::kRow,
                       vs + buf * kTileKeys * S::kRow);
    }
  };
  load(0, 0);
  cuda::CpAsyncCommit();
  for (int tile = 0; tile < num_tiles; ++tile) {
    const int buf = tile & 1;
    if (tile + 1 < num_tiles) load(tile + 1, buf ^ 1);
    cuda::CpAsyncCommit();
    cuda::CpAsyncWait<1>();
    if constexpr (kFp8) {
      WidenTileFlash<D>(ks8 + buf * kTileKeys * D, vs8 + buf * kTileKeys * D,
                        ks + buf * kTileKeys * S::kRow, vs + buf * kTileKeys * S::kRow);
    }
    __syncthreads();
    FlashTile<D, kFp8>(r, qa, ks + buf * kTileKeys * S::kRow, vs + buf * kTileKeys * S::kRow,
                       tile * kTileKeys, qpos0, qpos1, score_scale, lane);
    __syncthreads();
  }
  cuda::CpAsyncWait<0>();
  r.l0 += __shfl_xor_sync(0xffffffffu, r.l0, 1);
  r.l0 += __shfl_xor_sync(0xffffffffu, r.l0, 2);
  r.l1 += __shfl_xor_sync(0xffffffffu, r.l1, 1);
  r.l1 += __shfl_xor_sync(0xffffffffu, r.l1, 2);
  const float out_scale = kFp8 ? VScale(a, kvh) : 1.0f;
  if (q_begin + r0 < q_end) {
    StoreFlashRow<D>(a.out + (static_cast<int64_t>(q_begin + r0) * a.num_heads + h) * D, r.o, 0,
                     r.l0, out_scale, tq);
  }
  if (q_begin + r1 < q_end) {
    StoreFlashRow<D>(a.out + (static_cast<int64_t>(q_begin + r1) * a.num_heads + h) * D, r.o, 1,
                     r.l1, out_scale, tq);
  }
}

// --------------------------------------------------------------- launchers

template <int D>
absl::Status LaunchPrefill(const AttnArgs& a, int num_tokens, cudaStream_t stream) {
  // Tiles never cross chunks: at most ceil(T / 64) + num_seqs of them.
  const dim3 grid(static_cast<unsigned>(cuda::CeilDiv(num_tokens, 64) + a.num_seqs), a.num_heads);
  if (a.k_codes != nullptr) {
    return LaunchAttention<AttnFlashKernel<D, true>>(FlashShape<D>::kSmemBytesFp8, grid, stream, a);
  }
  return LaunchAttention<AttnFlashKernel<D, false>>(FlashShape<D>::kSmemBytes, grid, stream, a);
}

}  // namespace

absl::Status LaunchFlashPrefill(const AttnArgs& a, int head_dim, int num_tokens,
                                cudaStream_t stream) {
  return head_dim == 64 ? LaunchPrefill<64>(a, num_tokens, stream)
                        : LaunchPrefill<128>(a, num_tokens, stream);
}

}  // namespace onecard::engine::attention
