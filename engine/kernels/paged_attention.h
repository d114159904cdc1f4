// Paged causal attention over a batch of sequence chunks: one op for prefill,
// chunked prefill and decode (a decode step is a chunk of one token).
//
// The batch holds num_seqs chunks; chunk s owns query tokens
// [cu_query_lens[s], cu_query_lens[s + 1]) of q and out, at positions
// start_pos[s], start_pos[s] + 1, ... Its sequence's K/V for positions
// 0 .. start_pos[s] + len - 1 are in the paged pools, found through its row of
// block_tables (position p: block block_tables[s][p / block_size], slot
// p % block_size); the chunk's own K/V must have been written first
// (KvCacheWrite). The query at position p attends to positions 0..p (causal),
// so each token of a chunk sees the cached prefix plus the chunk's earlier
// tokens. GQA: query head h reads kv head h / (num_heads / num_kv_heads).
//   out[t, h, :] = sum_j softmax_j(scale * q[t, h, :] . K[j, kvh, :]) V[j, kvh, :]
// Reference: PagedAttentionRef (paged_attention_ref.cc, F32 and BF16, pools
// of that dtype or FP8 E4M3 with kv_fp8's scales; the softmax is
// max-subtracted and accumulated in fp32). CUDA: PagedAttention
// (paged_attention.cu). Tested by tests/engine/kernels/paged_attention_ref_test.cc.
#ifndef ONECARD_ENGINE_KERNELS_PAGED_ATTENTION_H_
#define ONECARD_ENGINE_KERNELS_PAGED_ATTENTION_H_

#include <cstdint>

#include "absl/status/status.h"
#include "engine/common/dtype.h"
#include "engine/kernels/stream.h"
#include "engine/kv_cache/kv_layout.h"

namespace onecard::engine {

struct PagedAttentionParams {
  DType dtype = DType::kF32;      // of q, the pools (unless kv_fp8) and out
  const void* q = nullptr;        // [num_tokens, num_heads, head_dim]
  int64_t q_token_stride = 0;     // elements between tokens; >= num_heads * head_dim
  const void* k_cache = nullptr;  // [num_blocks, block_size, num_kv_heads, head_dim]
  const void* v_cache = nullptr;  // [num_blocks, block_size, num_kv_heads, head_dim]
  void* out = nullptr;            // [num_tokens, num_heads, head_dim], contiguous
  KvLayout layout;                // num_kv_heads and head_dim of the model
  int32_t num_heads = 0;          // query heads; a multiple of layout.num_kv_heads
  int32_t num_tokens = 0;         // == cu_query_lens[num_seqs]
  int32_t num_seqs = 0;
  const int32_t* cu_query_lens = nullptr;  // [num_seqs + 1], cu_query_lens[0] == 0
  const int32_t* start_pos = nullptr;      // [num_seqs]: cached tokens before the chunk
  const int32_t* block_tables = nullptr;   // [num_seqs, max_blocks_per_seq]
  int32_t max_blocks_per_seq = 0;
  float scale = 0.0f;  // usually 1 / sqrt(head_dim)
  // Set: k_cache and v_cache are FP8 E4M3 codes, an element reading as
  // E4m3ToFloat(code) * kv_fp8.k[kv_head] (or .v) (kv_layout.h); q and out
  // stay `dtype`.
  KvFp8Scales kv_fp8;
};

// The argument checks of the reference, for host-side callers of any
// implementation: shapes, cu_query_lens from 0 to num_tokens, every chunk's
// positions inside its block-table row and every block it reads inside the
// pool, kv_fp8.k and .v both set or both null (their values are not read:
// they may be device memory; PagedAttentionRef checks them too).
// InvalidArgument names the field (e.g. "block_tables[2][5] = 99 ...").
absl::Status ValidatePagedAttention(const PagedAttentionParams& params);

absl::Status PagedAttentionRef(const PagedAttentionParams& params);
absl::Status PagedAttention(const PagedAttentionParams& params, cudaStream_t stream);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_KERNELS_PAGED_ATTENTION_H_
