// StepLayout: where a step's metadata lives in the runner's one pinned host
// buffer and its device mirror (same offsets), so that a step needs one
// host-to-device copy, and a CUDA graph captured for a batch bucket finds its
// inputs at fixed addresses. The history (token ids for the penalties) comes
// last, so a copy of the used prefix carries everything.
// Plain C++ (the memory planner sizes it). Tested by tests/gpu/memory_plan_test.cc.
#ifndef ONECARD_ENGINE_RUNTIME_CUDA_STEP_LAYOUT_H_
#define ONECARD_ENGINE_RUNTIME_CUDA_STEP_LAYOUT_H_

#include <cstdint>

namespace onecard::engine {

struct StepLayout {
  int32_t max_tokens = 0;
  int32_t max_seqs = 0;
  int32_t max_rows = 0;  // logit / sample rows
  int32_t max_blocks_per_seq = 0;
  int64_t max_history = 0;
  // Byte offsets. int32 arrays unless noted.
  int64_t token_ids = 0;      // [max_tokens]
  int64_t positions = 0;      // [max_tokens]
  int64_t slots = 0;          // [max_tokens]
  int64_t logit_rows = 0;     // [max_rows]: token index of each logits row
  int64_t cu_query_lens = 0;  // [max_seqs + 1]
  int64_t start_pos = 0;      // [max_seqs]
  int64_t sample_rows = 0;    // SampleRowParams [max_rows]
  int64_t cu_history = 0;     // [max_rows + 1]
  int64_t block_tables = 0;   // [max_seqs, max_blocks_per_seq]
  int64_t history = 0;        // [max_history]
  int64_t size_bytes = 0;

  // Bytes to copy when `history_used` history ids are filled in.
  int64_t UsedBytes(int64_t history_used) const { return history + 4 * history_used; }
};

StepLayout MakeStepLayout(int32_t max_tokens, int32_t max_seqs, int32_t max_rows,
                          int32_t max_blocks_per_seq, int64_t max_history);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_RUNTIME_CUDA_STEP_LAYOUT_H_
