// RequestPreparer (see request_prep.h). Tested by
// tests/router/request_prep_test.cc.
#include "router/request_prep.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "services/common/request_convert.h"

namespace onecard::router {
using onecard::v1::GenerateRequest;

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

RequestPreparer::RequestPreparer(const engine::Tokenizer* tokenizer,
                                 engine::ChatTemplate chat_template, ModelSpec model,
                                 PrepOptions options)
    : tokenizer_(tokenizer),
      chat_template_(std::move(chat_template)),
      model_(std::move(model)),
      options_(options) {}

ModelSpec RequestPreparer::model() const {
  ModelSpec spec = model_;
  if (const int32_t served = served_context_.load(); served > 0) spec.context_length = served;
  return spec;
}

void RequestPreparer::SetServedContext(int32_t context_length) {
  served_context_.store(context_length);
}

engine::RequestLimits RequestPreparer::Limits() const {
  return {.max_context = model().context_length,
          .vocab_size = model_.vocab_size,
          .default_max_tokens = options_.default_max_tokens};
}

absl::Status RequestPreparer::CheckTenantLimits(const GenerateRequest& request,
                                                const Tenant& tenant, int64_t prompt_tokens,
                                                absl::string_view prompt_field) {
  if (tenant.max_prompt_tokens > 0 && prompt_tokens > tenant.max_prompt_tokens) {
    return absl::InvalidArgumentError(
        absl::StrCat(prompt_field, ": ", prompt_tokens, " tokens exceed tenant '", tenant.name,
                     "''s max_prompt_tokens of ", tenant.max_prompt_tokens));
  }
  if (tenant.max_tokens > 0 && request.stopping().has_max_tokens() &&
      request.stopping().max_tokens() > tenant.max_tokens) {
    return absl::InvalidArgumentError(
        absl::StrCat("stopping.max_tokens: ", request.stopping().max_tokens(), " exceeds tenant '",
                     tenant.name, "''s max_tokens of ", tenant.max_tokens));
  }
  return absl::OkStatus();
}

absl::StatusOr<PreparedRequest> RequestPreparer::Prepare(const GenerateRequest& request,
                                                         const Tenant& tenant) const {
  RETURN_IF_ERROR(services::CheckRequestSize(request, options_.max_request_bytes));
  RETURN_IF_ERROR(services::CheckModel(request.model(), model_.name));
  ASSIGN_OR_RETURN(services::PromptIds prompt,
                   services::EncodeInput(request, *tokenizer_, &chat_template_));
  RETURN_IF_ERROR(
      CheckTenantLimits(request, tenant, static_cast<int64_t>(prompt.ids.size()), prompt.field));
  engine::RequestLimits limits = Limits();
  if (tenant.max_tokens > 0) {  // a request without max_tokens gets at most the tenant's
    limits.default_max_tokens = std::min(limits.default_max_tokens, tenant.max_tokens);
  }
  ASSIGN_OR_RETURN(engine::GenerationRequest converted,
                   services::ToEngineRequest(request, std::move(prompt.ids), limits));
  RETURN_IF_ERROR(engine::ValidateRequest(converted, limits, prompt.field));
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
  out.prompt_tokens = static_cast<int64_t>(converted.prompt_token_ids.size());
  out.max_tokens = converted.stopping.max_tokens;
  out.worker_request = services::ToWorkerRequest(converted, model_.name);
  out.worker_request.set_priority(ToProtoPriority(out.priority));
  return out;
}

absl::StatusOr<onecard::v1::TokenizeResponse> RequestPreparer::Tokenize(
    const onecard::v1::TokenizeRequest& request) const {
  RETURN_IF_ERROR(services::CheckRequestSize(request, options_.max_request_bytes));
  RETURN_IF_ERROR(services::CheckModel(request.model(), model_.name));
  ASSIGN_OR_RETURN(services::PromptIds prompt,
                   services::EncodeInput(request, *tokenizer_, &chat_template_));
  onecard::v1::TokenizeResponse response;
  response.mutable_token_ids()->Add(prompt.ids.begin(), prompt.ids.end());
  response.set_model(model_.name);
  return response;
}

onecard::v1::ListModelsResponse RequestPreparer::ListModels() const {
  const ModelSpec spec = model();
  onecard::v1::ListModelsResponse response;
  onecard::v1::ModelInfo* m = response.add_models();
  m->set_id(spec.name);
  m->set_architecture(spec.architecture);
  m->set_context_length(spec.context_length);
  m->set_vocab_size(spec.vocab_size);
  m->set_eos_token_id(spec.eos_token_id);
  return response;
}

}  // namespace onecard::router
