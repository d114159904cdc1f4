// Requests between the wire (onecard.v1 GenerateRequest, WorkerGenerateRequest,
// TokenizeRequest) and the engine (engine::GenerationRequest), shared by the
// router and the worker. These functions convert; the range checks of every
// field are engine::ValidateRequest's (engine/runtime/request_validation.h),
// which the router's RequestPreparer and Engine::Submit call. What fails here
// is what has no engine form: an unknown model (NOT_FOUND), a request over
// the byte limit, a priority outside the enum, an input that is not set or
// does not encode (INVALID_ARGUMENT naming the field).
// Tested by tests/services/common/request_convert_test.cc.
#ifndef ONECARD_SERVICES_COMMON_REQUEST_CONVERT_H_
#define ONECARD_SERVICES_COMMON_REQUEST_CONVERT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/runtime/engine.h"
#include "engine/runtime/request_validation.h"
#include "engine/tokenizer/tokenizer.h"
#include "google/protobuf/message.h"
#include "onecard/v1/generation.pb.h"
#include "onecard/v1/worker.pb.h"

namespace onecard::services {

// Engine priority of a class: interactive 2, standard (and unset) 1, batch 0.
int32_t EnginePriority(v1::Priority priority);
// The class of an engine priority, the inverse of EnginePriority: 2 and
// above interactive, 1 standard, 0 and below batch.
v1::Priority ProtoPriority(int32_t engine_priority);

// NOT_FOUND naming `model` unless it is empty or `served`.
absl::Status CheckModel(const std::string& model, const std::string& served);

// INVALID_ARGUMENT naming the largest field when `request` encodes to more
// than `max_bytes`.
absl::Status CheckRequestSize(const google::protobuf::Message& request, int64_t max_bytes);
// The set field of `message` with the largest encoded size; "" when none is.
std::string LargestField(const google::protobuf::Message& message);

// A request's prompt as token ids, and the field it came from ("prompt",
// "messages", "token_ids.ids"), for errors.
struct PromptIds {
  std::vector<int32_t> ids;
  std::string field;
};

// A prompt is encoded with the model's special tokens, messages are rendered
// by `chat_template` (null: the model has none, and messages are refused),
// ids are taken as they are.
absl::StatusOr<PromptIds> EncodeInput(const v1::GenerateRequest& request,
                                      const engine::Tokenizer& tokenizer,
                                      const engine::ChatTemplate* chat_template);
absl::StatusOr<PromptIds> EncodeInput(const v1::TokenizeRequest& request,
                                      const engine::Tokenizer& tokenizer,
                                      const engine::ChatTemplate* chat_template);

// The engine request of the fields both request messages share: unset
// optional fields take their defaults (temperature, top_p and
// repetition_penalty 1; a random seed; max_tokens from DefaultMaxTokens).
absl::StatusOr<engine::GenerationRequest> ToEngineRequest(const v1::GenerateRequest& request,
                                                          std::vector<int32_t> prompt_ids,
                                                          const engine::RequestLimits& limits);
absl::StatusOr<engine::GenerationRequest> ToEngineRequest(const v1::WorkerGenerateRequest& request,
                                                          const engine::RequestLimits& limits);

// What the router sends a worker for a converted request: every field
// explicit (defaults resolved, seed drawn), the model's name.
v1::WorkerGenerateRequest ToWorkerRequest(const engine::GenerationRequest& request,
                                          const std::string& model);

}  // namespace onecard::services

#endif  // ONECARD_SERVICES_COMMON_REQUEST_CONVERT_H_
