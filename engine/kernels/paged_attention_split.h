// The CUDA backend's extended entry to paged attention (paged_attention.h):
// split-K over long contexts, with a caller-owned workspace so that the call
// can be captured in a CUDA graph. Same math and contract as PagedAttention;
// its reference is PagedAttentionRef.
//
// Kernels (engine/kernels/paged_attention.cu):
// - "general": one block per (kv head, query token, split); the block reads
//   its KV head's K/V once for the whole query group (GQA) and keeps an online
//   softmax in fp32. Used for decode (every chunk one token) and for any shape
//   the flash kernel does not take.
// - "flash": tensor-core (mma.sync bf16) flash attention for prefill chunks,
//   64 queries x one head a block, 64-key tiles streamed with cp.async.
// A split's partial (normalized output, running max and sum) goes to the
// workspace and a combine kernel merges the splits; num_splits == 1 writes
// the output directly and needs no workspace.
// Supported: BF16; head_dim 16, 24, 32, 64, 96, 128 (flash: 64, 128);
// num_heads / num_kv_heads <= 16.
// Tested by tests/gpu/paged_attention_test.cu against PagedAttentionRef.
#ifndef ONECARD_ENGINE_KERNELS_PAGED_ATTENTION_SPLIT_H_
#define ONECARD_ENGINE_KERNELS_PAGED_ATTENTION_SPLIT_H_

#include <cstdint>

#include "absl/status/status.h"
#include "engine/kernels/paged_attention.h"
#include "engine/kernels/stream.h"

namespace onecard::engine {

enum class AttentionKernel { kAuto, kGeneral, kFlash };

struct PagedAttentionSplitOptions {
  int32_t num_splits = 1;       // splits of each query's key range (general kernel)
  void* workspace = nullptr;    // PagedAttentionWorkspaceBytes(...) bytes, device
  int64_t workspace_bytes = 0;
  // kAuto: flash when some chunk is longer than one token and the head_dim
  // is supported there; general otherwise.
  AttentionKernel kernel = AttentionKernel::kAuto;
};

// Workspace for num_splits > 1: [num_tokens, num_heads, num_splits] partials.
int64_t PagedAttentionWorkspaceBytes(int32_t num_tokens, int32_t num_heads, int32_t head_dim,
                                     int32_t num_splits);

// A split count that fills the card for a decode batch of num_seqs sequences
// whose longest context is about max_context tokens (1 when the batch alone
// fills it).
int32_t PagedAttentionDecodeSplits(int32_t num_seqs, int32_t num_kv_heads, int32_t max_context,
                                   int32_t num_sms);

absl::Status PagedAttentionSplit(const PagedAttentionParams& params,
                                 const PagedAttentionSplitOptions& options,
                                 cudaStream_t stream);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_KERNELS_PAGED_ATTENTION_SPLIT_H_
