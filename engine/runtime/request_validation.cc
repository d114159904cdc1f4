// ValidateRequest and DefaultMaxTokens (see request_validation.h).
// Tested by tests/engine/runtime/request_validation_test.cc.
#include "engine/runtime/request_validation.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"

namespace onecard::engine {
namespace {

absl::Status Invalid(absl::string_view field, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
}

// NaN fails: comparisons with it are false.
absl::Status CheckRange(absl::string_view field, float value, float lo, float hi,
                        absl::string_view range) {
  if (value >= lo && value <= hi) return absl::OkStatus();
  return Invalid(field, absl::StrCat("must be in ", range, ", got ", value));
}

template <typename Ids>
absl::Status CheckIds(const Ids& ids, absl::string_view field, int64_t vocab_size) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab_size) {
      return Invalid(absl::StrCat(field, "[", i, "]"),
                     absl::StrCat(ids[i], " is outside the vocabulary [0, ", vocab_size, ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckLengths(const GenerationRequest& r, const RequestLimits& limits,
                          absl::string_view prompt_field) {
  const int64_t prompt = static_cast<int64_t>(r.prompt_token_ids.size());
  if (prompt == 0) return Invalid(prompt_field, "empty: no prompt tokens");
  if (prompt >= limits.max_context) {
    return Invalid(prompt_field, absl::StrCat(prompt,
                                              " tokens leave no room to generate in the "
                                              "model's context of ",
                                              limits.max_context, " tokens"));
  }
  const StoppingCriteria& s = r.stopping;
  if (s.max_tokens < 1) {
    return Invalid("stopping.max_tokens", absl::StrCat("must be >= 1, got ", s.max_tokens));
  }
  if (prompt + s.max_tokens > limits.max_context) {
    return Invalid("stopping.max_tokens", absl::StrCat(s.max_tokens, " after a prompt of ", prompt,
                                                       " tokens exceeds the model's context of ",
                                                       limits.max_context, " tokens"));
  }
  if (s.min_tokens < 0 || s.min_tokens > s.max_tokens) {
    return Invalid("stopping.min_tokens", absl::StrCat("must be in [0, max_tokens = ", s.max_tokens,
                                                       "], got ", s.min_tokens));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateSampling(const SamplingParams& s) {
  RETURN_IF_ERROR(CheckRange("sampling.temperature", s.temperature, 0, kMaxTemperature,
                             absl::StrCat("[0, ", kMaxTemperature, "]")));
  if (s.top_k < 0) return Invalid("sampling.top_k", absl::StrCat("must be >= 0, got ", s.top_k));
  if (!(s.top_p > 0 && s.top_p <= 1)) {
    return Invalid("sampling.top_p", absl::StrCat("must be in (0, 1], got ", s.top_p));
  }
  RETURN_IF_ERROR(CheckRange("sampling.min_p", s.min_p, 0, 1, "[0, 1]"));
  if (!(s.repetition_penalty > 0 && s.repetition_penalty <= kMaxRepetitionPenalty)) {
    return Invalid(
        "sampling.repetition_penalty",
        absl::StrCat("must be in (0, ", kMaxRepetitionPenalty, "], got ", s.repetition_penalty));
  }
  const std::string penalty_range = absl::StrCat("[", -kMaxPenalty, ", ", kMaxPenalty, "]");
  RETURN_IF_ERROR(CheckRange("sampling.presence_penalty", s.presence_penalty, -kMaxPenalty,
                             kMaxPenalty, penalty_range));
  return CheckRange("sampling.frequency_penalty", s.frequency_penalty, -kMaxPenalty, kMaxPenalty,
                    penalty_range);
}

namespace {

absl::Status CheckStops(const StoppingCriteria& s, int64_t vocab_size) {
  for (size_t i = 0; i < s.stop_strings.size(); ++i) {
    if (s.stop_strings[i].empty()) {
      return Invalid(absl::StrCat("stopping.stop_strings[", i, "]"), "empty");
    }
  }
  return CheckIds(s.stop_token_ids, "stopping.stop_token_ids", vocab_size);
}

absl::Status CheckLogprobs(const GenerationRequest& r) {
  if (r.top_logprobs < 0 || r.top_logprobs > kMaxTopLogprobs) {
    return Invalid("top_logprobs",
                   absl::StrCat("must be in [0, ", kMaxTopLogprobs, "], got ", r.top_logprobs));
  }
  if (r.top_logprobs > 0 && !r.logprobs) return Invalid("top_logprobs", "needs logprobs = true");
  return absl::OkStatus();
}

}  // namespace

int32_t DefaultMaxTokens(int64_t prompt_tokens, const RequestLimits& limits) {
  const int64_t room = static_cast<int64_t>(limits.max_context) - prompt_tokens;
  return static_cast<int32_t>(
      std::max<int64_t>(1, std::min<int64_t>(limits.default_max_tokens, room)));
}

absl::Status ValidateRequest(const GenerationRequest& request, const RequestLimits& limits,
                             absl::string_view prompt_field) {
  RETURN_IF_ERROR(CheckIds(request.prompt_token_ids, prompt_field, limits.vocab_size));
  RETURN_IF_ERROR(CheckLengths(request, limits, prompt_field));
  RETURN_IF_ERROR(ValidateSampling(request.sampling));
  RETURN_IF_ERROR(CheckStops(request.stopping, limits.vocab_size));
  return CheckLogprobs(request);
}

}  // namespace onecard::engine
