// ValidateRequest (see request_validation.h).
// Tested by tests/engine/runtime/request_validation_test.cc.
#include "engine/runtime/request_validation.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"

namespace onecard::engine {
namespace {

absl::Status Invalid(const std::string& field, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
}

// NaN fails every range check below because comparisons with it are false.
bool InRange(float x, float lo, float hi) { return x >= lo && x <= hi; }

absl::Status ValidateTokens(const GenerationRequest& r, int64_t vocab_size, int32_t max_context) {
  if (r.prompt_token_ids.empty()) return Invalid("prompt_token_ids", "empty");
  for (size_t i = 0; i < r.prompt_token_ids.size(); ++i) {
    const int32_t id = r.prompt_token_ids[i];
    if (id < 0 || id >= vocab_size) {
      return Invalid(absl::StrCat("prompt_token_ids[", i, "]"),
                     absl::StrCat(id, " is outside the vocabulary [0, ", vocab_size, ")"));
    }
  }
  const int64_t prompt = static_cast<int64_t>(r.prompt_token_ids.size());
  if (prompt >= max_context) {
    return Invalid("prompt_token_ids",
                   absl::StrCat(prompt, " tokens ", prompt > max_context ? "exceed" : "fill",
                                " the context of ", max_context, ", leaving no room to generate"));
  }
  if (r.stopping.max_tokens < 1) {
    return Invalid("stopping.max_tokens", absl::StrCat(r.stopping.max_tokens, " < 1"));
  }
  if (prompt + r.stopping.max_tokens > max_context) {
    return Invalid("stopping.max_tokens",
                   absl::StrCat(prompt, " prompt tokens + max_tokens ", r.stopping.max_tokens,
                                " exceed the context of ", max_context));
  }
  return absl::OkStatus();
}

absl::Status ValidateStopping(const StoppingCriteria& s, int64_t vocab_size) {
  for (size_t i = 0; i < s.stop_strings.size(); ++i) {
    if (s.stop_strings[i].empty()) {
      return Invalid(absl::StrCat("stopping.stop_strings[", i, "]"), "empty");
    }
  }
  for (size_t i = 0; i < s.stop_token_ids.size(); ++i) {
    const int32_t id = s.stop_token_ids[i];
    if (id < 0 || id >= vocab_size) {
      return Invalid(absl::StrCat("stopping.stop_token_ids[", i, "]"),
                     absl::StrCat(id, " is outside the vocabulary [0, ", vocab_size, ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateSampling(const SamplingParams& s) {
  if (!(s.temperature >= 0) || std::isinf(s.temperature)) {
    return Invalid("sampling.temperature", absl::StrCat(s.temperature, " is not >= 0"));
  }
  if (!(s.top_p > 0 && s.top_p <= 1)) {
    return Invalid("sampling.top_p", absl::StrCat(s.top_p, " is outside (0, 1]"));
  }
  if (!InRange(s.min_p, 0, 1)) {
    return Invalid("sampling.min_p", absl::StrCat(s.min_p, " is outside [0, 1]"));
  }
  if (s.top_k < 0) return Invalid("sampling.top_k", absl::StrCat(s.top_k, " < 0"));
  if (!(s.repetition_penalty > 0) || std::isinf(s.repetition_penalty)) {
    return Invalid("sampling.repetition_penalty",
                   absl::StrCat(s.repetition_penalty, " is not > 0"));
  }
  if (!InRange(s.presence_penalty, -2, 2)) {
    return Invalid("sampling.presence_penalty",
                   absl::StrCat(s.presence_penalty, " is outside [-2, 2]"));
  }
  if (!InRange(s.frequency_penalty, -2, 2)) {
    return Invalid("sampling.frequency_penalty",
                   absl::StrCat(s.frequency_penalty, " is outside [-2, 2]"));
  }
  return absl::OkStatus();
}

absl::Status ValidateRequest(const GenerationRequest& request, int64_t vocab_size,
                             int32_t max_context) {
  RETURN_IF_ERROR(ValidateTokens(request, vocab_size, max_context));
  RETURN_IF_ERROR(ValidateSampling(request.sampling));
  RETURN_IF_ERROR(ValidateStopping(request.stopping, vocab_size));
  if (request.top_logprobs < 0 || request.top_logprobs > 20) {
    return Invalid("top_logprobs", absl::StrCat(request.top_logprobs, " is outside 0..20"));
  }
  return absl::OkStatus();
}

}  // namespace onecard::engine
