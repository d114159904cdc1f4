// RequestPreparer: turns a public GenerateRequest into what the router queues
// and sends to a worker: validation (every error names the field), the
// tenant's priority, tokenization and the chat template (done once, here),
// the max_tokens default, and the token cost reserved by the rate limiter.
//
// Priority: PRIORITY_UNSPECIFIED means standard, lowered to the tenant's
// maximum when that is batch; an explicit class above the tenant's maximum is
// PERMISSION_DENIED naming `priority`.
// Tested by tests/router/request_prep_test.cc with the real SmolLM2 tokenizer.
#ifndef ONECARD_ROUTER_REQUEST_PREP_H_
#define ONECARD_ROUTER_REQUEST_PREP_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/tokenizer/tokenizer.h"
#include "onecard/v1/generation.pb.h"
#include "onecard/v1/worker.pb.h"
#include "router/api_keys.h"
#include "router/request_queue.h"

namespace onecard::router {

struct ModelSpec {
  std::string name;          // the name clients use in `model`
  std::string architecture;  // "llama", "qwen2", "mistral"
  int32_t context_length = 0;
  int32_t vocab_size = 0;
  int32_t eos_token_id = -1;
};

struct PrepOptions {
  int32_t default_max_tokens = 256;  // when the request sets none
  int64_t max_request_bytes = 4 << 20;
};

struct PreparedRequest {
  onecard::v1::WorkerGenerateRequest worker_request;
  PriorityClass priority = PriorityClass::kStandard;
  int64_t prompt_tokens = 0;
  int64_t max_tokens = 0;
  int64_t cost_tokens() const { return prompt_tokens + max_tokens; }
};

PriorityClass FromProtoPriority(onecard::v1::Priority priority);  // unspecified -> standard
onecard::v1::Priority ToProtoPriority(PriorityClass priority);

class RequestPreparer {
 public:
  // `tokenizer` must outlive the preparer.
  RequestPreparer(const engine::Tokenizer* tokenizer, engine::ChatTemplate chat_template,
                  ModelSpec model, PrepOptions options);

  // INVALID_ARGUMENT naming the field, or PERMISSION_DENIED for `priority`.
  absl::StatusOr<PreparedRequest> Prepare(const onecard::v1::GenerateRequest& request,
                                          const Tenant& tenant) const;
  absl::StatusOr<onecard::v1::TokenizeResponse> Tokenize(
      const onecard::v1::TokenizeRequest& request) const;
  onecard::v1::ListModelsResponse ListModels() const;
  const ModelSpec& model() const { return model_; }

 private:
  absl::Status CheckModel(const std::string& model) const;
  absl::StatusOr<std::vector<int32_t>> PromptTokens(
      const onecard::v1::GenerateRequest& request) const;
  absl::StatusOr<std::vector<int32_t>> ChatTokens(const onecard::v1::ChatMessages& messages) const;
  absl::StatusOr<int32_t> MaxTokens(const onecard::v1::StoppingCriteria& stopping,
                                    int64_t prompt_tokens) const;
  // The tenant's max_prompt_tokens and max_tokens (INVALID_ARGUMENT naming
  // the field; 0: no limit but the model's context).
  absl::Status CheckTenantLimits(const onecard::v1::GenerateRequest& request, const Tenant& tenant,
                                 int64_t prompt_tokens) const;
  absl::Status CheckStopping(const onecard::v1::StoppingCriteria& stopping) const;

  const engine::Tokenizer* tokenizer_;
  engine::ChatTemplate chat_template_;
  ModelSpec model_;
  PrepOptions options_;
};

// Range checks of SamplingParams and the logprob fields (shared with tests).
absl::Status ValidateSampling(const onecard::v1::GenerateRequest& request);

}  // namespace onecard::router

#endif  // ONECARD_ROUTER_REQUEST_PREP_H_
