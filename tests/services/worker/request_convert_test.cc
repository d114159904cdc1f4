// Tests of request validation and conversion: valid requests become the
// engine request the test spells out by hand (defaults from config.proto,
// byte ids from the fake tokenizer), and every invalid field is refused
// with INVALID_ARGUMENT whose message starts with that field's path.
#include "services/worker/request_convert.h"

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

RequestLimits Limits() {
  RequestLimits limits;
  limits.model_name = "smol";
  limits.max_context = 32;
  limits.vocab_size = 300;
  limits.default_max_tokens = 10;
  limits.max_request_bytes = 1000;
  return limits;
}

v1::WorkerGenerateRequest WorkerRequest() {
  v1::WorkerGenerateRequest r;
  r.add_prompt_token_ids(1);
  r.add_prompt_token_ids(2);
  return r;
}

TEST(RequestConvertTest, WorkerRequestWithDefaults) {
  absl::StatusOr<engine::GenerationRequest> got = FromWorkerRequest(WorkerRequest(), Limits());
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_THAT(got->prompt_token_ids, ElementsAre(1, 2));
  EXPECT_EQ(got->sampling.temperature, 1.0f);
  EXPECT_EQ(got->sampling.top_p, 1.0f);
  EXPECT_EQ(got->sampling.repetition_penalty, 1.0f);
  EXPECT_EQ(got->stopping.max_tokens, 10) << "the default";
  EXPECT_EQ(got->priority, 1) << "unspecified = standard";
  EXPECT_FALSE(got->logprobs);
}

TEST(RequestConvertTest, WorkerRequestWithEveryField) {
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
  r.mutable_stopping()->add_stop_strings("\n\n");
  r.mutable_stopping()->add_stop_token_ids(257);
  r.mutable_stopping()->set_ignore_eos(true);
  r.set_priority(v1::PRIORITY_INTERACTIVE);
  r.set_logprobs(true);
  r.set_top_logprobs(3);
  absl::StatusOr<engine::GenerationRequest> got = FromWorkerRequest(r, Limits());
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
  EXPECT_EQ(got->stopping.max_tokens, 30) << "2 + 30 = the whole context";
  EXPECT_THAT(got->stopping.stop_strings, ElementsAre("\n\n"));
  EXPECT_THAT(got->stopping.stop_token_ids, ElementsAre(257));
  EXPECT_TRUE(got->stopping.ignore_eos);
  EXPECT_EQ(got->priority, 2);
  EXPECT_TRUE(got->logprobs);
  EXPECT_EQ(got->top_logprobs, 3);
}

TEST(RequestConvertTest, DefaultMaxTokensIsCappedByTheContext) {
  v1::WorkerGenerateRequest r;
  for (int i = 0; i < 28; ++i) r.add_prompt_token_ids(7);
  absl::StatusOr<engine::GenerationRequest> got = FromWorkerRequest(r, Limits());
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->stopping.max_tokens, 4);
}

TEST(RequestConvertTest, PublicPromptMessagesAndIds) {
  const FakeTokenizer tok;
  v1::GenerateRequest r;
  r.set_prompt("hi");
  absl::StatusOr<engine::GenerationRequest> got = FromGenerateRequest(r, Limits(), tok);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_THAT(got->prompt_token_ids, ElementsAre('h', 'i'));

  r.mutable_messages()->add_messages()->set_role("user");
  r.mutable_messages()->mutable_messages(0)->set_content("yo");
  got = FromGenerateRequest(r, Limits(), tok);
  ASSERT_TRUE(got.ok()) << got.status();
  // ChatML: <|im_start|>user\nyo<|im_end|>\n<|im_start|>assistant\n
  std::vector<int32_t> expected = {
      FakeTokenizer::kImStart, 'u', 's', 'e', 'r', '\n', 'y', 'o', FakeTokenizer::kImEnd, '\n',
      FakeTokenizer::kImStart};
  for (char c : std::string("assistant\n")) expected.push_back(c);
  EXPECT_EQ(got->prompt_token_ids, expected);

  r.mutable_token_ids()->add_ids(5);
  got = FromGenerateRequest(r, Limits(), tok);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_THAT(got->prompt_token_ids, ElementsAre(5));
}

TEST(RequestConvertTest, UnsetSeedsAreDrawn) {
  absl::StatusOr<engine::GenerationRequest> a = FromWorkerRequest(WorkerRequest(), Limits());
  absl::StatusOr<engine::GenerationRequest> b = FromWorkerRequest(WorkerRequest(), Limits());
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->sampling.seed, b->sampling.seed) << "2^-64 chance of a false failure";
}

struct BadCase {
  std::string name;
  void (*edit)(v1::WorkerGenerateRequest*);
  std::string field;  // the message starts with "<field>:"
};

class RequestConvertBadTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(RequestConvertBadTest, NamesTheField) {
  v1::WorkerGenerateRequest r = WorkerRequest();
  GetParam().edit(&r);
  const absl::Status s = FromWorkerRequest(r, Limits()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(s), StartsWith(GetParam().field + ":"));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, RequestConvertBadTest,
    ::testing::Values(
        BadCase{"EmptyPrompt", [](auto* r) { r->clear_prompt_token_ids(); }, "prompt_token_ids"},
        BadCase{"IdPastVocab", [](auto* r) { r->add_prompt_token_ids(300); },
                "prompt_token_ids[2]"},
        BadCase{"NegativeId", [](auto* r) { r->set_prompt_token_ids(0, -1); },
                "prompt_token_ids[0]"},
        BadCase{"PromptFillsContext",
                [](auto* r) {
                  for (int i = 0; i < 30; ++i) r->add_prompt_token_ids(1);
                },
                "prompt_token_ids"},
        BadCase{"ZeroMaxTokens", [](auto* r) { r->mutable_stopping()->set_max_tokens(0); },
                "stopping.max_tokens"},
        BadCase{"NegativeMaxTokens", [](auto* r) { r->mutable_stopping()->set_max_tokens(-3); },
                "stopping.max_tokens"},
        BadCase{"MaxTokensPastContext", [](auto* r) { r->mutable_stopping()->set_max_tokens(31); },
                "stopping.max_tokens"},
        BadCase{"NegativeTemperature",
                [](auto* r) { r->mutable_sampling()->set_temperature(-0.1f); },
                "sampling.temperature"},
        BadCase{"NanTemperature", [](auto* r) { r->mutable_sampling()->set_temperature(NAN); },
                "sampling.temperature"},
        BadCase{"ZeroTopP", [](auto* r) { r->mutable_sampling()->set_top_p(0); }, "sampling.top_p"},
        BadCase{"TopPOverOne", [](auto* r) { r->mutable_sampling()->set_top_p(1.01f); },
                "sampling.top_p"},
        BadCase{"NegativeTopK", [](auto* r) { r->mutable_sampling()->set_top_k(-1); },
                "sampling.top_k"},
        BadCase{"MinPOverOne", [](auto* r) { r->mutable_sampling()->set_min_p(2); },
                "sampling.min_p"},
        BadCase{"ZeroRepetitionPenalty",
                [](auto* r) { r->mutable_sampling()->set_repetition_penalty(0); },
                "sampling.repetition_penalty"},
        BadCase{"PresencePenalty", [](auto* r) { r->mutable_sampling()->set_presence_penalty(3); },
                "sampling.presence_penalty"},
        BadCase{"FrequencyPenalty",
                [](auto* r) { r->mutable_sampling()->set_frequency_penalty(-3); },
                "sampling.frequency_penalty"},
        BadCase{"UnknownModel", [](auto* r) { r->set_model("llama"); }, "model"},
        BadCase{"EmptyStopString", [](auto* r) { r->mutable_stopping()->add_stop_strings(""); },
                "stopping.stop_strings[0]"},
        BadCase{"StopIdPastVocab", [](auto* r) { r->mutable_stopping()->add_stop_token_ids(999); },
                "stopping.stop_token_ids[0]"},
        BadCase{"UnknownPriority", [](auto* r) { r->set_priority(static_cast<v1::Priority>(9)); },
                "priority"},
        BadCase{"TooManyTopLogprobs",
                [](auto* r) {
                  r->set_logprobs(true);
                  r->set_top_logprobs(21);
                },
                "top_logprobs"},
        BadCase{"TopLogprobsWithoutLogprobs", [](auto* r) { r->set_top_logprobs(2); },
                "top_logprobs"},
        BadCase{"Oversized",
                [](auto* r) {
                  for (int i = 0; i < 1100; ++i) r->add_prompt_token_ids(1);
                },
                "prompt_token_ids"}),
    [](const auto& info) { return info.param.name; });

TEST(RequestConvertTest, PublicRequestErrorsNameTheirFields) {
  const FakeTokenizer tok;
  v1::GenerateRequest r;
  EXPECT_THAT(Message(FromGenerateRequest(r, Limits(), tok).status()), StartsWith("input:"));
  r.set_prompt("");
  EXPECT_THAT(Message(FromGenerateRequest(r, Limits(), tok).status()), StartsWith("prompt:"));
  r.set_prompt(std::string(40, 'a'));
  EXPECT_THAT(Message(FromGenerateRequest(r, Limits(), tok).status()),
              StartsWith("prompt: the prompt is 40 tokens"));
  r.set_prompt(std::string(2000, 'a'));
  EXPECT_THAT(Message(FromGenerateRequest(r, Limits(), tok).status()),
              StartsWith("prompt: the request is"));
  r.mutable_messages();
  EXPECT_THAT(Message(FromGenerateRequest(r, Limits(), tok).status()),
              StartsWith("messages.messages:"));
  r.mutable_messages()->add_messages()->set_role("robot");
  EXPECT_THAT(Message(FromGenerateRequest(r, Limits(), tok).status()),
              AllOf(StartsWith("messages:"), HasSubstr("role")));
  r.mutable_token_ids()->add_ids(1000);
  EXPECT_THAT(Message(FromGenerateRequest(r, Limits(), tok).status()),
              StartsWith("token_ids.ids[0]:"));
}

TEST(RequestConvertTest, Tokenize) {
  const FakeTokenizer tok;
  v1::TokenizeRequest r;
  r.set_prompt("ok");
  absl::StatusOr<std::vector<int32_t>> ids = TokenizeInput(r, Limits(), tok);
  ASSERT_TRUE(ids.ok());
  EXPECT_THAT(*ids, ElementsAre('o', 'k'));
  r.set_model("other");
  EXPECT_THAT(Message(TokenizeInput(r, Limits(), tok).status()), StartsWith("model:"));
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

TEST(RequestConvertTest, EnginePriorities) {
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
