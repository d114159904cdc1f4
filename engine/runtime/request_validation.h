// The one check of a generation request's fields, with its bounds and
// defaults. The router calls it (router/request_prep.h) for both of its APIs
// before it queues a request, against the context its workers serve;
// Engine::Submit calls it for every caller (the worker's Generate, the CLI,
// benchmarks), and for a request the router passed it cannot fail, the
// limits being the same. Other layers convert requests
// (services/common/request_convert.h); they do not check them.
// generation.proto writes these bounds beside its fields and cites this file.
//
// Every failure is InvalidArgument whose message starts with the field's path
// in generation.proto ("sampling.top_p: ...", "stopping.max_tokens: ...");
// the prompt is named by the caller (the input field it came from).
// Tested by tests/engine/runtime/request_validation_test.cc.
#ifndef ONECARD_ENGINE_RUNTIME_REQUEST_VALIDATION_H_
#define ONECARD_ENGINE_RUNTIME_REQUEST_VALIDATION_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "engine/runtime/engine.h"

namespace onecard::engine {

// Bounds (inclusive unless said). Defaults are SamplingParams' and
// StoppingCriteria's initializers (engine.h), and kDefaultMaxTokens.
inline constexpr float kMaxTemperature = 100.0f;        // [0, 100]; 0 = greedy
inline constexpr float kMaxRepetitionPenalty = 100.0f;  // (0, 100]; 1 = off
inline constexpr float kMaxPenalty = 2.0f;              // presence, frequency: [-2, 2]
inline constexpr int32_t kMaxTopLogprobs = 20;          // [0, 20], needs logprobs
inline constexpr int32_t kDefaultMaxTokens = 256;       // unless the server sets another

// What the server serving a request allows.
struct RequestLimits {
  int32_t max_context = 0;  // prompt + generated tokens
  int64_t vocab_size = 0;
  int32_t default_max_tokens = kDefaultMaxTokens;  // for requests that set none
};

// max_tokens of a request that sets none: the default, capped at what a
// prompt of `prompt_tokens` leaves of the context (at least 1, so a prompt
// that fills the context is refused by ValidateRequest naming the prompt).
int32_t DefaultMaxTokens(int64_t prompt_tokens, const RequestLimits& limits);

// Checks every field of `request` against `limits`: the prompt (`prompt_field`
// in errors) is non-empty, inside the vocabulary and shorter than the context;
// 1 <= max_tokens and prompt + max_tokens <= context; 0 <= min_tokens <=
// max_tokens; sampling within the bounds above; stop strings non-empty; stop
// token ids inside the vocabulary; top_logprobs within bounds and only with
// logprobs.
absl::Status ValidateRequest(const GenerationRequest& request, const RequestLimits& limits,
                             absl::string_view prompt_field = "prompt");

// The sampling parameters alone, within the bounds above (the CLI checks its
// flags with it before it loads a model).
absl::Status ValidateSampling(const SamplingParams& sampling);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_RUNTIME_REQUEST_VALIDATION_H_
