// The CUDA backend's extended entry to paged attention (paged_attention.h):
// split-K over long contexts, with a caller-owned workspace so that the call
// can be captured in a CUDA graph. Same math and contract as PagedAttention;
// its reference is PagedAttentionRef.
//
// Kernels (engine/kernels/paged_attention.cu, paged_attention_flash.cu,
// paged_attention_flash_sm90.cu, paged_attention_decode.cu):
// - flash decode (every chunk one token; head_dim 64 / 128): tensor cores
//   (mma.sync bf16) with the 16 mma rows holding a kv head's query group, so
//   each kv head's K/V are read once for the whole group (GQA); each split
//   covers a multiple of 64 keys (short contexts leave the last splits empty).
// - flash prefill (any chunk longer than one token; head_dim 64 / 128),
//   64-key tiles streamed with cp.async: on sm_90a builds Hopper's
//   warpgroup MMA (wgmma), 128 query rows a block (tokens x the query heads
//   of one kv head); mma.sync otherwise, with kFlashMma, or for a step of
//   more than 65535 of the wgmma kernel's query tiles: 64 queries x one
//   head a block.
// - general (the other head_dims, or kGeneral): one block per (kv head,
//   query token, split) on CUDA cores, the group's K/V read once too.
// A split's partial (normalized output, running max and sum) goes to the
// workspace and a combine kernel merges the splits; num_splits == 1 writes
// the output directly and needs no workspace.
// An FP8 cache (PagedAttentionParams::kv_fp8) is read by the same kernels,
// its codes widened exactly in shared memory (f16 tensor-core products in
// the flash kernels), its scales applied to the scores (K) and the output
// (V): kv_fp8.cuh.
// Supported: BF16 q / out, BF16 or FP8 (head_dim % 16 == 0) pools; head_dim
// 16, 24, 32, 64, 96, 128 (flash: 64, 128);
// num_heads / num_kv_heads <= 16; 1 <= num_splits <= 64.
// Tested by tests/gpu/paged_attention_test.cc against PagedAttentionRef.
#ifndef ONECARD_ENGINE_KERNELS_PAGED_ATTENTION_SPLIT_H_
#define ONECARD_ENGINE_KERNELS_PAGED_ATTENTION_SPLIT_H_

#include <algorithm>
#include <cstdint>

#include "absl/status/status.h"
#include "engine/kernels/l2_prefetch.h"
#include "engine/kernels/paged_attention.h"
#include "engine/kernels/rope_kv_write.h"
#include "engine/kernels/stream.h"

namespace onecard::engine {

enum class AttentionKernel { kAuto, kGeneral, kFlash, kFlashMma };

struct PagedAttentionSplitOptions {
  int32_t num_splits = 1;     // splits of each query's key range (general kernel)
  void* workspace = nullptr;  // PagedAttentionWorkspaceBytes(...) bytes, device
  int64_t workspace_bytes = 0;
  // kAuto / kFlash: the flash kernels where the head_dim has them (decode
  // when every chunk is one token, prefill otherwise); kGeneral: general;
  // kFlashMma: the flash kernels, the prefill one with mma.sync products
  // even on an sm_90a build (what cards before Hopper run).
  AttentionKernel kernel = AttentionKernel::kAuto;
  // The step's RopeKvWrite (rope_kv_write.h), for a decode batch whose
  // every chunk is exactly one token at start_pos (the caller's promise;
  // positions[t] == start_pos[t]): rope->qkv must be q, the packed qkv rows
  // (q_token_stride = (num_heads + 2 num_kv_heads) * head_dim), BF16, same
  // heads, layout and num_tokens. The flash decode kernel does it itself
  // (each block rotates its query group; the block holding the token's own
  // position rotates and writes that key and value, and uses them), which
  // saves RopeKvWrite's launch and pass; other kernels run RopeKvWrite first.
  // Same results either way; only q's contents afterwards differ (left as
  // the projection wrote them when fused, rotated in place when not).
  const RopeKvWriteParams* rope = nullptr;
  // Memory the flash decode kernel asks the L2 cache to fetch while it runs
  // (l2_prefetch.h: the next projection's weights); the other kernels ignore
  // it. No result depends on it.
  L2Prefetch prefetch;
};

// Whether the kernels take this head_dim (16, 24, 32, 64, 96, 128).
inline bool PagedAttentionSupportsHeadDim(int32_t head_dim) {
  for (int32_t d : {16, 24, 32, 64, 96, 128}) {
    if (head_dim == d) return true;
  }
  return false;
}

// Workspace for num_splits > 1: [num_tokens, num_heads, num_splits] partials
// (head_dim floats of output, then a (max, sum) pair of floats).
inline int64_t PagedAttentionWorkspaceBytes(int32_t num_tokens, int32_t num_heads, int32_t head_dim,
                                            int32_t num_splits) {
  if (num_splits <= 1) return 0;
  const int64_t parts = static_cast<int64_t>(num_tokens) * num_heads * num_splits;
  return parts * head_dim * 4 + parts * 8;
}

// Blocks of the flash decode kernel resident on one SM (its shared memory and
// registers are sized for it; paged_attention_decode.cu).
inline constexpr int32_t kPagedAttentionDecodeBlocksPerSm = 4;

// A split count for a decode batch of num_seqs sequences whose contexts reach
// up to max_context tokens: the most splits whose blocks (kv heads x seqs x
// splits) still fit the card's resident block slots at once, so that no
// partial second wave of blocks runs alone; 1 when the batch alone fills
// them; at most one split per 64 keys and at most 64.
inline int32_t PagedAttentionDecodeSplits(int32_t num_seqs, int32_t num_kv_heads,
                                          int32_t max_context, int32_t num_sms) {
  const int64_t blocks = std::max<int64_t>(1, static_cast<int64_t>(num_seqs) * num_kv_heads);
  const int64_t want = int64_t{kPagedAttentionDecodeBlocksPerSm} * num_sms / blocks;
  const int64_t by_keys = (std::max<int64_t>(max_context, 1) + 63) / 64;
  return static_cast<int32_t>(std::clamp<int64_t>(std::min(want, by_keys), 1, 64));
}

absl::Status PagedAttentionSplit(const PagedAttentionParams& params,
                                 const PagedAttentionSplitOptions& options, cudaStream_t stream);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_KERNELS_PAGED_ATTENTION_SPLIT_H_
