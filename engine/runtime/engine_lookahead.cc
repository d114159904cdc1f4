// EngineImpl's step with one step of look-ahead (EngineOptions::
// async_scheduling; the flow in engine_impl.h): step N+1 is planned and
// launched before step N's tokens are read back, so the host's work of the
// step runs while the device computes.
// Tested by tests/engine/runtime/engine_lookahead_test.cc.
#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/common/log.h"
#include "engine/runtime/engine_impl.h"

namespace onecard::engine {

bool EngineImpl::CanLookAhead() const {
  if (!options_.async_scheduling || !options_.device_sampling ||
      !parts_.runner->SamplesOnDevice()) {
    return false;
  }
  for (const auto& [id, state] : requests_) {
    const GenerationRequest& request = state->request();
    const SamplingParams& p = request.sampling;
    // Penalties read the whole history (pending tokens unknown); logprobs
    // and min_tokens masks need the host sampler.
    if (request.logprobs || request.top_logprobs > 0 || request.stopping.min_tokens > 0 ||
        RepetitionPenalized(p) || PresenceOrFrequencyPenalized(p)) {
      return false;
    }
  }
  return true;
}

bool EngineImpl::LastTokenAhead(const Sequence& seq, const RequestState& state) const {
  // RequestState::OnToken's length check, for the token about to be appended.
  const int32_t num_tokens = seq.num_tokens() + 1;
  return num_tokens - seq.num_prompt_tokens >= state.request().stopping.max_tokens ||
         num_tokens >= std::min(max_context_, scheduler_.max_context());
}

bool EngineImpl::RunStepAhead(absl::Time step_start, bool progressed) {
  last_forward_end_.reset();  // the one-at-a-time steps' gap; the runner measures this one's
  const SchedulerOutput plan = scheduler_.Schedule();
  if (!plan.swap_out.empty() || !plan.swap_in.empty()) {
    progressed = true;
    if (!RunSwaps(plan)) {  // the plan's requests failed
      if (in_flight_.has_value()) CompleteInFlight();
      PublishStats(0);
      return true;
    }
  }
  const int64_t generated_before = generation_tokens_total_;
  if (plan.empty()) {
    if (!in_flight_.has_value()) {
      PublishStats(0);
      return progressed;
    }
    CompleteInFlight();  // nothing to launch ahead of it
    PublishStats(generation_tokens_total_ - generated_before);
    return true;
  }
  OnScheduled(plan);
  size_t rows = 0;
  const BatchInput batch = BuildBatch(plan, &rows);
  std::vector<SampleRowParams> params;
  params.reserve(rows);
  for (const ScheduledChunk& chunk : plan.chunks) {
    if (!chunk.want_logits) continue;
    params.push_back(
        RowParams(requests_.at(static_cast<uint64_t>(chunk.seq_id))->request().sampling,
                  *scheduler_.Find(chunk.seq_id)));
  }
  const absl::Time launch_start = clock_->Now();
  const absl::Status status = parts_.runner->LaunchSample(batch, params);
  absl::Duration forward = clock_->Now() - launch_start;
  InFlight launched;
  if (status.ok()) {
    scheduler_.OnStepComputed(plan);
    launched.row_seqs.reserve(rows);
    for (const ScheduledChunk& chunk : plan.chunks) {
      if (!chunk.want_logits) continue;
      const Sequence& seq = *scheduler_.Find(chunk.seq_id);
      const RequestState& state = *requests_.at(static_cast<uint64_t>(chunk.seq_id));
      scheduler_.AppendPendingToken(chunk.seq_id, LastTokenAhead(seq, state));
      launched.row_seqs.push_back(chunk.seq_id);
    }
  } else {
    FailBatch(plan, status);
  }
  const bool consecutive = in_flight_.has_value();
  if (consecutive) {
    const absl::Time wait_start = clock_->Now();
    CompleteInFlight();
    forward += clock_->Now() - wait_start;
  }
  const std::optional<RunnerStepTimes> runner_times = parts_.runner->last_step_times();
  if (status.ok()) in_flight_ = std::move(launched);
  // Every request ended: what is in flight holds only dropped rows.
  if (requests_.empty() && in_flight_.has_value()) CompleteInFlight();
  ++steps_total_;
  PublishStats(generation_tokens_total_ - generated_before);
  ReportStep(plan, step_start, forward, absl::ZeroDuration(), consecutive, runner_times);
  return true;
}

void EngineImpl::CompleteInFlight() {
  const InFlight flight = std::move(*in_flight_);
  in_flight_.reset();
  std::vector<int32_t> tokens;
  absl::Status status = parts_.runner->WaitSample(&tokens);
  if (status.ok() && tokens.size() != flight.row_seqs.size()) {
    status = absl::InternalError(absl::StrCat("runner ", parts_.runner->name(), " returned ",
                                              tokens.size(), " tokens for ", flight.row_seqs.size(),
                                              " rows"));
  }
  if (!status.ok()) {
    Log(LogLevel::kError, "engine", "runner %s failed a launched step of %d rows: %s",
        parts_.runner->name(), flight.row_seqs.size(), status.ToString());
  }
  const absl::Time now = clock_->Now();
  for (size_t row = 0; row < flight.row_seqs.size(); ++row) {
    const int64_t seq_id = flight.row_seqs[row];
    auto it = requests_.find(static_cast<uint64_t>(seq_id));
    if (it == requests_.end()) continue;  // ended while in flight: the row is dropped
    RequestState& state = *it->second;
    if (!status.ok()) {
      FinishRequest(state.id(), state.Finish(FinishReason::kError, status));
      continue;
    }
    scheduler_.ResolvePendingToken(seq_id, tokens[row]);
    StreamToken(state, SampleResult{.token_id = tokens[row]},
                scheduler_.Find(seq_id)->num_resolved(), now);
  }
}

}  // namespace onecard::engine
