// FlatBatch: a BatchInput (engine/runtime/model_runner.h) checked and laid out
// as the kernels take it: the chunks' tokens side by side, with per-token
// positions and KV slots, cu_seqlens-style chunk boundaries, a padded
// block-table matrix, and the rows whose logits are returned.
// FlattenBatch rejects, with InvalidArgument naming the chunk and sequence:
// empty chunks, token ids outside the vocabulary, negative start positions,
// positions at or past the context length, block tables shorter than the
// chunk needs or naming blocks outside the pool, and a sequence appearing in
// two chunks of one batch.
// Tested by tests/engine/runtime/cpu/cpu_batch_test.cc.
#ifndef ONECARD_ENGINE_RUNTIME_CPU_CPU_BATCH_H_
#define ONECARD_ENGINE_RUNTIME_CPU_CPU_BATCH_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/kv_cache/kv_layout.h"
#include "engine/runtime/model_runner.h"

namespace onecard::engine {

struct FlatBatch {
  int32_t num_tokens = 0;
  int32_t num_seqs = 0;                // chunks
  std::vector<int32_t> token_ids;      // [num_tokens]
  std::vector<int32_t> positions;      // [num_tokens]
  std::vector<int32_t> slot_mapping;   // [num_tokens]: KvSlot of each token
  std::vector<int32_t> cu_query_lens;  // [num_seqs + 1]
  std::vector<int32_t> start_pos;      // [num_seqs]
  std::vector<int32_t> block_tables;   // [num_seqs, max_blocks_per_seq], -1 past the need
  int32_t max_blocks_per_seq = 0;
  std::vector<int32_t> logit_rows;  // token indices whose logits are returned, in order
};

struct BatchLimits {
  int64_t vocab_size = 0;
  int64_t max_context = 0;  // positions must stay below it
  KvLayout layout;          // block_size and num_blocks of the pool
};

absl::StatusOr<FlatBatch> FlattenBatch(const BatchInput& batch, const BatchLimits& limits);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_RUNTIME_CPU_CPU_BATCH_H_
