// Scheduler: continuous batching with chunked prefill over the paged KV cache
// (in the spirit of vLLM v1's scheduler: there are no prefill and decode
// phases, only sequences whose computed tokens lag their known tokens).
// Tested by tests/engine/scheduler/scheduler_test.cc: hand-built cases and
// randomized operation sequences with CheckInvariants() after every call and a
// simulated KV pool that checks each chunk's block table.
//
// Contract (one Schedule() call = one engine step):
// - A sequence knows token_ids (prompt, then sampled tokens) and has the KV of
//   the first num_computed_tokens of them. Each step gives a running sequence
//   at most one chunk: the tokens [num_computed, num_computed + n). A chunk
//   wants logits when it reaches the last known token; the engine then samples
//   one token and calls AppendToken. A "decode" is a chunk of one token.
// - Budget: the chunks of a step hold at most max_batched_tokens tokens, and
//   at most max_num_seqs sequences run.
// - Order, as phases: (1) preempt running sequences that rank below the best
//   waiting one when it cannot otherwise start; (2) running sequences with one
//   token to compute (decodes); (3) running sequences still in their prompt
//   (partial prefills, chunked to fit the budget); (4) waiting sequences by
//   priority (higher first), then arrival (earlier first); a waiting sequence
//   that does not fit stops admission (no overtaking).
// - Rank: priority descending, then arrival ascending. Admission allocates
//   blocks for every known token (prefix-cache hits count as computed). When a
//   running sequence needs a block and none is free, the lowest-ranked running
//   sequence not yet scheduled this step is preempted by recompute: its blocks
//   are freed, its num_computed_tokens drops to 0, and it waits again with its
//   original arrival and all its tokens (generated ones too) as prompt. If it
//   is the sequence itself, that sequence waits. Preemptions are counted.
// - A sequence never exceeds max_context tokens: Add refuses longer prompts
//   and AppendToken must not be called on a sequence at max_context (the
//   engine finishes it first). max_context is capped at the pool's capacity,
//   so a lone sequence always fits.
// - Ownership: the scheduler owns the sequences and the BlockManager. Spans
//   and pointers it returns stay valid until the next non-const call.
// Not thread-safe: one owner (the engine's step loop) drives it.
#ifndef ONECARD_ENGINE_SCHEDULER_SCHEDULER_H_
#define ONECARD_ENGINE_SCHEDULER_SCHEDULER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "absl/status/status.h"
#include "engine/kv_cache/block_manager.h"

namespace onecard::engine {

enum class SequenceStatus { kWaiting, kRunning };

struct Sequence {
  int64_t id = 0;
  int32_t priority = 0;
  int64_t arrival = 0;             // order of Add; earlier is smaller
  std::vector<int32_t> token_ids;  // prompt, then sampled tokens
  int32_t num_prompt_tokens = 0;   // the original prompt's length
  int32_t num_computed_tokens = 0;
  int32_t num_cached_tokens = 0;  // prefix-cache hit at the first admission
  int32_t num_preemptions = 0;
  bool admitted_once = false;
  SequenceStatus status = SequenceStatus::kWaiting;

  int32_t num_tokens() const { return static_cast<int32_t>(token_ids.size()); }
  int32_t num_uncomputed() const { return num_tokens() - num_computed_tokens; }
};

struct SchedulerOptions {
  int32_t max_num_seqs = 64;
  int32_t max_batched_tokens = 512;
  int32_t max_context = 2048;
  BlockManagerOptions blocks;
};

struct ScheduledChunk {
  int64_t seq_id = 0;
  int32_t start_pos = 0;  // == the sequence's num_computed_tokens
  int32_t num_tokens = 0;
  bool want_logits = false;  // the chunk ends at the last known token
};

struct SchedulerOutput {
  std::vector<ScheduledChunk> chunks;  // decodes, then prefills, then new ones
  std::vector<int64_t> preempted;      // sequences preempted this step
  std::vector<int64_t> admitted;       // sequences admitted for the first time
  int32_t num_batched_tokens = 0;
  bool empty() const { return chunks.empty(); }
};

class Scheduler {
 public:
  explicit Scheduler(const SchedulerOptions& options);

  // Queues a new sequence. InvalidArgument when the id is taken, the prompt is
  // empty, or it is longer than max_context().
  absl::Status Add(int64_t seq_id, std::vector<int32_t> prompt, int32_t priority);
  // Plans one step (see the contract above).
  SchedulerOutput Schedule();
  // The step's forward pass ran: each chunk's tokens are now computed (and
  // their full blocks cached). Chunks of removed sequences are skipped.
  void OnStepComputed(const SchedulerOutput& output);
  // Appends a sampled token to a running sequence whose known tokens are all
  // computed. The sequence must be below max_context().
  void AppendToken(int64_t seq_id, int32_t token_id);
  // Removes a sequence wherever it is (finished, cancelled, failed) and frees
  // its blocks. Unknown ids are ignored.
  void Remove(int64_t seq_id);

  const Sequence* Find(int64_t seq_id) const;
  // seq_id's block table, as many entries as cover its first num_tokens.
  std::span<const int32_t> BlockTable(int64_t seq_id, int32_t num_tokens) const;
  const BlockManager& block_manager() const { return blocks_; }
  int32_t max_context() const { return max_context_; }
  int64_t num_waiting() const { return static_cast<int64_t>(waiting_.size()); }
  // The waiting sequences counted by priority (absent: none waiting); kept
  // up to date as sequences enter and leave the waiting queue.
  const std::map<int32_t, int64_t>& NumWaitingByPriority() const { return waiting_by_priority_; }
  int64_t num_running() const { return static_cast<int64_t>(running_.size()); }
  int64_t num_preemptions() const { return num_preemptions_; }

  // Checks every invariant (each sequence in exactly one queue matching its
  // status, limits, block tables cover computed tokens, the block manager's
  // own invariants). For tests.
  absl::Status CheckInvariants() const;

 private:
  // (-priority, arrival, id): begin() ranks first, rbegin() last.
  using RankKey = std::tuple<int32_t, int64_t, int64_t>;
  static RankKey Rank(const Sequence& seq) { return {-seq.priority, seq.arrival, seq.id}; }

  // The phases of Schedule().
  void PreemptForHigherPriority(SchedulerOutput* out);
  void ScheduleRunning(bool decodes, int32_t* budget, SchedulerOutput* out);
  void ScheduleWaiting(int32_t* budget, SchedulerOutput* out);

  // Grows seq's table to cover num_tokens, preempting the lowest-ranked
  // unscheduled running sequence while blocks are short. False when seq itself
  // was preempted.
  bool EnsureCapacity(Sequence& seq, int32_t num_tokens, SchedulerOutput* out);
  void Preempt(Sequence& seq, SchedulerOutput* out);
  void AddChunk(Sequence& seq, int32_t num_tokens, int32_t* budget, SchedulerOutput* out);
  bool HeadFits() const;  // the best waiting sequence could start now
  // Every change to waiting_ goes through these (they keep the counts).
  void AddWaiting(const Sequence& seq);
  void RemoveWaiting(const Sequence& seq);

  SchedulerOptions options_;
  int32_t max_context_;
  BlockManager blocks_;
  std::unordered_map<int64_t, std::unique_ptr<Sequence>> seqs_;
  std::set<RankKey> waiting_;
  std::map<int32_t, int64_t> waiting_by_priority_;  // waiting_ counted by priority
  std::set<RankKey> running_;
  std::unordered_set<int64_t> scheduled_;  // this step's chunks
  int64_t next_arrival_ = 0;
  int64_t num_preemptions_ = 0;
};

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_SCHEDULER_SCHEDULER_H_
