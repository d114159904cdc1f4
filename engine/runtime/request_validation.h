// ValidateRequest: the checks Engine::Submit makes before accepting a
// request. Each failure is InvalidArgument naming the field.
// Tested by tests/engine/runtime/request_validation_test.cc.
#ifndef ONECARD_ENGINE_RUNTIME_REQUEST_VALIDATION_H_
#define ONECARD_ENGINE_RUNTIME_REQUEST_VALIDATION_H_

#include <cstdint>

#include "absl/status/status.h"
#include "engine/runtime/engine.h"

namespace onecard::engine {

// The sampling parameters alone (the CLI checks its flags with it before it
// loads a model).
absl::Status ValidateSampling(const SamplingParams& sampling);

// vocab_size: the model's; max_context: the engine's (model and KV pool).
absl::Status ValidateRequest(const GenerationRequest& request, int64_t vocab_size,
                             int32_t max_context);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_RUNTIME_REQUEST_VALIDATION_H_
