// Engine outputs into GenerateResponse chunks and terminal statuses. See
// response_convert.h.
#include "services/worker/response_convert.h"

#include "absl/strings/str_cat.h"
#include "services/common/proto_time.h"

namespace onecard::services {
void AppendOutput(const engine::StreamOutput& output, absl::Duration total,
                  v1::GenerateResponse* chunk) {
  chunk->mutable_token_ids()->Add(output.token_ids.begin(), output.token_ids.end());
  chunk->mutable_text()->append(output.text_delta);
  for (const engine::TokenLogprob& lp : output.logprobs) {
    v1::TokenLogprob* out = chunk->add_logprobs();
    out->set_token_id(lp.token_id);
    out->set_logprob(lp.logprob);
    for (const auto& [id, logprob] : lp.top) {
      v1::TopLogprob* top = out->add_top_logprobs();
      top->set_token_id(id);
      top->set_logprob(logprob);
    }
  }
  if (!output.finished) return;
  chunk->set_finish_reason(ToProtoFinishReason(output.finish_reason));
  v1::Usage* usage = chunk->mutable_usage();
  usage->set_prompt_tokens(output.usage.prompt_tokens);
  usage->set_completion_tokens(output.usage.completion_tokens);
  usage->set_cached_tokens(output.usage.cached_tokens);
  v1::Timing* timing = chunk->mutable_timing();
  ToProtoDuration(output.queue_time, timing->mutable_queue_time());
  ToProtoDuration(output.time_to_first_token, timing->mutable_time_to_first_token());
  ToProtoDuration(total, timing->mutable_total_time());
}

v1::FinishReason ToProtoFinishReason(engine::FinishReason reason) {
  switch (reason) {
    case engine::FinishReason::kNone:
      return v1::FINISH_REASON_UNSPECIFIED;
    case engine::FinishReason::kStop:
      return v1::FINISH_REASON_STOP;
    case engine::FinishReason::kLength:
      return v1::FINISH_REASON_LENGTH;
    case engine::FinishReason::kEos:
      return v1::FINISH_REASON_EOS;
    case engine::FinishReason::kStopString:
      return v1::FINISH_REASON_STOP_STRING;
    case engine::FinishReason::kCancelled:
      return v1::FINISH_REASON_CANCELLED;
    case engine::FinishReason::kDeadline:
      return v1::FINISH_REASON_DEADLINE;
    case engine::FinishReason::kPreempted:
      return v1::FINISH_REASON_PREEMPTED;
    case engine::FinishReason::kError:
      return v1::FINISH_REASON_ERROR;
  }
  return v1::FINISH_REASON_ERROR;
}

absl::Status TerminalStatus(const engine::StreamOutput& final_output, bool cancelled_by_client) {
  const int32_t tokens = final_output.usage.completion_tokens;
  switch (final_output.finish_reason) {
    case engine::FinishReason::kStop:
    case engine::FinishReason::kLength:
    case engine::FinishReason::kEos:
    case engine::FinishReason::kStopString:
      return absl::OkStatus();
    case engine::FinishReason::kCancelled:
      if (cancelled_by_client) return absl::CancelledError("cancelled by the client");
      return absl::UnavailableError(absl::StrCat("the worker stopped before the request finished (",
                                                 tokens, " tokens sent)"));
    case engine::FinishReason::kDeadline:
      return absl::DeadlineExceededError(
          absl::StrCat("the deadline passed after ", tokens, " tokens"));
    case engine::FinishReason::kPreempted:
      return absl::ResourceExhaustedError(
          absl::StrCat("preempted for lack of KV cache after ", tokens, " tokens"));
    case engine::FinishReason::kError:
    case engine::FinishReason::kNone:
      break;
  }
  if (!final_output.error.ok()) return final_output.error;
  return absl::InternalError("the engine ended the request without a reason");
}

std::string OutcomeLabel(engine::FinishReason reason) {
  switch (reason) {
    case engine::FinishReason::kStop:
      return "stop";
    case engine::FinishReason::kLength:
      return "length";
    case engine::FinishReason::kEos:
      return "eos";
    case engine::FinishReason::kStopString:
      return "stop_string";
    case engine::FinishReason::kCancelled:
      return "cancelled";
    case engine::FinishReason::kDeadline:
      return "deadline";
    case engine::FinishReason::kPreempted:
      return "preempted";
    case engine::FinishReason::kError:
    case engine::FinishReason::kNone:
      break;
  }
  return "error";
}

std::string RejectionLabel(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kInvalidArgument:
      return "invalid_argument";
    case absl::StatusCode::kResourceExhausted:
      return "resource_exhausted";
    case absl::StatusCode::kUnavailable:
      return "unavailable";
    case absl::StatusCode::kUnauthenticated:
      return "unauthenticated";
    case absl::StatusCode::kPermissionDenied:
      return "permission_denied";
    default:
      return "error";
  }
}

}  // namespace onecard::services
