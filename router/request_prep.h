// RequestPreparer: turns a public GenerateRequest (from the gRPC API, or the
// HTTP API's OpenAI request converted by router/openai_request.h) into what
// the router queues and sends to a worker: the byte limit, the model, the
// prompt's tokens (tokenization and the chat template, done once, here), the
// engine request with its defaults (services/common/request_convert.h), the
// field checks of engine::ValidateRequest against the context the workers
// serve, the tenant's priority, and the token cost reserved by the rate
// limiter. Every error names the field.
//
// Context: the workers' ModelInfo.context_length, the smallest of those the
// router knows (SetServedContext, from the worker table), so that the router
// and every worker agree on what fits; the model file's until a worker is
// known.
//
// Priority: PRIORITY_UNSPECIFIED means standard, lowered to the tenant's
// maximum when that is batch; an explicit class above the tenant's maximum is
// PERMISSION_DENIED naming `priority`.
// Tested by tests/router/request_prep_test.cc with the real SmolLM2 tokenizer.
#ifndef ONECARD_ROUTER_REQUEST_PREP_H_
#define ONECARD_ROUTER_REQUEST_PREP_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/runtime/request_validation.h"
#include "engine/tokenizer/tokenizer.h"
#include "onecard/v1/generation.pb.h"
#include "onecard/v1/worker.pb.h"
#include "router/api_keys.h"
#include "router/request_queue.h"

namespace onecard::router {

struct ModelSpec {
  std::string name;            // the name clients use in `model`
  std::string architecture;    // "llama", "qwen2", "mistral"
  int32_t context_length = 0;  // prompt + generated tokens
  int32_t vocab_size = 0;
  int32_t eos_token_id = -1;
};

struct PrepOptions {
  int32_t default_max_tokens = engine::kDefaultMaxTokens;  // when the request sets none
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

  // INVALID_ARGUMENT naming the field, NOT_FOUND for an unknown `model`, or
  // PERMISSION_DENIED for `priority`. Thread-safe.
  absl::StatusOr<PreparedRequest> Prepare(const onecard::v1::GenerateRequest& request,
                                          const Tenant& tenant) const;
  absl::StatusOr<onecard::v1::TokenizeResponse> Tokenize(
      const onecard::v1::TokenizeRequest& request) const;
  onecard::v1::ListModelsResponse ListModels() const;
  // The model, with the context the workers serve.
  ModelSpec model() const;
  // The context the workers serve (the smallest of their ModelInfos); 0:
  // none is known, and the model file's applies.
  void SetServedContext(int32_t context_length);
  const engine::Tokenizer& tokenizer() const { return *tokenizer_; }

 private:
  engine::RequestLimits Limits() const;
  // The tenant's max_prompt_tokens and max_tokens (INVALID_ARGUMENT naming
  // the field: `prompt_field` for the prompt; 0: no limit but the model's
  // context).
  static absl::Status CheckTenantLimits(const onecard::v1::GenerateRequest& request,
                                        const Tenant& tenant, int64_t prompt_tokens,
                                        absl::string_view prompt_field);

  const engine::Tokenizer* tokenizer_;
  engine::ChatTemplate chat_template_;
  ModelSpec model_;
  PrepOptions options_;
  std::atomic<int32_t> served_context_{0};
};

}  // namespace onecard::router

#endif  // ONECARD_ROUTER_REQUEST_PREP_H_
