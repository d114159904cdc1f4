// Internal to engine/kernels/paged_attention*.cu: the argument block of the
// attention kernels, the paged-KV index math they share, and the launchers of
// the tensor-core kernels (paged_attention_flash*.cu) that the dispatch in
// paged_attention.cu calls. Tested through tests/gpu/paged_attention_test.cc.
#ifndef ONECARD_ENGINE_KERNELS_PAGED_ATTENTION_INTERNAL_CUH_
#define ONECARD_ENGINE_KERNELS_PAGED_ATTENTION_INTERNAL_CUH_

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "absl/status/status.h"
#include "engine/kernels/cuda_check.h"
#include "engine/kernels/cuda_common.cuh"
#include "engine/kernels/cuda_ptx.cuh"
#include "engine/kernels/kv_fp8.cuh"
#include "engine/kernels/l2_prefetch.h"

namespace onecard::engine::attention {

using cuda::bf16;

constexpr int kTileKeys = 64;
constexpr int kWarps = 4;
constexpr int kThreads = 128;
constexpr float kLog2e = 1.4426950408889634f;
constexpr int kMaxGroup = 16;
constexpr int kMaxSplits = 64;

struct AttnArgs {
  const bf16* q;
  int64_t q_stride;
  const bf16* k_cache;
  const bf16* v_cache;
  bf16* out;
  float* o_part;    // [num_tokens, num_heads, num_splits, head_dim]
  float2* ml_part;  // [num_tokens, num_heads, num_splits]: (max, sum), base 2
  int32_t block_size;
  int32_t block_shift;  // log2(block_size) when a power of two, else -1
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
  // The flash decode kernel with the step's RopeKvWrite fused in
  // (LaunchFlashDecode's `rope`): q is the projection's raw packed qkv rows;
  // null otherwise.
  const bf16* qkv_bias;         // [(num_heads + 2 num_kv_heads) * head_dim] or null
  const float* inv_freq;        // [head_dim / 2]
  const int32_t* positions;     // [num_tokens]
  const int32_t* slot_mapping;  // [num_tokens]; < 0: not written
  void* k_write;                // the pools k_cache / v_cache (or k_codes / v_codes) point at
  void* v_write;
  // An FP8 cache (PagedAttentionParams::kv_fp8): the pools' E4M3 codes and
  // the layer's scales ([num_kv_heads], kv_fp8.cuh); k_cache / v_cache are
  // then unused. Null for a BF16 cache.
  const uint8_t* k_codes;
  const uint8_t* v_codes;
  const float* k_scale;
  const float* v_scale;
  // Asked of the L2 cache by the flash decode kernel (PagedAttentionSplitOptions::prefetch).
  L2Prefetch prefetch;
  // The decode and general kernels let the next kernel launch before their
  // wait (LaunchSettings::early_dependents; cuda::PdlEnter).
  bool early_dependents;
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

// One query tile of a prefill kernel: tokens [q_begin, q_end) of chunk s, at
// positions pos0 .. last_pos.
struct PrefillTile {
  int s, q_begin, q_end, pos0, last_pos;
};

// Query tile b when every chunk is cut into tiles of tile_tokens tokens,
// chunk after chunk (tiles never cross chunks); false past the last tile.
__device__ __forceinline__ bool FindPrefillTile(const AttnArgs& a, int b, int tile_tokens,
                                                PrefillTile* t) {
  for (int i = 0; i < a.num_seqs; ++i) {
    const int tiles = (a.cu_query_lens[i + 1] - a.cu_query_lens[i] + tile_tokens - 1) / tile_tokens;
    if (b < tiles) {
      t->s = i;
      t->q_begin = a.cu_query_lens[i] + b * tile_tokens;
      t->q_end = min(a.cu_query_lens[i + 1], t->q_begin + tile_tokens);
      t->pos0 = a.start_pos[i] + (t->q_begin - a.cu_query_lens[i]);
      t->last_pos = t->pos0 + (t->q_end - t->q_begin) - 1;
      return true;
    }
    b -= tiles;
  }
  return false;
}

// Position p's block in its sequence's table and its place in that block.
// Block sizes of a power of two (the usual 16) shift and mask instead of
// dividing (~20 instructions).
struct KvPlace {
  int blk, in_blk;
};
__device__ __forceinline__ KvPlace PlaceOf(const AttnArgs& a, int p) {
  if (a.block_shift >= 0) return {p >> a.block_shift, p & (a.block_size - 1)};
  const int blk = p / a.block_size;
  return {blk, p - blk * a.block_size};
}

// Element offset of (position p, kv head, dim 0) in a layer's pool.
__device__ __forceinline__ int64_t KvOffset(const AttnArgs& a, const int32_t* table, int p, int kvh,
                                            int head_dim) {
  const KvPlace at = PlaceOf(a, p);
  const int64_t slot = static_cast<int64_t>(table[at.blk]) * a.block_size + at.in_blk;
  return (slot * a.num_kv_heads + kvh) * head_dim;
}

// This thread's 16-byte chunks of a tile's keys [k_begin, k_begin +
// kTileKeys) of one kv head, kElems elements of kElemBytes a chunk, among
// the kernel's kThreads threads: chunk c = threadIdx.x % kChunks of keys
// threadIdx.x / kChunks + kRows i (the FP8 kernels' widening passes rely on
// that assignment), with what stays from tile to tile worked out once, when
// the kernel knows its kv head: a chunk's byte offset in the pools is its
// block's (one 32 x 32-bit product: a block of a layer's pool is at most
// 2^31 bytes, PagedAttention checks) plus its place in the block.
template <int D, int kElems, int kElemBytes, int kThreads>
struct KvChunks {
  static constexpr int kChunks = D / kElems;
  static constexpr int kRows = kThreads / kChunks;  // keys a pass
  static constexpr int kPasses = kTileKeys / kRows;
  static_assert(kThreads % kChunks == 0 && kTileKeys % kRows == 0, "whole passes");
  int j0, c;
  uint32_t lane_bytes;   // (kvh * D + c * kElems) * kElemBytes
  uint32_t row_bytes;    // a slot's: num_kv_heads * D * kElemBytes
  uint32_t block_bytes;  // block_size slots

  __device__ __forceinline__ KvChunks(const AttnArgs& a, int kvh)
      : j0(threadIdx.x / kChunks),
        c(threadIdx.x % kChunks),
        lane_bytes(static_cast<uint32_t>((kvh * D + c * kElems) * kElemBytes)),
        row_bytes(static_cast<uint32_t>(a.num_kv_heads * D * kElemBytes)),
        block_bytes(static_cast<uint32_t>(a.block_size) * row_bytes) {}

  // fn(key j of the tile, chunk c, the chunk's byte offset in the pools,
  // whether the key is below kv_len) for each of the thread's chunks.
  template <typename Fn>
  __device__ __forceinline__ void ForEach(const AttnArgs& a, const int32_t* table, int k_begin,
                                          int kv_len, Fn&& fn) const {
#pragma unroll
    for (int i = 0; i < kPasses; ++i) {
      const int j = j0 + i * kRows;
      // Keys past kv_len take the last key's address (no branch; the copy
      // reads nothing and writes zeros).
      const KvPlace at = PlaceOf(a, min(k_begin + j, kv_len - 1));
      const uint64_t off =
          static_cast<uint64_t>(static_cast<uint32_t>(table[at.blk])) * block_bytes +
          (static_cast<uint32_t>(at.in_blk) * row_bytes + lane_bytes);
      fn(j, c, off, k_begin + j < kv_len);
    }
  }
};

// FP8 prefill kernels: the tile's codes into staging tiles ks8 / vs8
// ([kTileKeys][D] codes; keys >= kv_len are zeros).
template <int D, int kThreads>
__device__ __forceinline__ void LoadKvCodes(const AttnArgs& a,
                                            const KvChunks<D, 16, 1, kThreads>& chunks,
                                            const int32_t* table, int k_begin, int kv_len,
                                            unsigned char* ks8, unsigned char* vs8) {
  chunks.ForEach(a, table, k_begin, kv_len, [&](int j, int c, uint64_t off, bool valid) {
    cuda::CpAsync16(ks8 + j * D + c * 16, a.k_codes + off, valid);
    cuda::CpAsync16(vs8 + j * D + c * 16, a.v_codes + off, valid);
  });
}

// Query rows q0 (a thread's row g) and q1 (g + 8) as the A fragments of
// kSteps 16-dim k-steps (thread tq's pairs, the m16n8k16 / wgmma m64 A
// layout); kF16: converted to f16 for the FP8 cache's f16 products.
template <bool kF16, int kSteps>
__device__ __forceinline__ void LoadQueryFragments(const bf16* q0, const bf16* q1, int tq,
                                                   uint32_t (&qa)[kSteps][4]) {
#pragma unroll
  for (int kk = 0; kk < kSteps; ++kk) {
    qa[kk][0] = *reinterpret_cast<const uint32_t*>(q0 + kk * 16 + 2 * tq);
    qa[kk][1] = *reinterpret_cast<const uint32_t*>(q1 + kk * 16 + 2 * tq);
    qa[kk][2] = *reinterpret_cast<const uint32_t*>(q0 + kk * 16 + 8 + 2 * tq);
    qa[kk][3] = *reinterpret_cast<const uint32_t*>(q1 + kk * 16 + 8 + 2 * tq);
    if constexpr (kF16) {
#pragma unroll
      for (int e = 0; e < 4; ++e) qa[kk][e] = kvfp8::Bf16x2ToF16x2(qa[kk][e]);
    }
  }
}

// Two probabilities packed as a tensor-core operand: f16 for the FP8
// cache's f16 products, else bf16.
template <bool kF16>
__device__ __forceinline__ uint32_t PackPair(float lo, float hi) {
  return kF16 ? kvfp8::PackF16x2(lo, hi) : cuda::PackBf16x2(lo, hi);
}

// Launches attention kernel `Kernel` with `smem` bytes of dynamic shared
// memory (its limit raised on the first launch) over `grid` blocks of
// kBlockThreads, as a programmatic dependent launch.
template <auto Kernel, int kBlockThreads = kThreads>
absl::Status LaunchAttention(int smem, dim3 grid, cudaStream_t stream, const AttnArgs& a) {
  static const cudaError_t allowed =
      smem <= 48 * 1024
          ? cudaSuccess
          : cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  CUDA_RETURN_IF_ERROR(allowed);
  CUDA_RETURN_IF_ERROR(cuda::LaunchPdl(Kernel, grid, dim3(kBlockThreads), smem, stream, a));
  return absl::OkStatus();
}

// Merges the kWarps warps' online-softmax states of the group's heads (row
// r < a.group): red_o[(w * rows + r) * kStride + d] unnormalized outputs,
// red_m / red_l[w * rows + r] running max (base 2) and sum. Writes the
// output (one split) or the split's partial: normalized output and
// (max, sum); an empty split writes only (max, 0), and no output.
// kStride: the floats between two rows of red_o (D, or more when padded).
// out_scale multiplies the output (an FP8 cache's V scale; else 1).
template <int D, int kStride = D>
__device__ void MergeWarpsAndStore(const AttnArgs& a, const float* red_o, const float* red_m,
                                   const float* red_l, int rows, int t, int kvh, int split,
                                   float out_scale) {
  for (int i = threadIdx.x; i < a.group * D; i += kThreads) {
    const int r = i / D;
    const int d = i - r * D;
    float mx = -INFINITY;
    for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, red_m[w * rows + r]);
    float num = 0.0f, den = 0.0f;
    if (mx != -INFINITY) {
      for (int w = 0; w < kWarps; ++w) {
        const float scale = exp2f(red_m[w * rows + r] - mx);
        num += red_o[(w * rows + r) * kStride + d] * scale;
        den += red_l[w * rows + r] * scale;
      }
    }
    const int h = kvh * a.group + r;
    if (a.num_splits == 1) {
      a.out[(static_cast<int64_t>(t) * a.num_heads + h) * D + d] =
          __float2bfloat16_rn(num / den * out_scale);
    } else {
      const int64_t idx = (static_cast<int64_t>(t) * a.num_heads + h) * a.num_splits + split;
      if (den > 0.0f) a.o_part[idx * D + d] = num / den * out_scale;  // the combine skips empty
      if (d == 0) a.ml_part[idx] = make_float2(mx, den);
    }
  }
}

// The K and V scales of kv head kvh (1 for a BF16 cache).
__device__ __forceinline__ float KScale(const AttnArgs& a, int kvh) {
  return a.k_scale == nullptr ? 1.0f : a.k_scale[kvh];
}
__device__ __forceinline__ float VScale(const AttnArgs& a, int kvh) {
  return a.v_scale == nullptr ? 1.0f : a.v_scale[kvh];
}

// Flash prefill: every chunk, causal, head_dim 64 or 128 (splits ignored):
// the mma.sync kernel (paged_attention_flash.cu, any card) and the wgmma one
// (paged_attention_flash_sm90.cu, sm_90a builds only).
absl::Status LaunchFlashPrefill(const AttnArgs& a, int head_dim, int num_tokens,
                                cudaStream_t stream);
absl::Status LaunchFlashPrefillSm90(const AttnArgs& a, int head_dim, int num_tokens,
                                    cudaStream_t stream);
// Flash decode: every chunk one token; head_dim 64 or 128, group <= 16; writes
// the output (num_splits == 1) or the split partials for the combine kernel.
// `rope` (a.qkv_bias .. a.v_write set; every chunk exactly one token): the
// kernel also does the step's RopeKvWrite (rope_kv_write.h) for its kv head.
absl::Status LaunchFlashDecode(const AttnArgs& a, int head_dim, int num_tokens, bool rope,
                               cudaStream_t stream);

}  // namespace onecard::engine::attention

#endif  // ONECARD_ENGINE_KERNELS_PAGED_ATTENTION_INTERNAL_CUH_
