// RequestPreparer (see request_prep.h). Tested by
// tests/router/request_prep_test.cc.
#include "router/request_prep.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"

namespace onecard::router {
namespace {

using onecard::v1::GenerateRequest;

absl::Status Invalid(absl::string_view field, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", problem));
}

bool InRange(float v, float lo, float hi) { return !std::isnan(v) && v >= lo && v <= hi; }

}  // namespace

PriorityClass FromProtoPriority(onecard::v1::Priority priority) {
  switch (priority) {
    case onecard::v1::PRIORITY_INTERACTIVE:
      return PriorityClass::kInteractive;
    case onecard::v1::PRIORITY_BATCH:
      return PriorityClass::kBatch;
    default:
      return PriorityClass::kStandard;
  }
}

onecard::v1::Priority ToProtoPriority(PriorityClass priority) {
  switch (priority) {
    case PriorityClass::kInteractive:
      return onecard::v1::PRIORITY_INTERACTIVE;
    case PriorityClass::kBatch:
      return onecard::v1::PRIORITY_BATCH;
    case PriorityClass::kStandard:
      break;
  }
  return onecard::v1::PRIORITY_STANDARD;
}

absl::Status ValidateSampling(const GenerateRequest& request) {
  const onecard::v1::SamplingParams& s = request.sampling();
  if (s.has_temperature() && !InRange(s.temperature(), 0, 1e6)) {
    return Invalid("sampling.temperature", "must be >= 0");
  }
  if (s.top_k() < 0) return Invalid("sampling.top_k", "must be >= 0 (0 = off)");
  if (s.has_top_p() && !(InRange(s.top_p(), 0, 1) && s.top_p() > 0)) {
    return Invalid("sampling.top_p", "must be in (0, 1]");
  }
  if (!InRange(s.min_p(), 0, 1)) return Invalid("sampling.min_p", "must be in [0, 1]");
  if (s.has_repetition_penalty() &&
      !(InRange(s.repetition_penalty(), 0, 1e6) && s.repetition_penalty() > 0)) {
    return Invalid("sampling.repetition_penalty", "must be > 0");
  }
  if (!InRange(s.presence_penalty(), -2, 2)) {
    return Invalid("sampling.presence_penalty", "must be in [-2, 2]");
  }
  if (!InRange(s.frequency_penalty(), -2, 2)) {
    return Invalid("sampling.frequency_penalty", "must be in [-2, 2]");
  }
  if (request.top_logprobs() < 0 || request.top_logprobs() > 20) {
    return Invalid("top_logprobs", "must be in [0, 20]");
  }
  if (request.top_logprobs() > 0 && !request.logprobs()) {
    return Invalid("top_logprobs", "needs logprobs: true");
  }
  return absl::OkStatus();
}

RequestPreparer::RequestPreparer(const engine::Tokenizer* tokenizer,
                                 engine::ChatTemplate chat_template, ModelSpec model,
                                 PrepOptions options)
    : tokenizer_(tokenizer),
      chat_template_(std::move(chat_template)),
      model_(std::move(model)),
      options_(options) {}

absl::Status RequestPreparer::CheckModel(const std::string& model) const {
  if (model.empty() || model == model_.name) return absl::OkStatus();
  return Invalid("model",
                 absl::StrCat("unknown model '", model, "' (served: '", model_.name, "')"));
}

absl::StatusOr<std::vector<int32_t>> RequestPreparer::ChatTokens(
    const onecard::v1::ChatMessages& messages) const {
  std::vector<engine::ChatMessage> chat;
  for (const onecard::v1::ChatMessage& m : messages.messages()) {
    chat.push_back(engine::ChatMessage{m.role(), m.content()});
  }
  ASSIGN_OR_RETURN(std::string text, chat_template_.Render(chat, true));
  return tokenizer_->Encode(text, /*add_special_tokens=*/false);
}

absl::StatusOr<std::vector<int32_t>> RequestPreparer::PromptTokens(
    const GenerateRequest& request) const {
  switch (request.input_case()) {
    case GenerateRequest::kPrompt:
      if (request.prompt().empty()) return Invalid("prompt", "empty");
      return tokenizer_->Encode(request.prompt(), /*add_special_tokens=*/true);
    case GenerateRequest::kMessages:
      return ChatTokens(request.messages());
    case GenerateRequest::kTokenIds: {
      const auto& ids = request.token_ids().ids();
      if (ids.empty()) return Invalid("token_ids.ids", "empty");
      for (int i = 0; i < ids.size(); ++i) {
        if (ids[i] < 0 || ids[i] >= model_.vocab_size) {
          return Invalid(
              absl::StrCat("token_ids.ids[", i, "]"),
              absl::StrCat("id ", ids[i], " outside the vocabulary [0, ", model_.vocab_size, ")"));
        }
      }
      return std::vector<int32_t>(ids.begin(), ids.end());
    }
    case GenerateRequest::INPUT_NOT_SET:
      break;
  }
  return Invalid("input", "set one of prompt, messages, token_ids");
}

absl::Status RequestPreparer::CheckTenantLimits(const GenerateRequest& request,
                                                const Tenant& tenant, int64_t prompt_tokens) const {
  if (tenant.max_prompt_tokens > 0 && prompt_tokens > tenant.max_prompt_tokens) {
    const char* field = request.input_case() == GenerateRequest::kMessages   ? "messages"
                        : request.input_case() == GenerateRequest::kTokenIds ? "token_ids.ids"
                                                                             : "prompt";
    return Invalid(field, absl::StrCat(prompt_tokens, " tokens exceed tenant '", tenant.name,
                                       "''s max_prompt_tokens of ", tenant.max_prompt_tokens));
  }
  if (tenant.max_tokens > 0 && request.stopping().has_max_tokens() &&
      request.stopping().max_tokens() > tenant.max_tokens) {
    return Invalid("stopping.max_tokens",
                   absl::StrCat(request.stopping().max_tokens(), " exceeds tenant '", tenant.name,
                                "''s max_tokens of ", tenant.max_tokens));
  }
  return absl::OkStatus();
}

absl::StatusOr<int32_t> RequestPreparer::MaxTokens(const onecard::v1::StoppingCriteria& stopping,
                                                   int64_t prompt_tokens) const {
  const int64_t room = model_.context_length - prompt_tokens;
  if (room < 1) {
    return Invalid("prompt", absl::StrCat(prompt_tokens,
                                          " tokens leave no room in the model's "
                                          "context of ",
                                          model_.context_length, " tokens"));
  }
  if (!stopping.has_max_tokens()) {
    return static_cast<int32_t>(std::min<int64_t>(options_.default_max_tokens, room));
  }
  if (stopping.max_tokens() < 1) return Invalid("stopping.max_tokens", "must be >= 1");
  if (stopping.max_tokens() > room) {
    return Invalid(
        "stopping.max_tokens",
        absl::StrCat(stopping.max_tokens(), " after a prompt of ", prompt_tokens,
                     " tokens exceeds the model's context of ", model_.context_length, " tokens"));
  }
  return stopping.max_tokens();
}

absl::Status RequestPreparer::CheckStopping(const onecard::v1::StoppingCriteria& stopping) const {
  for (int i = 0; i < stopping.stop_strings_size(); ++i) {
    if (stopping.stop_strings(i).empty()) {
      return Invalid(absl::StrCat("stopping.stop_strings[", i, "]"), "empty");
    }
  }
  for (int i = 0; i < stopping.stop_token_ids_size(); ++i) {
    int32_t id = stopping.stop_token_ids(i);
    if (id < 0 || id >= model_.vocab_size) {
      return Invalid(
          absl::StrCat("stopping.stop_token_ids[", i, "]"),
          absl::StrCat("id ", id, " outside the vocabulary [0, ", model_.vocab_size, ")"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<PreparedRequest> RequestPreparer::Prepare(const GenerateRequest& request,
                                                         const Tenant& tenant) const {
  if (static_cast<int64_t>(request.ByteSizeLong()) > options_.max_request_bytes) {
    return Invalid("request", absl::StrCat(request.ByteSizeLong(), " bytes exceed the limit of ",
                                           options_.max_request_bytes));
  }
  RETURN_IF_ERROR(CheckModel(request.model()));
  PreparedRequest out;
  out.priority = FromProtoPriority(request.priority());
  if (request.priority() == onecard::v1::PRIORITY_UNSPECIFIED) {
    out.priority = std::max(out.priority, tenant.max_priority);  // larger = less urgent
  } else if (out.priority < tenant.max_priority) {
    return absl::PermissionDeniedError(
        absl::StrCat("priority: ", onecard::v1::Priority_Name(request.priority()),
                     " is above tenant '", tenant.name, "''s maximum ",
                     onecard::v1::Priority_Name(ToProtoPriority(tenant.max_priority))));
  }
  RETURN_IF_ERROR(ValidateSampling(request));
  RETURN_IF_ERROR(CheckStopping(request.stopping()));
  ASSIGN_OR_RETURN(std::vector<int32_t> tokens, PromptTokens(request));
  if (tokens.empty()) return Invalid("input", "encodes to no tokens");
  RETURN_IF_ERROR(CheckTenantLimits(request, tenant, static_cast<int64_t>(tokens.size())));
  ASSIGN_OR_RETURN(int32_t max_tokens, MaxTokens(request.stopping(), tokens.size()));
  if (tenant.max_tokens > 0) max_tokens = std::min(max_tokens, tenant.max_tokens);

  onecard::v1::WorkerGenerateRequest& w = out.worker_request;
  w.set_request_id(request.request_id());
  w.set_model(model_.name);
  w.mutable_prompt_token_ids()->Add(tokens.begin(), tokens.end());
  *w.mutable_sampling() = request.sampling();
  *w.mutable_stopping() = request.stopping();
  w.mutable_stopping()->set_max_tokens(max_tokens);
  w.set_priority(ToProtoPriority(out.priority));
  w.set_logprobs(request.logprobs());
  w.set_top_logprobs(request.top_logprobs());
  out.prompt_tokens = static_cast<int64_t>(tokens.size());
  out.max_tokens = max_tokens;
  return out;
}

absl::StatusOr<onecard::v1::TokenizeResponse> RequestPreparer::Tokenize(
    const onecard::v1::TokenizeRequest& request) const {
  RETURN_IF_ERROR(CheckModel(request.model()));
  std::vector<int32_t> tokens;
  switch (request.input_case()) {
    case onecard::v1::TokenizeRequest::kPrompt:
      tokens = tokenizer_->Encode(request.prompt(), /*add_special_tokens=*/true);
      break;
    case onecard::v1::TokenizeRequest::kMessages: {
      ASSIGN_OR_RETURN(tokens, ChatTokens(request.messages()));
      break;
    }
    case onecard::v1::TokenizeRequest::INPUT_NOT_SET:
      return Invalid("input", "set one of prompt, messages");
  }
  onecard::v1::TokenizeResponse response;
  response.mutable_token_ids()->Add(tokens.begin(), tokens.end());
  response.set_model(model_.name);
  return response;
}

onecard::v1::ListModelsResponse RequestPreparer::ListModels() const {
  onecard::v1::ListModelsResponse response;
  onecard::v1::ModelInfo* m = response.add_models();
  m->set_id(model_.name);
  m->set_architecture(model_.architecture);
  m->set_context_length(model_.context_length);
  m->set_vocab_size(model_.vocab_size);
  m->set_eos_token_id(model_.eos_token_id);
  return response;
}

}  // namespace onecard::router
