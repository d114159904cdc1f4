// FlattenBatch (see cpu_batch.h): checks each chunk against the limits, then
// appends its tokens, positions, slots, boundaries and block-table row.
// Tested by tests/engine/runtime/cpu/cpu_batch_test.cc.
#include "engine/runtime/cpu/cpu_batch.h"

#include <algorithm>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/kernels/kv_cache_write.h"

namespace onecard::engine {
namespace {

absl::Status ChunkError(size_t index, const SequenceChunk& chunk, const std::string& what) {
  return absl::InvalidArgumentError(
      absl::StrCat("batch chunk ", index, " (seq ", chunk.seq_id, "): ", what));
}

int64_t BlocksNeeded(const SequenceChunk& chunk, int32_t block_size) {
  const int64_t context = static_cast<int64_t>(chunk.start_pos) + chunk.token_ids.size();
  return (context + block_size - 1) / block_size;
}

absl::Status CheckChunk(size_t index, const SequenceChunk& c, const BatchLimits& limits) {
  if (c.token_ids.empty()) return ChunkError(index, c, "no tokens");
  for (size_t i = 0; i < c.token_ids.size(); ++i) {
    if (c.token_ids[i] < 0 || c.token_ids[i] >= limits.vocab_size) {
      return ChunkError(index, c,
                        absl::StrCat("token_ids[", i, "] = ", c.token_ids[i],
                                     " is outside the vocabulary [0, ", limits.vocab_size, ")"));
    }
  }
  if (c.start_pos < 0) return ChunkError(index, c, absl::StrCat("start_pos ", c.start_pos, " < 0"));
  const int64_t end = static_cast<int64_t>(c.start_pos) + c.token_ids.size();
  if (end > limits.max_context) {
    return ChunkError(index, c,
                      absl::StrCat("positions up to ", end - 1, " reach past the context length ",
                                   limits.max_context));
  }
  const int64_t needed = BlocksNeeded(c, limits.layout.block_size);
  if (static_cast<int64_t>(c.block_table.size()) < needed) {
    return ChunkError(index, c,
                      absl::StrCat("block_table has ", c.block_table.size(),
                                   " blocks; positions up to ", end - 1, " need ", needed));
  }
  for (int64_t b = 0; b < needed; ++b) {
    if (c.block_table[b] < 0 || c.block_table[b] >= limits.layout.num_blocks) {
      return ChunkError(index, c,
                        absl::StrCat("block_table[", b, "] = ", c.block_table[b],
                                     " is outside the pool [0, ", limits.layout.num_blocks, ")"));
    }
  }
  return absl::OkStatus();
}

// Appends chunk c (already checked) as chunk number `seq` of *flat.
void AppendChunk(const SequenceChunk& c, int32_t seq, const BatchLimits& limits, bool all_logits,
                 FlatBatch* flat) {
  const int32_t first = flat->num_tokens;
  const int32_t n = static_cast<int32_t>(c.token_ids.size());
  for (int32_t i = 0; i < n; ++i) {
    const int32_t position = c.start_pos + i;
    flat->token_ids.push_back(c.token_ids[i]);
    flat->positions.push_back(position);
    flat->slot_mapping.push_back(KvSlot(limits.layout, c.block_table.data(), position));
    if (all_logits) flat->logit_rows.push_back(first + i);
  }
  if (!all_logits && c.want_logits) flat->logit_rows.push_back(first + n - 1);
  flat->num_tokens += n;
  flat->cu_query_lens.push_back(flat->num_tokens);
  flat->start_pos.push_back(c.start_pos);
  const int64_t needed = BlocksNeeded(c, limits.layout.block_size);
  int32_t* row = &flat->block_tables[static_cast<int64_t>(seq) * flat->max_blocks_per_seq];
  std::copy_n(c.block_table.begin(), needed, row);
}

}  // namespace

absl::StatusOr<FlatBatch> FlattenBatch(const BatchInput& batch, const BatchLimits& limits) {
  FlatBatch flat;
  absl::flat_hash_set<int64_t> seq_ids;
  for (size_t i = 0; i < batch.chunks.size(); ++i) {
    const SequenceChunk& c = batch.chunks[i];
    RETURN_IF_ERROR(CheckChunk(i, c, limits));
    if (!seq_ids.insert(c.seq_id).second) {
      return ChunkError(i, c, "the sequence already has a chunk in this batch");
    }
    flat.max_blocks_per_seq = std::max<int32_t>(
        flat.max_blocks_per_seq, static_cast<int32_t>(BlocksNeeded(c, limits.layout.block_size)));
  }
  flat.num_seqs = static_cast<int32_t>(batch.chunks.size());
  flat.block_tables.assign(static_cast<int64_t>(flat.num_seqs) * flat.max_blocks_per_seq, -1);
  flat.cu_query_lens.push_back(0);
  for (int32_t s = 0; s < flat.num_seqs; ++s) {
    AppendChunk(batch.chunks[s], s, limits, batch.all_logits, &flat);
  }
  return flat;
}

}  // namespace onecard::engine
