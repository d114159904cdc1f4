// Requests in: onecard.v1 GenerateRequest (public, text or ids) and
// WorkerGenerateRequest (router -> worker, ids) validated and turned into an
// engine::GenerationRequest. Every refusal is InvalidArgument whose message
// starts with the field's path in the proto ("sampling.top_p: ...",
// "token_ids.ids[3]: ...", "stopping.max_tokens: ..."), so clients and the
// router can tell which field was wrong.
// Tested by tests/services/worker/request_convert_test.cc.
#ifndef ONECARD_SERVICES_WORKER_REQUEST_CONVERT_H_
#define ONECARD_SERVICES_WORKER_REQUEST_CONVERT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/runtime/engine.h"
#include "engine/tokenizer/tokenizer.h"
#include "google/protobuf/message.h"
#include "onecard/v1/generation.pb.h"
#include "onecard/v1/worker.pb.h"

namespace onecard::services {

// What the worker serves, and its per-request limits.
struct RequestLimits {
  std::string model_name;
  int32_t max_context = 0;  // prompt + generated tokens
  int32_t vocab_size = 0;
  int32_t default_max_tokens = 256;  // when stopping.max_tokens is unset
  int64_t max_request_bytes = 4 << 20;
};

// Engine priority of a class: interactive 2, standard (and unset) 1, batch 0.
int32_t EnginePriority(v1::Priority priority);
// The class of an engine priority, the inverse of EnginePriority: 2 and
// above interactive, 1 standard, 0 and below batch.
v1::Priority ProtoPriority(int32_t engine_priority);

// Router -> worker requests (token ids already made by the router).
absl::StatusOr<engine::GenerationRequest> FromWorkerRequest(
    const v1::WorkerGenerateRequest& request, const RequestLimits& limits);

// Public requests: a prompt is encoded with the model's special tokens,
// messages are rendered with its chat template, ids are taken as they are.
absl::StatusOr<engine::GenerationRequest> FromGenerateRequest(const v1::GenerateRequest& request,
                                                              const RequestLimits& limits,
                                                              const engine::Tokenizer& tokenizer);

// The token ids of a Tokenize request (prompt or messages).
absl::StatusOr<std::vector<int32_t>> TokenizeInput(const v1::TokenizeRequest& request,
                                                   const RequestLimits& limits,
                                                   const engine::Tokenizer& tokenizer);

// The set field of `message` with the largest encoded size (for "request too
// large" errors); "" when none is set.
std::string LargestField(const google::protobuf::Message& message);

}  // namespace onecard::services

#endif  // ONECARD_SERVICES_WORKER_REQUEST_CONVERT_H_
