// Tests of services/common/request_convert.h: wire requests become the engine
// request the test spells out by hand (defaults, byte ids from the fake
// tokenizer), the router's worker request converts back to the same engine
// request, and what has no engine form (unknown model, oversized request,
// unknown priority, unset or unencodable input) is refused naming the field.
// The range checks are engine::ValidateRequest's
// (tests/engine/runtime/request_validation_test.cc).
#include "services/common/request_convert.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/services/worker/fake_engine.h"

namespace onecard::services {
namespace {

using ::onecard::testing::FakeTokenizer;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string Message(const absl::Status& s) { return std::string(s.message()); }

constexpr engine::RequestLimits kLimits{
    .max_context = 32, .vocab_size = 300, .default_max_tokens = 10};

v1::WorkerGenerateRequest WorkerRequest() {
  v1::WorkerGenerateRequest r;
  r.add_prompt_token_ids(1);
  r.add_prompt_token_ids(2);
  return r;
}

const engine::ChatTemplate& ChatML() {
  static const auto* const chat = new engine::ChatTemplate(engine::ChatTemplateKind::kChatML);
  return *chat;
}

TEST(RequestConvertTest, WorkerRequestWithDefaults) {
  absl::StatusOr<engine::GenerationRequest> got = ToEngineRequest(WorkerRequest(), kLimits);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_THAT(got->prompt_token_ids, ElementsAre(1, 2));
  EXPECT_EQ(got->sampling.temperature, 1.0f);
  EXPECT_EQ(got->sampling.top_p, 1.0f);
  EXPECT_EQ(got->sampling.repetition_penalty, 1.0f);
  EXPECT_EQ(got->stopping.max_tokens, 10) << "the default";
  EXPECT_EQ(got->stopping.min_tokens, 0);
  EXPECT_EQ(got->priority, 1) << "unspecified = standard";
  EXPECT_FALSE(got->logprobs);
}

v1::WorkerGenerateRequest EveryField() {
  v1::WorkerGenerateRequest r = WorkerRequest();
  r.set_request_id("abc");
  r.set_model("smol");
  v1::SamplingParams* s = r.mutable_sampling();
  s->set_temperature(0);
  s->set_top_k(5);
  s->set_top_p(0.5f);
  s->set_min_p(0.1f);
  s->set_repetition_penalty(1.2f);
  s->set_presence_penalty(-1);
  s->set_frequency_penalty(2);
  s->set_seed(42);
  r.mutable_stopping()->set_max_tokens(30);
  r.mutable_stopping()->set_min_tokens(3);
  r.mutable_stopping()->add_stop_strings("\n\n");
  r.mutable_stopping()->add_stop_token_ids(257);
  r.mutable_stopping()->set_ignore_eos(true);
  r.set_priority(v1::PRIORITY_INTERACTIVE);
  r.set_logprobs(true);
  r.set_top_logprobs(3);
  return r;
}

TEST(RequestConvertTest, WorkerRequestWithEveryField) {
  absl::StatusOr<engine::GenerationRequest> got = ToEngineRequest(EveryField(), kLimits);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->request_id, "abc");
  EXPECT_EQ(got->sampling.temperature, 0.0f);
  EXPECT_EQ(got->sampling.top_k, 5);
  EXPECT_EQ(got->sampling.top_p, 0.5f);
  EXPECT_EQ(got->sampling.min_p, 0.1f);
  EXPECT_EQ(got->sampling.repetition_penalty, 1.2f);
  EXPECT_EQ(got->sampling.presence_penalty, -1.0f);
  EXPECT_EQ(got->sampling.frequency_penalty, 2.0f);
  EXPECT_EQ(got->sampling.seed, 42u);
  EXPECT_EQ(got->stopping.max_tokens, 30);
  EXPECT_EQ(got->stopping.min_tokens, 3);
  EXPECT_THAT(got->stopping.stop_strings, ElementsAre("\n\n"));
  EXPECT_THAT(got->stopping.stop_token_ids, ElementsAre(257));
  EXPECT_TRUE(got->stopping.ignore_eos);
  EXPECT_EQ(got->priority, 2);
  EXPECT_TRUE(got->logprobs);
  EXPECT_EQ(got->top_logprobs, 3);
}

TEST(RequestConvertTest, WorkerRequestOfAnEngineRequestConvertsBack) {
  absl::StatusOr<engine::GenerationRequest> a = ToEngineRequest(WorkerRequest(), kLimits);
  ASSERT_TRUE(a.ok());
  const v1::WorkerGenerateRequest w = ToWorkerRequest(*a, "smol");
  EXPECT_EQ(w.model(), "smol");
  EXPECT_TRUE(w.stopping().has_max_tokens()) << "the default travels resolved";
  EXPECT_TRUE(w.sampling().has_seed()) << "the drawn seed travels";
  absl::StatusOr<engine::GenerationRequest> b = ToEngineRequest(w, kLimits);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->sampling.seed, a->sampling.seed);
  EXPECT_EQ(b->stopping.max_tokens, a->stopping.max_tokens);
  absl::StatusOr<engine::GenerationRequest> full = ToEngineRequest(EveryField(), kLimits);
  ASSERT_TRUE(full.ok());
  EXPECT_EQ(ToWorkerRequest(*full, "smol").DebugString(), EveryField().DebugString());
}

TEST(RequestConvertTest, DefaultMaxTokensIsCappedByTheContext) {
  v1::WorkerGenerateRequest r;
  for (int i = 0; i < 28; ++i) r.add_prompt_token_ids(7);
  absl::StatusOr<engine::GenerationRequest> got = ToEngineRequest(r, kLimits);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->stopping.max_tokens, 4);
}

TEST(RequestConvertTest, UnsetSeedsAreDrawn) {
  absl::StatusOr<engine::GenerationRequest> a = ToEngineRequest(WorkerRequest(), kLimits);
  absl::StatusOr<engine::GenerationRequest> b = ToEngineRequest(WorkerRequest(), kLimits);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->sampling.seed, b->sampling.seed) << "2^-64 chance of a false failure";
}

TEST(RequestConvertTest, PromptMessagesAndIds) {
  const FakeTokenizer tok;
  v1::GenerateRequest r;
  r.set_prompt("hi");
  absl::StatusOr<PromptIds> got = EncodeInput(r, tok, &ChatML());
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_THAT(got->ids, ElementsAre('h', 'i'));
  EXPECT_EQ(got->field, "prompt");

  r.mutable_messages()->add_messages()->set_role("user");
  r.mutable_messages()->mutable_messages(0)->set_content("yo");
  got = EncodeInput(r, tok, &ChatML());
  ASSERT_TRUE(got.ok()) << got.status();
  // ChatML: <|im_start|>user\nyo<|im_end|>\n<|im_start|>assistant\n
  std::vector<int32_t> expected = {
      FakeTokenizer::kImStart, 'u', 's', 'e', 'r', '\n', 'y', 'o', FakeTokenizer::kImEnd, '\n',
      FakeTokenizer::kImStart};
  for (char c : std::string("assistant\n")) expected.push_back(c);
  EXPECT_EQ(got->ids, expected);
  EXPECT_EQ(got->field, "messages");

  r.mutable_token_ids()->add_ids(5);
  got = EncodeInput(r, tok, &ChatML());
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_THAT(got->ids, ElementsAre(5));
  EXPECT_EQ(got->field, "token_ids.ids");
}

TEST(RequestConvertTest, InputErrorsNameTheirFields) {
  const FakeTokenizer tok;
  v1::GenerateRequest r;
  EXPECT_THAT(Message(EncodeInput(r, tok, &ChatML()).status()), StartsWith("input:"));
  r.set_prompt("");
  EXPECT_THAT(Message(EncodeInput(r, tok, &ChatML()).status()), StartsWith("prompt:"));
  r.mutable_messages();
  EXPECT_THAT(Message(EncodeInput(r, tok, &ChatML()).status()), StartsWith("messages: empty"));
  r.mutable_messages()->add_messages()->set_role("robot");
  EXPECT_THAT(Message(EncodeInput(r, tok, &ChatML()).status()),
              AllOf(StartsWith("messages[0].role:"), HasSubstr("robot")));
  r.mutable_messages()->mutable_messages(0)->set_role("user");
  EXPECT_THAT(Message(EncodeInput(r, tok, nullptr).status()),
              StartsWith("messages: the model has no chat template"));
}

TEST(RequestConvertTest, WhatHasNoEngineFormIsRefused) {
  v1::WorkerGenerateRequest r = WorkerRequest();
  r.set_priority(static_cast<v1::Priority>(99));
  absl::Status s = ToEngineRequest(r, kLimits).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(s), StartsWith("priority: unknown value 99"));

  s = CheckModel("llama", "smol");
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Message(s), StartsWith("model:"));
  EXPECT_TRUE(CheckModel("", "smol").ok());
  EXPECT_TRUE(CheckModel("smol", "smol").ok());

  v1::GenerateRequest big;
  big.set_prompt(std::string(2000, 'a'));
  s = CheckRequestSize(big, 1000);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(s), StartsWith("prompt: the request is"));
  EXPECT_TRUE(CheckRequestSize(big, 4000).ok());
}

TEST(RequestConvertTest, Tokenize) {
  const FakeTokenizer tok;
  v1::TokenizeRequest r;
  EXPECT_THAT(Message(EncodeInput(r, tok, &ChatML()).status()), StartsWith("input:"));
  r.set_prompt("ok");
  absl::StatusOr<PromptIds> ids = EncodeInput(r, tok, &ChatML());
  ASSERT_TRUE(ids.ok());
  EXPECT_THAT(ids->ids, ElementsAre('o', 'k'));
}

TEST(RequestConvertTest, LargestField) {
  v1::GenerateRequest r;
  r.set_request_id("id");
  r.set_prompt(std::string(100, 'x'));
  EXPECT_EQ(LargestField(r), "prompt");
  r.mutable_stopping()->add_stop_strings(std::string(500, 'x'));
  EXPECT_EQ(LargestField(r), "stopping");
  EXPECT_EQ(LargestField(v1::GenerateRequest()), "");
}

TEST(RequestConvertTest, Priorities) {
  EXPECT_EQ(EnginePriority(v1::PRIORITY_INTERACTIVE), 2);
  EXPECT_EQ(EnginePriority(v1::PRIORITY_STANDARD), 1);
  EXPECT_EQ(EnginePriority(v1::PRIORITY_UNSPECIFIED), 1);
  EXPECT_EQ(EnginePriority(v1::PRIORITY_BATCH), 0);
  for (v1::Priority p : {v1::PRIORITY_INTERACTIVE, v1::PRIORITY_STANDARD, v1::PRIORITY_BATCH}) {
    EXPECT_EQ(ProtoPriority(EnginePriority(p)), p);
  }
  EXPECT_EQ(ProtoPriority(7), v1::PRIORITY_INTERACTIVE);
  EXPECT_EQ(ProtoPriority(-3), v1::PRIORITY_BATCH);
}

}  // namespace
}  // namespace onecard::services
