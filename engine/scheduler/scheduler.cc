// Scheduler implementation (contract in scheduler.h).
// Tested by tests/engine/scheduler/scheduler_test.cc.
#include "engine/scheduler/scheduler.h"

#include <algorithm>
#include <cassert>

#include "absl/strings/str_cat.h"
#include "engine/common/pending_token.h"
#include "engine/common/status_macros.h"

namespace onecard::engine {

Scheduler::Scheduler(const SchedulerOptions& options)
    : options_(options),
      max_context_(static_cast<int32_t>(std::min<int64_t>(
          options.max_context,
          static_cast<int64_t>(options.blocks.num_blocks) * options.blocks.block_size))),
      clock_(options.clock != nullptr ? options.clock : RealClock::Get()),
      aging_origin_(clock_->Now()),
      blocks_(options.blocks),
      swap_(options.num_swap_blocks) {
  assert(options.max_num_seqs > 0 && "max_num_seqs must be positive");
  assert(options.max_batched_tokens > 0 && "max_batched_tokens must be positive");
  assert(options.aging_interval >= absl::ZeroDuration() && "aging_interval must not be negative");
  assert(options.long_prefill_token_threshold >= 0 && "the threshold must not be negative");
  stats_.swap_blocks_total = swap_.num_blocks();
}

void Scheduler::AdvanceEpoch() {
  if (options_.aging_interval <= absl::ZeroDuration()) return;  // no aging: epoch 0
  absl::Duration unused;
  // A real clock may step back; the epoch does not.
  const int64_t now =
      absl::IDivDuration(clock_->Now() - aging_origin_, options_.aging_interval, &unused);
  epoch_ = std::max(epoch_, now);
}

absl::Status Scheduler::Add(int64_t seq_id, std::vector<int32_t> prompt, int32_t priority) {
  if (seqs_.contains(seq_id)) {
    return absl::InvalidArgumentError(absl::StrCat("sequence id ", seq_id, " is in use"));
  }
  if (prompt.empty()) return absl::InvalidArgumentError("prompt: empty");
  if (static_cast<int64_t>(prompt.size()) > max_context_) {
    return absl::InvalidArgumentError(
        absl::StrCat("prompt: ", prompt.size(), " tokens exceed the context of ", max_context_));
  }
  auto seq = std::make_unique<Sequence>();
  seq->id = seq_id;
  seq->priority = priority;
  seq->arrival = next_arrival_++;
  AdvanceEpoch();
  seq->aging_epoch = epoch_;
  seq->num_prompt_tokens = static_cast<int32_t>(prompt.size());
  seq->token_ids = std::move(prompt);
  AddWaiting(*seq);
  seqs_[seq_id] = std::move(seq);
  return absl::OkStatus();
}

SchedulerOutput Scheduler::Schedule() {
  SchedulerOutput out;
  int32_t budget = options_.max_batched_tokens;
  scheduled_.clear();
  AdvanceEpoch();
  PreemptForHigherPriority(&out);
  ScheduleDecodes(&budget, &out);
  SchedulePrefills(&budget, &out);
  swap_.EndStep();  // the resumed sequences' host blocks: free for the next step
  return out;
}

bool Scheduler::HeadFits() const {
  if (waiting_.empty()) return false;
  if (static_cast<int32_t>(running_.size()) >= options_.max_num_seqs) return false;
  const Sequence& head = *seqs_.at(std::get<3>(*waiting_.begin()));
  return head.num_pending_tokens == 0 && blocks_.CanAllocate(head.token_ids);
}

void Scheduler::PreemptForHigherPriority(SchedulerOutput* out) {
  while (!waiting_.empty() && !running_.empty()) {
    const int64_t head_level = std::get<0>(*waiting_.begin());
    const int64_t worst_level = std::get<0>(*running_.rbegin());
    if (worst_level <= head_level || HeadFits()) return;
    // A head with pending tokens waits for them, not for room: nothing to free.
    if (seqs_.at(std::get<3>(*waiting_.begin()))->num_pending_tokens > 0) return;
    Preempt(*seqs_.at(std::get<2>(*running_.rbegin())), out);
  }
}

void Scheduler::ScheduleDecodes(int32_t* budget, SchedulerOutput* out) {
  std::vector<int64_t> order;
  order.reserve(running_.size());
  for (const RankKey& key : running_) order.push_back(std::get<2>(key));
  for (int64_t id : order) {
    if (*budget == 0) return;
    Sequence& seq = *seqs_.at(id);
    // Skip sequences preempted earlier in this loop, or already given a chunk.
    if (seq.status != SequenceStatus::kRunning || scheduled_.contains(id)) continue;
    if (seq.num_uncomputed() != 1 || seq.last_token_pending) continue;
    if (!EnsureCapacity(seq, seq.num_computed_tokens + 1, out)) continue;
    AddChunk(seq, 1, budget, out);
  }
}

void Scheduler::SchedulePrefills(int32_t* budget, SchedulerOutput* out) {
  std::vector<PrefillKey> partial;  // running sequences still in their prompt
  for (const RankKey& key : running_) {
    const Sequence& seq = *seqs_.at(std::get<2>(key));
    if (seq.num_uncomputed() > 1 && !scheduled_.contains(seq.id)) {
      partial.push_back(PrefillOrder(seq));
    }
  }
  std::sort(partial.begin(), partial.end());
  size_t next_partial = 0;
  bool admitting = true;  // until a waiting sequence cannot start (no overtaking)
  while (*budget > 0) {
    const bool has_partial = next_partial < partial.size();
    const bool has_waiting = admitting && !waiting_.empty();
    if (has_waiting && (!has_partial || *waiting_.begin() < partial[next_partial])) {
      admitting = Admit(*seqs_.at(std::get<3>(*waiting_.begin())), budget, out);
    } else if (has_partial) {
      Sequence& seq = *seqs_.at(std::get<3>(partial[next_partial++]));
      if (seq.status != SequenceStatus::kRunning) continue;  // preempted in this loop
      const int32_t n = ChunkTokens(seq, *budget);
      // Admission allocated blocks for every known token, so this never
      // preempts; it is kept for the rule's sake.
      if (EnsureCapacity(seq, seq.num_computed_tokens + n, out)) AddChunk(seq, n, budget, out);
    } else {
      return;
    }
  }
}

bool Scheduler::Admit(Sequence& seq, int32_t* budget, SchedulerOutput* out) {
  if (static_cast<int32_t>(running_.size()) >= options_.max_num_seqs) return false;
  if (seq.num_pending_tokens > 0) return false;  // its prefill would read them
  std::optional<int32_t> cached = blocks_.Allocate(seq.id, seq.token_ids);
  if (!cached.has_value()) return false;
  RemoveWaiting(seq);
  if (seq.status == SequenceStatus::kSwapped) {
    SwapIn(seq, *cached, out);
  } else {
    seq.num_computed_tokens = *cached;
  }
  seq.status = SequenceStatus::kRunning;
  running_.insert(Rank(seq));
  if (!seq.admitted_once) {
    seq.admitted_once = true;
    seq.num_cached_tokens = *cached;
    out->admitted.push_back(seq.id);
  }
  assert(seq.num_uncomputed() > 0 && "a waiting sequence has a token to compute");
  AddChunk(seq, ChunkTokens(seq, *budget), budget, out);
  return true;
}

void Scheduler::SwapIn(Sequence& seq, int32_t hit_tokens, SchedulerOutput* out) {
  const std::span<const int32_t> device = blocks_.BlockTable(seq.id);
  const std::span<const int32_t> host = swap_.Table(seq.id);
  // Blocks [0, hits) are prefix hits: their KV is on the device already.
  const size_t hits = static_cast<size_t>(hit_tokens / blocks_.block_size());
  for (size_t i = hits; i < host.size(); ++i) {
    out->swap_in.push_back({.device_block = device[i], .host_block = host[i]});
    ++stats_.num_swapped_in_blocks;
  }
  swap_.Release(seq.id);  // free from the next step: no swap_out reuses them in this one
  seq.num_computed_tokens = std::max(seq.num_computed_tokens, hit_tokens);
  --stats_.num_swapped;
  out->swapped_in.push_back(seq.id);
}

bool Scheduler::EnsureCapacity(Sequence& seq, int32_t num_tokens, SchedulerOutput* out) {
  while (blocks_.num_tokens(seq.id) < num_tokens) {
    if (blocks_.Append(seq.id, num_tokens - blocks_.num_tokens(seq.id))) return true;
    Sequence* victim = nullptr;
    for (auto it = running_.rbegin(); it != running_.rend() && victim == nullptr; ++it) {
      if (!scheduled_.contains(std::get<2>(*it))) victim = seqs_.at(std::get<2>(*it)).get();
    }
    assert(victim != nullptr && "seq itself is running and unscheduled");
    Preempt(*victim, out);
    if (victim == &seq) return false;
  }
  return true;
}

void Scheduler::Preempt(Sequence& seq, SchedulerOutput* out) {
  assert(seq.status == SequenceStatus::kRunning && "only running sequences are preempted");
  running_.erase(Rank(seq));
  if (!SwapOut(seq, out)) {
    seq.status = SequenceStatus::kWaiting;
    seq.num_computed_tokens = 0;  // before AddWaiting: the prefill order counts it
  }
  blocks_.Free(seq.id);
  AddWaiting(seq);
  ++seq.num_preemptions;
  ++stats_.num_preemptions;
  out->preempted.push_back(seq.id);
}

bool Scheduler::SwapOut(Sequence& seq, SchedulerOutput* out) {
  const int32_t bs = blocks_.block_size();
  const int32_t n = (seq.num_computed_tokens + bs - 1) / bs;
  if (n == 0) return false;
  std::optional<std::span<int32_t>> host = swap_.Allocate(seq.id, n);
  if (!host.has_value()) return false;
  // The ascending host blocks go to the blocks in device id order, so that
  // consecutive device blocks make runs (KvBlockRuns) whatever the table's
  // order.
  const std::span<const int32_t> device = blocks_.BlockTable(seq.id).first(n);
  std::vector<int32_t> order(n);
  for (int32_t i = 0; i < n; ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](int32_t a, int32_t b) { return device[a] < device[b]; });
  const std::vector<int32_t> ascending(host->begin(), host->end());
  for (int32_t j = 0; j < n; ++j) (*host)[order[j]] = ascending[j];
  for (int32_t i = 0; i < n; ++i) {
    out->swap_out.push_back({.device_block = device[i], .host_block = (*host)[i]});
  }
  seq.status = SequenceStatus::kSwapped;
  stats_.num_swapped_out_blocks += n;
  ++stats_.num_swap_preemptions;
  ++stats_.num_swapped;
  out->swapped_out.push_back(seq.id);
  return true;
}

int32_t Scheduler::ChunkTokens(const Sequence& seq, int32_t budget) const {
  const int32_t n = std::min(seq.num_uncomputed(), budget);
  const int32_t cap = options_.long_prefill_token_threshold;
  return cap > 0 ? std::min(n, cap) : n;
}

void Scheduler::AddChunk(Sequence& seq, int32_t num_tokens, int32_t* budget, SchedulerOutput* out) {
  const int32_t start = seq.num_computed_tokens;
  out->chunks.push_back({.seq_id = seq.id,
                         .start_pos = start,
                         .num_tokens = num_tokens,
                         .want_logits = start + num_tokens == seq.num_tokens()});
  out->num_batched_tokens += num_tokens;
  *budget -= num_tokens;
  scheduled_.insert(seq.id);
}

void Scheduler::OnStepComputed(const SchedulerOutput& output) {
  for (const ScheduledChunk& chunk : output.chunks) {
    auto it = seqs_.find(chunk.seq_id);
    if (it == seqs_.end()) continue;
    Sequence& seq = *it->second;
    if (seq.status != SequenceStatus::kRunning || seq.num_computed_tokens != chunk.start_pos) {
      continue;  // removed and re-added, or preempted: the chunk is stale
    }
    seq.num_computed_tokens += chunk.num_tokens;
    blocks_.CacheComputedBlocks(seq.id, seq.token_ids,
                                std::min(seq.num_computed_tokens, seq.num_resolved()));
  }
}

void Scheduler::AppendToken(int64_t seq_id, int32_t token_id) {
  Sequence& seq = *seqs_.at(seq_id);
  assert(seq.status == SequenceStatus::kRunning && seq.num_uncomputed() == 0 &&
         "AppendToken: only after the chunk that reached the last token");
  assert(seq.num_tokens() < max_context_ && "AppendToken: the engine stops at max_context");
  seq.token_ids.push_back(token_id);
}

void Scheduler::AppendPendingToken(int64_t seq_id, bool last) {
  AppendToken(seq_id, kPendingToken);
  Sequence& seq = *seqs_.at(seq_id);
  ++seq.num_pending_tokens;
  seq.last_token_pending = last;
}

void Scheduler::ResolvePendingToken(int64_t seq_id, int32_t token_id) {
  Sequence& seq = *seqs_.at(seq_id);
  assert(seq.num_pending_tokens > 0 && "ResolvePendingToken: no pending token");
  seq.token_ids[static_cast<size_t>(seq.num_resolved())] = token_id;
  --seq.num_pending_tokens;
  if (seq.status == SequenceStatus::kRunning) {
    blocks_.CacheComputedBlocks(seq.id, seq.token_ids,
                                std::min(seq.num_computed_tokens, seq.num_resolved()));
  }
}

void Scheduler::Remove(int64_t seq_id) {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return;
  Sequence& seq = *it->second;
  if (seq.status == SequenceStatus::kRunning) {
    running_.erase(Rank(seq));
    blocks_.Free(seq_id);
  } else {
    RemoveWaiting(seq);
  }
  if (seq.status == SequenceStatus::kSwapped) {
    swap_.Free(seq_id);
    --stats_.num_swapped;
  }
  scheduled_.erase(seq_id);
  seqs_.erase(it);
}

const Sequence* Scheduler::Find(int64_t seq_id) const {
  auto it = seqs_.find(seq_id);
  return it == seqs_.end() ? nullptr : it->second.get();
}

void Scheduler::AddWaiting(const Sequence& seq) {
  waiting_.insert(PrefillOrder(seq));
  ++waiting_by_priority_[seq.priority];
}

void Scheduler::RemoveWaiting(const Sequence& seq) {
  if (waiting_.erase(PrefillOrder(seq)) == 0) return;
  auto it = waiting_by_priority_.find(seq.priority);
  if (--it->second == 0) waiting_by_priority_.erase(it);
}

SchedulerStats Scheduler::Stats() const {
  SchedulerStats stats = stats_;
  stats.swap_blocks_used = swap_.num_used_blocks();
  return stats;
}

std::span<const int32_t> Scheduler::BlockTable(int64_t seq_id, int32_t num_tokens) const {
  std::span<const int32_t> table = blocks_.BlockTable(seq_id);
  const size_t n =
      (static_cast<size_t>(num_tokens) + blocks_.block_size() - 1) / blocks_.block_size();
  return table.first(std::min(n, table.size()));
}

absl::Status Scheduler::CheckInvariants() const {
  RETURN_IF_ERROR(blocks_.CheckInvariants());
  RETURN_IF_ERROR(swap_.CheckInvariants());
  if (waiting_.size() + running_.size() != seqs_.size()) {
    return absl::InternalError("a sequence is in no queue or in both");
  }
  std::map<int32_t, int64_t> by_priority;
  for (const PrefillKey& key : waiting_) {
    auto it = seqs_.find(std::get<3>(key));
    if (it == seqs_.end()) return absl::InternalError("an unknown sequence is waiting");
    ++by_priority[it->second->priority];
  }
  if (by_priority != waiting_by_priority_) {
    return absl::InternalError("the waiting counts by priority disagree with the queue");
  }
  if (static_cast<int32_t>(running_.size()) > options_.max_num_seqs) {
    return absl::InternalError("more running sequences than max_num_seqs");
  }
  int64_t num_swapped = 0;
  for (const auto& [id, ptr] : seqs_) {
    RETURN_IF_ERROR(CheckSequence(*ptr));
    num_swapped += ptr->status == SequenceStatus::kSwapped ? 1 : 0;
  }
  if (num_swapped != stats_.num_swapped) {
    return absl::InternalError(
        absl::StrCat(num_swapped, " sequences swapped, ", stats_.num_swapped, " counted"));
  }
  return absl::OkStatus();
}

absl::Status Scheduler::CheckSequence(const Sequence& seq) const {
  const int64_t id = seq.id;
  const bool running = seq.status == SequenceStatus::kRunning;
  const bool swapped = seq.status == SequenceStatus::kSwapped;
  if (running ? !running_.contains(Rank(seq)) : !waiting_.contains(PrefillOrder(seq))) {
    return absl::InternalError(absl::StrCat("seq ", id, ": not in its status's queue"));
  }
  if (seq.aging_epoch > epoch_) {
    return absl::InternalError(absl::StrCat("seq ", id, ": added in a later aging epoch"));
  }
  if (seq.num_tokens() > max_context_ || seq.num_tokens() < seq.num_prompt_tokens ||
      seq.num_prompt_tokens < 1) {
    return absl::InternalError(
        absl::StrCat("seq ", id, ": ", seq.num_tokens(), " tokens outside [prompt, max_context]"));
  }
  if (running != blocks_.HasSequence(id) || swapped != swap_.HasSequence(id)) {
    return absl::InternalError(
        absl::StrCat("seq ", id, ": holds device blocks iff running, host blocks iff swapped"));
  }
  if (seq.num_pending_tokens < 0 || seq.num_pending_tokens > 2 ||
      seq.num_resolved() < seq.num_prompt_tokens ||
      std::count(seq.token_ids.begin(), seq.token_ids.end(), kPendingToken) !=
          seq.num_pending_tokens ||
      std::count(seq.token_ids.begin() + seq.num_resolved(), seq.token_ids.end(), kPendingToken) !=
          seq.num_pending_tokens) {
    return absl::InternalError(absl::StrCat("seq ", id, ": ", seq.num_pending_tokens,
                                            " pending tokens, not its last ones"));
  }
  const int32_t bs = blocks_.block_size();
  const int32_t covered = running   ? blocks_.num_tokens(id)
                          : swapped ? static_cast<int32_t>(swap_.Table(id).size()) * bs
                                    : 0;
  if (seq.num_computed_tokens > covered || seq.num_computed_tokens > seq.num_tokens()) {
    return absl::InternalError(absl::StrCat("seq ", id, ": computed tokens past its blocks"));
  }
  if (swapped && (seq.num_computed_tokens <= covered - bs || seq.num_uncomputed() < 1)) {
    return absl::InternalError(
        absl::StrCat("seq ", id, ": host blocks beyond its computed tokens, or none to compute"));
  }
  return absl::OkStatus();
}

}  // namespace onecard::engine
