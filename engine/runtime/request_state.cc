// RequestState implementation (see request_state.h).
// Tested by tests/engine/runtime/request_state_test.cc.
#include "engine/runtime/request_state.h"

#include <algorithm>

namespace onecard::engine {

RequestState::RequestState(uint64_t id, GenerationRequest request, const Tokenizer* tokenizer,
                           absl::Time submit_time)
    : id_(id),
      request_(std::move(request)),
      tokenizer_(tokenizer),
      detokenizer_(tokenizer, /*skip_special_tokens=*/true),
      stop_matcher_(request_.stopping.stop_strings),
      submit_time_(submit_time) {
  usage_.prompt_tokens = static_cast<int32_t>(request_.prompt_token_ids.size());
  if (request_.stopping.min_tokens > 0) {
    min_tokens_mask_ = request_.stopping.stop_token_ids;
    if (!request_.stopping.ignore_eos) {
      const std::vector<int32_t>& eos = tokenizer_->stop_ids();
      min_tokens_mask_.insert(min_tokens_mask_.end(), eos.begin(), eos.end());
    }
  }
}

std::span<const int32_t> RequestState::MaskedTokenIds() const {
  if (usage_.completion_tokens >= request_.stopping.min_tokens) return {};
  return min_tokens_mask_;
}

void RequestState::OnFirstScheduled(absl::Time now, int32_t cached_tokens) {
  if (queue_time_.has_value()) return;
  queue_time_ = now - submit_time_;
  usage_.cached_tokens = cached_tokens;
}

StreamOutput RequestState::NewOutput() const {
  StreamOutput out;
  out.usage = usage_;
  out.queue_time = queue_time_.value_or(absl::ZeroDuration());
  out.time_to_first_token = time_to_first_token_.value_or(absl::ZeroDuration());
  return out;
}

bool RequestState::IsEos(int32_t token) const {
  const std::vector<int32_t>& stops = tokenizer_->stop_ids();
  return std::find(stops.begin(), stops.end(), token) != stops.end();
}

FinishReason RequestState::CheckStops(int32_t token, int32_t num_seq_tokens, int32_t max_context,
                                      std::string* text) {
  const std::vector<int32_t>& stop_ids = request_.stopping.stop_token_ids;
  FinishReason reason = FinishReason::kNone;
  // A stop or eos token ends generation; its own text is not streamed.
  if (std::find(stop_ids.begin(), stop_ids.end(), token) != stop_ids.end()) {
    reason = FinishReason::kStop;
  } else if (!request_.stopping.ignore_eos && IsEos(token)) {
    reason = FinishReason::kEos;
  } else if (stop_matcher_.Push(detokenizer_.Add(token), text)) {
    return FinishReason::kStopString;
  } else if (usage_.completion_tokens >= request_.stopping.max_tokens ||
             num_seq_tokens >= max_context) {
    reason = FinishReason::kLength;
  }
  if (reason == FinishReason::kNone) return reason;
  // Ending otherwise: release what the detokenizer and the matcher held.
  std::string tail;
  if (stop_matcher_.Push(detokenizer_.Flush(), &tail)) {
    text->append(tail);
    return reason;
  }
  text->append(tail);
  text->append(stop_matcher_.TakeHeld());
  return reason;
}

StreamOutput RequestState::OnToken(const SampleResult& sample, int32_t num_seq_tokens,
                                   int32_t max_context, absl::Time now) {
  ++usage_.completion_tokens;
  if (!time_to_first_token_.has_value()) time_to_first_token_ = now - submit_time_;
  std::string text;
  const FinishReason reason = CheckStops(sample.token_id, num_seq_tokens, max_context, &text);
  StreamOutput out = NewOutput();
  out.token_ids.push_back(sample.token_id);
  out.text_delta = std::move(text);
  if (request_.logprobs || request_.top_logprobs > 0) {
    out.logprobs.push_back(
        {.token_id = sample.token_id, .logprob = sample.logprob, .top = sample.top});
  }
  if (reason != FinishReason::kNone) {
    finished_ = true;
    out.finished = true;
    out.finish_reason = reason;
  }
  return out;
}

StreamOutput RequestState::Finish(FinishReason reason, absl::Status error) {
  finished_ = true;
  StreamOutput out = NewOutput();
  out.finished = true;
  out.finish_reason = reason;
  out.error = std::move(error);
  return out;
}

}  // namespace onecard::engine
