// Tests of ValidateRequest: a valid request passes; each bad field gives
// InvalidArgument whose message names that field.
#include "engine/runtime/request_validation.h"

#include <functional>
#include <limits>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace onecard::engine {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kVocab = 100;
constexpr int32_t kContext = 32;

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
  absl::Status status = ValidateRequest(r, kVocab, kContext);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << field;
  EXPECT_THAT(std::string(status.message()), HasSubstr(field));
}

TEST(RequestValidationTest, AValidRequestPasses) {
  EXPECT_TRUE(ValidateRequest(Valid(), kVocab, kContext).ok());
  GenerationRequest edge = Valid();
  edge.stopping.max_tokens = kContext - 3;  // prompt + max_tokens == context
  edge.sampling = {.temperature = 0.0f,
                   .top_k = 0,
                   .top_p = 1.0f,
                   .min_p = 1.0f,
                   .repetition_penalty = 0.5f,
                   .presence_penalty = -2.0f,
                   .frequency_penalty = 2.0f};
  edge.top_logprobs = 20;
  EXPECT_TRUE(ValidateRequest(edge, kVocab, kContext).ok());
}

TEST(RequestValidationTest, EachBadFieldIsNamed) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  ExpectInvalid([](auto& r) { r.prompt_token_ids.clear(); }, "prompt_token_ids");
  ExpectInvalid([](auto& r) { r.prompt_token_ids[1] = kVocab; }, "prompt_token_ids[1]");
  ExpectInvalid([](auto& r) { r.prompt_token_ids[2] = -1; }, "prompt_token_ids[2]");
  ExpectInvalid([](auto& r) { r.prompt_token_ids.assign(kContext + 5, 1); }, "prompt_token_ids");
  ExpectInvalid([](auto& r) { r.prompt_token_ids.assign(kContext, 1); }, "prompt_token_ids");
  ExpectInvalid([](auto& r) { r.stopping.max_tokens = 0; }, "stopping.max_tokens");
  ExpectInvalid([](auto& r) { r.stopping.max_tokens = kContext - 2; }, "stopping.max_tokens");
  ExpectInvalid([](auto& r) { r.sampling.temperature = -0.1f; }, "sampling.temperature");
  ExpectInvalid([&](auto& r) { r.sampling.temperature = nan; }, "sampling.temperature");
  ExpectInvalid([](auto& r) { r.sampling.top_p = 0.0f; }, "sampling.top_p");
  ExpectInvalid([](auto& r) { r.sampling.top_p = 1.01f; }, "sampling.top_p");
  ExpectInvalid([](auto& r) { r.sampling.min_p = -0.1f; }, "sampling.min_p");
  ExpectInvalid([](auto& r) { r.sampling.min_p = 1.5f; }, "sampling.min_p");
  ExpectInvalid([](auto& r) { r.sampling.top_k = -1; }, "sampling.top_k");
  ExpectInvalid([](auto& r) { r.sampling.repetition_penalty = 0.0f; },
                "sampling.repetition_penalty");
  ExpectInvalid([](auto& r) { r.sampling.presence_penalty = 2.5f; }, "sampling.presence_penalty");
  ExpectInvalid([](auto& r) { r.sampling.frequency_penalty = -3.0f; },
                "sampling.frequency_penalty");
  ExpectInvalid([](auto& r) { r.stopping.stop_strings = {"ok", ""}; }, "stopping.stop_strings[1]");
  ExpectInvalid([](auto& r) { r.stopping.stop_token_ids = {kVocab}; },
                "stopping.stop_token_ids[0]");
  ExpectInvalid([](auto& r) { r.top_logprobs = 21; }, "top_logprobs");
  ExpectInvalid([](auto& r) { r.top_logprobs = -1; }, "top_logprobs");
}

}  // namespace
}  // namespace onecard::engine
