// Tests of ValidateRequest, the one check of a request's fields: a valid
// request passes (the bounds are inclusive where documented); each bad field
// gives InvalidArgument whose message starts with that field's path; the
// default max_tokens is capped by the context.
#include "engine/runtime/request_validation.h"

#include <functional>
#include <limits>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace onecard::engine {
namespace {

using ::testing::StartsWith;

constexpr int64_t kVocab = 100;
constexpr int32_t kContext = 32;
constexpr RequestLimits kLimits{.max_context = kContext, .vocab_size = kVocab};

GenerationRequest Valid() {
  GenerationRequest r;
  r.prompt_token_ids = {1, 2, 3};
  r.stopping.max_tokens = 10;
  return r;
}

void ExpectInvalid(const std::function<void(GenerationRequest&)>& mutate,
                   const std::string& field) {
  GenerationRequest r = Valid();
  mutate(r);
  absl::Status status = ValidateRequest(r, kLimits, "messages");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << field;
  EXPECT_THAT(std::string(status.message()), StartsWith(field + ":"));
}

TEST(RequestValidationTest, AValidRequestPasses) {
  EXPECT_TRUE(ValidateRequest(Valid(), kLimits).ok());
  GenerationRequest edge = Valid();
  edge.stopping.max_tokens = kContext - 3;  // prompt + max_tokens == context
  edge.stopping.min_tokens = edge.stopping.max_tokens;
  edge.stopping.stop_strings = {"\n"};
  edge.stopping.stop_token_ids = {0, kVocab - 1};
  edge.prompt_token_ids = {0, kVocab - 1, 5};
  edge.sampling = {.temperature = 0.0f,
                   .top_k = 0,
                   .top_p = 1.0f,
                   .min_p = 1.0f,
                   .repetition_penalty = 0.5f,
                   .presence_penalty = -2.0f,
                   .frequency_penalty = 2.0f};
  edge.logprobs = true;
  edge.top_logprobs = 20;
  EXPECT_TRUE(ValidateRequest(edge, kLimits).ok());
  edge.sampling.temperature = kMaxTemperature;
  edge.sampling.repetition_penalty = kMaxRepetitionPenalty;
  edge.sampling.top_k = 1000;  // more than the vocabulary: every token
  EXPECT_TRUE(ValidateRequest(edge, kLimits).ok());
}

TEST(RequestValidationTest, EachBadFieldIsNamed) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  ExpectInvalid([](auto& r) { r.prompt_token_ids.clear(); }, "messages");
  ExpectInvalid([](auto& r) { r.prompt_token_ids[1] = kVocab; }, "messages[1]");
  ExpectInvalid([](auto& r) { r.prompt_token_ids[2] = -1; }, "messages[2]");
  ExpectInvalid([](auto& r) { r.prompt_token_ids.assign(kContext + 5, 1); }, "messages");
  ExpectInvalid([](auto& r) { r.prompt_token_ids.assign(kContext, 1); }, "messages");
  ExpectInvalid([](auto& r) { r.stopping.max_tokens = 0; }, "stopping.max_tokens");
  ExpectInvalid([](auto& r) { r.stopping.max_tokens = -5; }, "stopping.max_tokens");
  ExpectInvalid([](auto& r) { r.stopping.max_tokens = kContext - 2; }, "stopping.max_tokens");
  ExpectInvalid([](auto& r) { r.stopping.min_tokens = -1; }, "stopping.min_tokens");
  ExpectInvalid([](auto& r) { r.stopping.min_tokens = 11; }, "stopping.min_tokens");
  ExpectInvalid([](auto& r) { r.sampling.temperature = -0.1f; }, "sampling.temperature");
  ExpectInvalid([&](auto& r) { r.sampling.temperature = nan; }, "sampling.temperature");
  ExpectInvalid([&](auto& r) { r.sampling.temperature = inf; }, "sampling.temperature");
  ExpectInvalid([](auto& r) { r.sampling.temperature = 1e30f; }, "sampling.temperature");
  ExpectInvalid([](auto& r) { r.sampling.top_p = 0.0f; }, "sampling.top_p");
  ExpectInvalid([](auto& r) { r.sampling.top_p = 1.01f; }, "sampling.top_p");
  ExpectInvalid([](auto& r) { r.sampling.min_p = -0.1f; }, "sampling.min_p");
  ExpectInvalid([](auto& r) { r.sampling.min_p = 1.5f; }, "sampling.min_p");
  ExpectInvalid([](auto& r) { r.sampling.top_k = -1; }, "sampling.top_k");
  ExpectInvalid([](auto& r) { r.sampling.repetition_penalty = 0.0f; },
                "sampling.repetition_penalty");
  ExpectInvalid([&](auto& r) { r.sampling.repetition_penalty = inf; },
                "sampling.repetition_penalty");
  ExpectInvalid([](auto& r) { r.sampling.presence_penalty = 2.5f; }, "sampling.presence_penalty");
  ExpectInvalid([](auto& r) { r.sampling.frequency_penalty = -3.0f; },
                "sampling.frequency_penalty");
  ExpectInvalid([](auto& r) { r.stopping.stop_strings = {"ok", ""}; }, "stopping.stop_strings[1]");
  ExpectInvalid([](auto& r) { r.stopping.stop_token_ids = {kVocab}; },
                "stopping.stop_token_ids[0]");
  ExpectInvalid(
      [](auto& r) {
        r.logprobs = true;
        r.top_logprobs = 21;
      },
      "top_logprobs");
  ExpectInvalid([](auto& r) { r.top_logprobs = -1; }, "top_logprobs");
  ExpectInvalid([](auto& r) { r.top_logprobs = 2; }, "top_logprobs");  // without logprobs
}

TEST(RequestValidationTest, ThePromptIsNamedByTheCaller) {
  GenerationRequest r = Valid();
  r.prompt_token_ids.clear();
  EXPECT_THAT(std::string(ValidateRequest(r, kLimits).message()), StartsWith("prompt: "));
  EXPECT_THAT(std::string(ValidateRequest(r, kLimits, "token_ids.ids").message()),
              StartsWith("token_ids.ids: "));
}

TEST(RequestValidationTest, DefaultMaxTokensIsCappedByTheContext) {
  const RequestLimits limits{.max_context = 100, .vocab_size = kVocab, .default_max_tokens = 16};
  EXPECT_EQ(DefaultMaxTokens(10, limits), 16);
  EXPECT_EQ(DefaultMaxTokens(90, limits), 10);
  EXPECT_EQ(DefaultMaxTokens(99, limits), 1);
  EXPECT_EQ(DefaultMaxTokens(100, limits), 1) << "then ValidateRequest names the prompt";
  EXPECT_EQ(DefaultMaxTokens(5, RequestLimits{.max_context = 1000}), kDefaultMaxTokens);
}

}  // namespace
}  // namespace onecard::engine
