// EngineImpl's step: admit, end cancelled/expired requests, schedule, swap,
// run the batch, sample, stream. Contract in engine_impl.h.
// Tested by tests/engine/runtime/engine_impl_test.cc.
#include <algorithm>
#include <cmath>
#include <optional>
#include <span>

#include "absl/strings/str_cat.h"
#include "engine/common/log.h"
#include "engine/runtime/engine_impl.h"

namespace onecard::engine {
namespace {

// Tokens per second are averaged over this much recent time.
constexpr absl::Duration kRateWindow = absl::Seconds(5);

void Deliver(const RequestState& state, const StreamOutput& output) {
  if (state.request().on_output) state.request().on_output(output);
}

}  // namespace

bool EngineImpl::RunStep() {
  absl::MutexLock step_lock(&step_mu_);
  const absl::Time step_start = clock_->Now();
  bool progressed = AdmitIncoming();
  progressed |= EndCancelledAndExpired();
  if (CanLookAhead()) return RunStepAhead(step_start, progressed);
  if (in_flight_.has_value()) {  // a request that cannot go ahead arrived
    CompleteInFlight();
    progressed = true;
  }
  const SchedulerOutput plan = scheduler_.Schedule();
  if (!plan.swap_out.empty() || !plan.swap_in.empty()) {
    progressed = true;
    if (!RunSwaps(plan)) {
      PublishStats(0);
      return true;
    }
  }
  if (plan.empty()) {
    last_forward_end_.reset();  // the model's idle time is not a step's gap
    PublishStats(0);
    return progressed;
  }
  OnScheduled(plan);
  std::vector<float> logits;    // [rows, vocab]: host sampling
  std::vector<int32_t> tokens;  // [rows]: device sampling
  const bool on_device = CanSampleOnDevice(plan);
  const absl::Time forward_start = clock_->Now();
  const absl::Status status =
      on_device ? RunForwardSample(plan, &tokens) : RunForward(plan, &logits);
  const absl::Time forward_end = clock_->Now();
  const absl::Duration gap =
      last_forward_end_.has_value() ? forward_start - *last_forward_end_ : absl::ZeroDuration();
  const bool consecutive = last_forward_end_.has_value();
  last_forward_end_ = forward_end;
  const std::optional<RunnerStepTimes> runner_times = parts_.runner->last_step_times();
  const int64_t generated_before = generation_tokens_total_;
  if (status.ok()) {
    scheduler_.OnStepComputed(plan);
    if (on_device) {
      EmitTokens(plan, tokens);
    } else {
      SampleAndEmit(plan, logits);
    }
  } else {
    FailBatch(plan, status);
  }
  ++steps_total_;
  if (requests_.empty()) last_forward_end_.reset();  // idle next: no gap to measure
  PublishStats(generation_tokens_total_ - generated_before);
  ReportStep(plan, step_start, forward_end - forward_start, gap, consecutive, runner_times);
  return true;
}

void EngineImpl::ReportStep(const SchedulerOutput& plan, absl::Time step_start,
                            absl::Duration forward, absl::Duration gap, bool consecutive,
                            const std::optional<RunnerStepTimes>& runner_times) const {
  if (!options_.on_step) return;
  StepInfo info{.duration = clock_->Now() - step_start,
                .forward = forward,
                .gap = gap,
                .num_seqs = static_cast<int32_t>(plan.chunks.size()),
                .num_tokens = plan.num_batched_tokens};
  if (runner_times.has_value()) {
    info.runner_host = runner_times->host;
    if (consecutive) info.device_gap = runner_times->device_gap;
  }
  options_.on_step(info);
}

bool EngineImpl::AdmitIncoming() {
  std::vector<std::unique_ptr<RequestState>> batch;
  {
    absl::MutexLock lock(&mu_);
    batch.swap(incoming_);
  }
  for (std::unique_ptr<RequestState>& state : batch) {
    const GenerationRequest& request = state->request();
    const uint64_t id = state->id();
    absl::Status added =
        scheduler_.Add(static_cast<int64_t>(id), request.prompt_token_ids, request.priority);
    prompt_tokens_total_ += static_cast<int64_t>(request.prompt_token_ids.size());
    requests_[id] = std::move(state);
    if (!added.ok()) FinishRequest(id, requests_.at(id)->Finish(FinishReason::kError, added));
  }
  return !batch.empty();
}

bool EngineImpl::EndCancelledAndExpired() {
  std::vector<uint64_t> cancels;
  bool cancel_all;
  {
    absl::MutexLock lock(&mu_);
    cancels.swap(cancels_);
    cancel_all = cancel_all_;
    cancel_all_ = false;
  }
  std::vector<std::pair<uint64_t, FinishReason>> ending;
  for (uint64_t id : cancels) {
    if (requests_.contains(id)) ending.emplace_back(id, FinishReason::kCancelled);
  }
  const absl::Time now = clock_->Now();
  for (const auto& [id, state] : requests_) {
    if (cancel_all) {
      ending.emplace_back(id, FinishReason::kCancelled);
    } else if (now >= state->request().deadline) {
      ending.emplace_back(id, FinishReason::kDeadline);
    }
  }
  for (const auto& [id, reason] : ending) {
    auto it = requests_.find(id);
    if (it == requests_.end()) continue;  // cancelled twice
    FinishRequest(id, it->second->Finish(reason, absl::OkStatus()));
  }
  return !ending.empty();
}

void EngineImpl::OnScheduled(const SchedulerOutput& plan) {
  const absl::Time now = clock_->Now();
  for (int64_t id : plan.admitted) {
    auto it = requests_.find(static_cast<uint64_t>(id));
    if (it == requests_.end()) continue;
    it->second->OnFirstScheduled(now, scheduler_.Find(id)->num_cached_tokens);
  }
}

bool EngineImpl::RunSwaps(const SchedulerOutput& plan) {
  absl::Status status = parts_.runner->SwapOut(plan.swap_out);
  if (status.ok()) status = parts_.runner->SwapIn(plan.swap_in);
  if (status.ok()) {
    swapped_out_blocks_total_ += static_cast<int64_t>(plan.swap_out.size());
    swapped_in_blocks_total_ += static_cast<int64_t>(plan.swap_in.size());
    return true;
  }
  // The swapped-out sequences' KV may be lost, and the resumed ones' (all
  // in the chunks) not there.
  for (int64_t id : plan.swapped_out) {
    auto it = requests_.find(static_cast<uint64_t>(id));
    if (it == requests_.end()) continue;
    FinishRequest(it->first, it->second->Finish(FinishReason::kError, status));
  }
  FailBatch(plan, status);
  return false;
}

BatchInput EngineImpl::BuildBatch(const SchedulerOutput& plan, size_t* rows) const {
  BatchInput batch;
  *rows = 0;
  for (const ScheduledChunk& chunk : plan.chunks) {
    const Sequence& seq = *scheduler_.Find(chunk.seq_id);
    const int32_t end = chunk.start_pos + chunk.num_tokens;
    batch.chunks.push_back(
        {.seq_id = chunk.seq_id,
         .token_ids =
             std::span<const int32_t>(seq.token_ids).subspan(chunk.start_pos, chunk.num_tokens),
         .start_pos = chunk.start_pos,
         .block_table = scheduler_.BlockTable(chunk.seq_id, end),
         .want_logits = chunk.want_logits});
    if (chunk.want_logits) ++*rows;
  }
  return batch;
}

absl::Status EngineImpl::RunForward(const SchedulerOutput& plan, std::vector<float>* logits) {
  size_t rows = 0;
  const BatchInput batch = BuildBatch(plan, &rows);
  absl::Status status = parts_.runner->Forward(batch, logits);
  if (status.ok() && logits->size() != rows * static_cast<size_t>(vocab_size_)) {
    status = absl::InternalError(absl::StrCat("runner ", parts_.runner->name(), " returned ",
                                              logits->size(), " logits for ", rows, " rows of ",
                                              vocab_size_));
  }
  return status;
}

void EngineImpl::SampleAndEmit(const SchedulerOutput& plan, const std::vector<float>& logits) {
  const absl::Time now = clock_->Now();
  size_t row = 0;
  for (const ScheduledChunk& chunk : plan.chunks) {
    if (!chunk.want_logits) continue;
    std::span<const float> row_logits(logits.data() + row++ * vocab_size_, vocab_size_);
    const RequestState& state = *requests_.at(static_cast<uint64_t>(chunk.seq_id));
    const Sequence& seq = *scheduler_.Find(chunk.seq_id);
    const std::span<const int32_t> tokens(seq.token_ids);
    const GenerationRequest& request = state.request();
    EmitToken(chunk,
              sampler_.Sample({.logits = row_logits,
                               .params = &request.sampling,
                               .prompt_token_ids = tokens.first(seq.num_prompt_tokens),
                               .output_token_ids = tokens.subspan(seq.num_prompt_tokens),
                               .masked_token_ids = state.MaskedTokenIds(),
                               .want_logprobs = request.logprobs,
                               .num_top_logprobs = request.top_logprobs}),
              now);
  }
}

bool EngineImpl::CanSampleOnDevice(const SchedulerOutput& plan) const {
  if (!options_.device_sampling || !parts_.runner->SamplesOnDevice()) return false;
  bool any_row = false;
  for (const ScheduledChunk& chunk : plan.chunks) {
    if (!chunk.want_logits) continue;
    any_row = true;
    const RequestState& state = *requests_.at(static_cast<uint64_t>(chunk.seq_id));
    const GenerationRequest& request = state.request();
    const SamplingParams& p = request.sampling;
    // min_tokens masks logits, which only the host sampler does.
    if (!state.MaskedTokenIds().empty()) return false;
    // The device applies every penalty over one history; the host applies
    // the repetition penalty over prompt + output and the others over the
    // output only, so a row wanting both kinds stays on the host.
    if (request.logprobs || (RepetitionPenalized(p) && PresenceOrFrequencyPenalized(p))) {
      return false;
    }
  }
  return any_row;
}

SampleRowParams EngineImpl::RowParams(const SamplingParams& p, const Sequence& seq) {
  // The host sampler's draw for this position (sampler.h: determinism).
  const size_t num_output = static_cast<size_t>(seq.num_tokens() - seq.num_prompt_tokens);
  return {.temperature = p.temperature,
          .top_k = p.top_k,
          .top_p = p.top_p,
          .min_p = p.min_p,
          .repetition_penalty = p.repetition_penalty,
          .presence_penalty = p.presence_penalty,
          .frequency_penalty = p.frequency_penalty,
          .uniform = std::min(static_cast<float>(UniformDraw(p.seed, num_output)),
                              std::nextafter(1.0f, 0.0f))};
}

absl::Status EngineImpl::RunForwardSample(const SchedulerOutput& plan,
                                          std::vector<int32_t>* tokens) {
  size_t rows = 0;
  const BatchInput batch = BuildBatch(plan, &rows);
  std::vector<SampleRowParams> params;
  std::vector<std::span<const int32_t>> histories;
  bool any_history = false;
  for (const ScheduledChunk& chunk : plan.chunks) {
    if (!chunk.want_logits) continue;
    const SamplingParams& p = requests_.at(static_cast<uint64_t>(chunk.seq_id))->request().sampling;
    const Sequence& seq = *scheduler_.Find(chunk.seq_id);
    const std::span<const int32_t> all(seq.token_ids);
    params.push_back(RowParams(p, seq));
    if (RepetitionPenalized(p)) {
      histories.push_back(all);
    } else if (PresenceOrFrequencyPenalized(p)) {
      histories.push_back(all.subspan(seq.num_prompt_tokens));
    } else {
      histories.emplace_back();
    }
    any_history |= !histories.back().empty();
  }
  if (!any_history) histories.clear();
  const absl::Status status = parts_.runner->ForwardSample(batch, params, histories, tokens);
  if (status.ok() && tokens->size() != rows) {
    return absl::InternalError(absl::StrCat("runner ", parts_.runner->name(), " returned ",
                                            tokens->size(), " tokens for ", rows, " rows"));
  }
  return status;
}

void EngineImpl::EmitTokens(const SchedulerOutput& plan, const std::vector<int32_t>& tokens) {
  const absl::Time now = clock_->Now();
  size_t row = 0;
  for (const ScheduledChunk& chunk : plan.chunks) {
    if (!chunk.want_logits) continue;
    EmitToken(chunk, SampleResult{.token_id = tokens[row++]}, now);
  }
}

void EngineImpl::EmitToken(const ScheduledChunk& chunk, const SampleResult& sample,
                           absl::Time now) {
  RequestState& state = *requests_.at(static_cast<uint64_t>(chunk.seq_id));
  const Sequence& seq = *scheduler_.Find(chunk.seq_id);
  scheduler_.AppendToken(seq.id, sample.token_id);
  StreamToken(state, sample, seq.num_tokens(), now);
}

void EngineImpl::StreamToken(RequestState& state, const SampleResult& sample,
                             int32_t num_seq_tokens, absl::Time now) {
  ++generation_tokens_total_;
  StreamOutput out = state.OnToken(sample, num_seq_tokens, max_context_, now);
  if (out.finished) {
    FinishRequest(state.id(), out);
  } else {
    Deliver(state, out);
  }
}

void EngineImpl::FailBatch(const SchedulerOutput& plan, const absl::Status& status) {
  Log(LogLevel::kError, "engine", "runner %s failed a batch of %d sequences: %s",
      parts_.runner->name(), plan.chunks.size(), status.ToString());
  for (const ScheduledChunk& chunk : plan.chunks) {
    auto it = requests_.find(static_cast<uint64_t>(chunk.seq_id));
    if (it == requests_.end()) continue;
    FinishRequest(it->first, it->second->Finish(FinishReason::kError, status));
  }
}

void EngineImpl::FinishRequest(uint64_t id, const StreamOutput& final_output) {
  auto it = requests_.find(id);
  std::unique_ptr<RequestState> state = std::move(it->second);
  requests_.erase(it);
  scheduler_.Remove(static_cast<int64_t>(id));
  Deliver(*state, final_output);
  absl::MutexLock lock(&mu_);
  --num_active_;
}

void EngineImpl::PublishStats(int64_t generated_tokens) {
  const absl::Time now = clock_->Now();
  if (generated_tokens > 0) recent_tokens_.emplace_back(now, generated_tokens);
  while (!recent_tokens_.empty() && recent_tokens_.front().first < now - kRateWindow) {
    recent_tokens_.pop_front();
  }
  int64_t window_tokens = 0;
  for (const auto& [time, tokens] : recent_tokens_) window_tokens += tokens;
  const double window_s = absl::ToDoubleSeconds(std::min(kRateWindow, now - start_time_));
  const BlockManager& blocks = scheduler_.block_manager();
  absl::MutexLock lock(&mu_);
  stats_.num_waiting = scheduler_.num_waiting();
  stats_.num_waiting_by_priority = scheduler_.NumWaitingByPriority();
  stats_.num_running = scheduler_.num_running();
  stats_.kv_blocks_used = blocks.num_used_blocks();
  stats_.kv_blocks_total = blocks.num_blocks();
  stats_.tokens_per_second = window_s > 0 ? static_cast<double>(window_tokens) / window_s : 0.0;
  const SchedulerStats sched = scheduler_.Stats();
  stats_.num_preemptions = sched.num_preemptions;
  stats_.num_swapped = sched.num_swapped;
  stats_.kv_swap_blocks_used = sched.swap_blocks_used;
  stats_.num_swap_preemptions = sched.num_swap_preemptions;
  stats_.kv_swapped_out_blocks_total = swapped_out_blocks_total_;
  stats_.kv_swapped_in_blocks_total = swapped_in_blocks_total_;
  stats_.kv_swap_out_bytes_total = swapped_out_blocks_total_ * swap_space_.block_bytes;
  stats_.kv_swap_in_bytes_total = swapped_in_blocks_total_ * swap_space_.block_bytes;
  stats_.prompt_tokens_total = prompt_tokens_total_;
  stats_.generation_tokens_total = generation_tokens_total_;
  stats_.steps_total = steps_total_;
}

}  // namespace onecard::engine
