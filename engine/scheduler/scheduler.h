// Scheduler: continuous batching with chunked prefill over the paged KV cache
// (in the spirit of vLLM v1's scheduler: there are no prefill and decode
// phases, only sequences whose computed tokens lag their known tokens).
// Tested by tests/engine/scheduler/scheduler_test.cc: hand-built cases and
// randomized operation sequences with CheckInvariants() after every call and
// simulated KV pools (device and swap space) that check each chunk's block
// table.
//
// Contract (one Schedule() call = one engine step):
// - A sequence knows token_ids (prompt, then sampled tokens) and has the KV of
//   the first num_computed_tokens of them. Each step gives a running sequence
//   at most one chunk: the tokens [num_computed, num_computed + n). A chunk
//   wants logits when it reaches the last known token; the engine then samples
//   one token and calls AppendToken. A "decode" is a chunk of one token.
// - Budget: the chunks of a step hold at most max_batched_tokens tokens, and
//   at most max_num_seqs sequences run.
// - Effective priority (aging): time on options.clock is cut into aging
//   epochs of aging_interval, counted from the scheduler's construction. A
//   sequence added in epoch E has, in epoch N, the effective priority
//     priority + (N - E)
//   (one class up per epoch boundary passed since its Add; a preemption keeps
//   its E). aging_interval zero: no aging, effective priority == priority.
//   Every sequence ages at the same rate, so the order of two sequences never
//   changes with time: it is fixed by the level E - priority (lower ranks
//   first), the same for waiting and running ones.
// - Rank (who runs, who is preempted): effective priority descending, then
//   arrival ascending.
// - Prefill order: effective priority descending, then expected remaining
//   cost ascending (uncomputed known tokens: the whole prompt for a waiting
//   sequence, prefix-cache hits not foreseen; those past its computed ones
//   for a swapped sequence), then arrival ascending.
// - Order, as phases: (1) preempt running sequences that rank below (strictly
//   lower effective priority than) the first waiting sequence in prefill order
//   while it cannot otherwise start (no free slot or blocks); (2) running
//   sequences with one token to compute (decodes), by rank; (3) prefill work
//   in prefill order, running partial prefills and waiting sequences together:
//   a partial prefill gets min(its uncomputed tokens, the budget left,
//   long_prefill_token_threshold when set); a waiting sequence is admitted
//   (blocks for all its known tokens, prefix-cache hits count as computed) and
//   gets its first chunk likewise.
// - No overtaking among waiting sequences: the first waiting sequence in
//   prefill order that cannot be admitted (max_num_seqs reached, or too few
//   free blocks) stops admission for the step: no waiting sequence after it in
//   prefill order is admitted. Partial prefills after it still get their
//   chunks (their blocks are already allocated).
// - Latency: a waiting sequence first in prefill order gets its first chunk
//   in the next Schedule() call, however long a partial prefill after it in
//   prefill order (lower effective priority; or equal, with more tokens left)
//   is under way: that prefill gets only the budget left. This holds when the
//   decodes leave budget and it can start: a free slot and blocks, which
//   phase (1) frees from running sequences of lower effective priority.
// - Aging bound: a sequence of priority c added at time t ranks strictly ahead
//   of every sequence of priority <= P added at or after
//   t + (P - c + 1) * aging_interval (its level is lower by at least 1), and
//   at least level with every one added at or after t + (P - c) *
//   aging_interval (then the remaining cost, then arrival, decide). However
//   many higher-class sequences keep arriving, it waits only behind those
//   added before t + (P - c + 1) * aging_interval, and it is never preempted
//   for the later ones (see Preemption). With the router's classes
//   (interactive 2, standard 1, batch 0; services/common/request_convert.h)
//   and aging_interval 10 s, a batch sequence ranks ahead of every
//   interactive one added 30 s or more after it.
// - Preemption: when a running sequence needs a block and none is free, the
//   lowest-ranked running sequence not yet scheduled this step (lowest
//   effective priority, then latest arrival) is preempted; if it is the
//   sequence itself, that sequence waits. So a sequence is only ever
//   preempted in favour of one that ranks ahead of it (phase 1: strictly
//   higher effective priority; a decode's block: the victim ranks no higher
//   than the decode). A victim keeps its original arrival and aging epoch,
//   and is preempted (vLLM v0's rule: swap while there is room, else
//   recompute)
//   * by swap when options.num_swap_blocks > 0 and the swap space has a free
//     host block for each block holding its computed tokens
//     (ceil(num_computed_tokens / block_size), at least one):
//     SchedulerOutput::swap_out gets a {device, host} pair for each of those
//     blocks (host blocks ascending with the device ids), its device blocks
//     are freed (this step may give them to others: see Swap ordering), and
//     it waits as kSwapped with its tokens and num_computed_tokens kept;
//   * else by recompute: its blocks are freed, its num_computed_tokens drops
//     to 0, and it waits (kWaiting) with all its tokens (generated ones too)
//     as prompt.
//   Preemptions are counted, those by swap and the blocks copied too (Stats).
// - Resuming a swapped sequence: it waits in the waiting queue like the
//   others; its prefill-order cost is its uncomputed tokens (usually one, so
//   within its level it comes before fresh prompts). It is admitted as a
//   waiting sequence is (a slot, device blocks for all its known tokens,
//   prefix-cache hits reused, no overtaking); each block holding its computed
//   tokens that is not a prefix hit gets a swap_in pair {device, host}; its
//   num_computed_tokens becomes the larger of its own and the hits'; its host
//   blocks are free again from the next Schedule() call on. It gets its
//   chunk in the same step.
// - Shared blocks: a swap-out copies every block holding the victim's
//   computed tokens, prefix-cached blocks shared with running sequences too
//   (a host block belongs to one sequence); on resume the blocks still cached
//   on the device are prefix hits and are not copied back.
// - Swap ordering (what the engine must do with a step's output): every
//   swap_out copy completes before any swap_in copy writes, and both before
//   the step's forward pass touches any block: a swap_out's device block may
//   be freed and given, in the same step, to a swap_in or a chunk. Within
//   each list the copies are independent (no host block twice in swap_out,
//   no device block twice in swap_in; a device block two victims shared is
//   read twice). A step's swaps run even when it has no chunks.
// - Look-ahead (the engine's async scheduling): the engine may plan and launch
//   step N+1 before step N's tokens are back. After launching a step it calls
//   OnStepComputed, then AppendPendingToken for each chunk wanting logits: the
//   sequence gets a kPendingToken (engine/common/pending_token.h) as its next
//   token, which the next Schedule() treats as known (a decode whose input the
//   runner takes from step N's output on the device). ResolvePendingToken puts
//   the sampled token in its place, oldest first. Pending tokens are never in
//   a cached block (a block is cached once its tokens are computed and
//   resolved); a sequence whose pending token is its last
//   (AppendPendingToken's `last`) gets no further chunk; a waiting sequence
//   with pending tokens is not admitted (it stops admission for the step, as
//   one that does not fit does) and phase (1) preempts nothing for it. The
//   sequence's pending tokens are the last of its tokens, at most two (one of
//   a step being waited for, one of the step launched ahead).
// - A sequence never exceeds max_context tokens: Add refuses longer prompts
//   and AppendToken must not be called on a sequence at max_context (the
//   engine finishes it first). max_context is capped at the pool's capacity,
//   so a lone sequence always fits.
// - Ownership: the scheduler owns the sequences, the BlockManager and the
//   SwapSpace (the host blocks' ids; the runner owns their memory). Spans
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
#include "absl/time/time.h"
#include "engine/common/clock.h"
#include "engine/kv_cache/block_manager.h"
#include "engine/kv_cache/swap_space.h"

namespace onecard::engine {

// kWaiting and kSwapped sequences wait (in the waiting queue); a kSwapped
// one's computed KV is in the swap space.
enum class SequenceStatus { kWaiting, kRunning, kSwapped };

struct Sequence {
  int64_t id = 0;
  int32_t priority = 0;
  int64_t arrival = 0;             // order of Add; earlier is smaller
  int64_t aging_epoch = 0;         // the aging epoch of its Add (see the contract)
  std::vector<int32_t> token_ids;  // prompt, then sampled tokens
  int32_t num_prompt_tokens = 0;   // the original prompt's length
  int32_t num_computed_tokens = 0;
  int32_t num_cached_tokens = 0;  // prefix-cache hit at the first admission
  int32_t num_preemptions = 0;
  // Look-ahead: the last num_pending_tokens of token_ids are kPendingToken;
  // last_token_pending: the newest of them ends the sequence.
  int32_t num_pending_tokens = 0;
  bool last_token_pending = false;
  bool admitted_once = false;
  SequenceStatus status = SequenceStatus::kWaiting;

  int32_t num_tokens() const { return static_cast<int32_t>(token_ids.size()); }
  int32_t num_uncomputed() const { return num_tokens() - num_computed_tokens; }
  int32_t num_resolved() const { return num_tokens() - num_pending_tokens; }
};

struct SchedulerOptions {
  int32_t max_num_seqs = 64;
  int32_t max_batched_tokens = 512;
  int32_t max_context = 2048;
  BlockManagerOptions blocks;
  // Host blocks of the swap space (each the shape of a device block); 0: no
  // swap, every preemption recomputes.
  int32_t num_swap_blocks = 0;
  // A sequence's effective priority rises by one each aging_interval after
  // its Add (the contract's aging bound); zero: no aging. Not negative.
  absl::Duration aging_interval = absl::Seconds(10);
  // A prefill chunk takes at most this many tokens (vLLM's
  // long_prefill_token_threshold): a long prompt then spreads over steps of a
  // large budget instead of filling one, so the step under way when a short
  // prompt arrives stays short. 0: only the budget limits a chunk. Not
  // negative.
  int32_t long_prefill_token_threshold = 0;
  // Arrival order only (the baseline the serving benchmarks compare classes
  // against, as vLLM's first-come-first-served policy): priorities, aging
  // and the expected-cost term are ignored, so rank and prefill order are
  // arrival ascending and nothing is preempted for a higher class.
  bool fifo = false;
  Clock* clock = nullptr;  // the aging clock; nullptr = RealClock (tests inject a FakeClock)
};

struct ScheduledChunk {
  int64_t seq_id = 0;
  int32_t start_pos = 0;  // == the sequence's num_computed_tokens
  int32_t num_tokens = 0;
  bool want_logits = false;  // the chunk ends at the last known token
};

struct SchedulerOutput {
  std::vector<ScheduledChunk> chunks;  // decodes by rank, then prefills in prefill order
  std::vector<int64_t> preempted;      // sequences preempted this step
  std::vector<int64_t> swapped_out;    // of those, the ones preempted by swap
  std::vector<int64_t> swapped_in;     // sequences resumed from the swap space
  std::vector<int64_t> admitted;       // sequences admitted for the first time
  // Block copies before the chunks run (see Swap ordering in the contract).
  std::vector<KvBlockCopy> swap_out;  // device -> host
  std::vector<KvBlockCopy> swap_in;   // host -> device
  int32_t num_batched_tokens = 0;
  bool empty() const { return chunks.empty(); }  // no chunks (swaps may remain)
};

// What the scheduler has done since its construction, and its swap space now.
struct SchedulerStats {
  int64_t num_preemptions = 0;         // by swap or by recompute
  int64_t num_swap_preemptions = 0;    // of those, by swap
  int64_t num_swapped_out_blocks = 0;  // pairs in swap_out, all steps
  int64_t num_swapped_in_blocks = 0;   // pairs in swap_in, all steps
  int64_t num_swapped = 0;             // kSwapped sequences now
  int32_t swap_blocks_used = 0;        // host blocks held by them
  int32_t swap_blocks_total = 0;       // options.num_swap_blocks
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
  // Look-ahead (see the contract): appends kPendingToken under AppendToken's
  // preconditions; `last`: that token will be the sequence's last, so it is
  // given no further chunk.
  void AppendPendingToken(int64_t seq_id, bool last);
  // Replaces seq_id's oldest pending token with token_id, whatever its
  // status, and caches the blocks that completes. The sequence must have one.
  void ResolvePendingToken(int64_t seq_id, int32_t token_id);
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
  SchedulerStats Stats() const;
  // seq's effective priority (see the contract) in the aging epoch of the
  // last Add or Schedule call; 0 for every sequence with options.fifo.
  int64_t EffectivePriority(const Sequence& seq) const {
    return options_.fifo ? 0 : epoch_ - Level(seq);
  }

  // Checks every invariant (each sequence in exactly one queue matching its
  // status, limits, block tables cover computed tokens, host blocks held by
  // exactly the swapped sequences and covering their computed tokens, the
  // block manager's and the swap space's own invariants). For tests.
  absl::Status CheckInvariants() const;

 private:
  // Both orders start with the level: aging_epoch - priority, lower first
  // (effective priority descending, see the contract).
  // With options.fifo every level is 0 and the cost term too: arrival order.
  int64_t Level(const Sequence& seq) const {
    return options_.fifo ? 0 : seq.aging_epoch - seq.priority;
  }
  // (level, arrival, id): begin() ranks first, rbegin() last.
  using RankKey = std::tuple<int64_t, int64_t, int64_t>;
  RankKey Rank(const Sequence& seq) const { return {Level(seq), seq.arrival, seq.id}; }
  // (level, uncomputed tokens, arrival, id): the prefill order. Static while
  // a sequence waits (its tokens and computed tokens do not change).
  using PrefillKey = std::tuple<int64_t, int32_t, int64_t, int64_t>;
  PrefillKey PrefillOrder(const Sequence& seq) const {
    return {Level(seq), options_.fifo ? 0 : seq.num_uncomputed(), seq.arrival, seq.id};
  }

  // Moves epoch_ to the clock's aging epoch (never back).
  void AdvanceEpoch();
  // The phases of Schedule().
  void PreemptForHigherPriority(SchedulerOutput* out);
  void ScheduleDecodes(int32_t* budget, SchedulerOutput* out);
  void SchedulePrefills(int32_t* budget, SchedulerOutput* out);
  // Admits a waiting sequence and gives it its first chunk; false (and no
  // change) when no slot or too few blocks are free.
  bool Admit(Sequence& seq, int32_t* budget, SchedulerOutput* out);
  // After Admit's allocation of a swapped sequence (`hit_tokens` from the
  // prefix cache): its swap_in pairs and computed tokens.
  void SwapIn(Sequence& seq, int32_t hit_tokens, SchedulerOutput* out);

  // Grows seq's table to cover num_tokens, preempting the lowest-ranked
  // unscheduled running sequence while blocks are short. False when seq itself
  // was preempted.
  bool EnsureCapacity(Sequence& seq, int32_t num_tokens, SchedulerOutput* out);
  void Preempt(Sequence& seq, SchedulerOutput* out);
  // Preempt's swap: false (and no change) when the swap space lacks room.
  bool SwapOut(Sequence& seq, SchedulerOutput* out);
  void AddChunk(Sequence& seq, int32_t num_tokens, int32_t* budget, SchedulerOutput* out);
  // A prefill chunk's tokens: its uncomputed ones, at most `budget` and
  // options.long_prefill_token_threshold.
  int32_t ChunkTokens(const Sequence& seq, int32_t budget) const;
  bool HeadFits() const;  // the first waiting sequence could start now
  absl::Status CheckSequence(const Sequence& seq) const;  // CheckInvariants' part
  // Every change to waiting_ goes through these (they keep the counts).
  void AddWaiting(const Sequence& seq);
  void RemoveWaiting(const Sequence& seq);

  SchedulerOptions options_;
  int32_t max_context_;
  Clock* clock_;
  absl::Time aging_origin_;  // start of epoch 0
  int64_t epoch_ = 0;        // the aging epoch of the last Add or Schedule
  BlockManager blocks_;
  SwapSpace swap_;
  std::unordered_map<int64_t, std::unique_ptr<Sequence>> seqs_;
  std::set<PrefillKey> waiting_;                    // in prefill order
  std::map<int32_t, int64_t> waiting_by_priority_;  // waiting_ counted by priority
  std::set<RankKey> running_;
  std::unordered_set<int64_t> scheduled_;  // this step's chunks
  int64_t next_arrival_ = 0;
  SchedulerStats stats_;  // the counters (the rest is filled by Stats())
};

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_SCHEDULER_SCHEDULER_H_
