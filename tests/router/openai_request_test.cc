// Tests router/openai_request.h: OpenAI bodies of both endpoints become the
// GenerateRequest the test spells out (every standard field, onecard's
// extras, the prompt's forms), unsupported and unknown fields and wrong
// types are refused naming the field, and the request checks' proto paths
// are renamed to the fields the client sent.
#include "router/openai_request.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace onecard::router {
namespace {

using ::testing::StartsWith;

OpenAiRequest Parse(const std::string& body, OpenAiEndpoint endpoint = OpenAiEndpoint::kChat) {
  OpenAiRequest r;
  const absl::Status s = ParseOpenAiRequest(body, endpoint, &r);
  EXPECT_TRUE(s.ok()) << s << " for " << body;
  return r;
}

// The error of `body`, whose message must start with "<field>: ".
std::string Refusal(const std::string& body, const std::string& field,
                    OpenAiEndpoint endpoint = OpenAiEndpoint::kChat) {
  OpenAiRequest r;
  const absl::Status s = ParseOpenAiRequest(body, endpoint, &r);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << body;
  EXPECT_THAT(std::string(s.message()), StartsWith(field + ": ")) << body;
  EXPECT_EQ(NamedField(s), field) << s;
  return std::string(s.message());
}

TEST(OpenAiRequestTest, ChatWithEveryField) {
  const OpenAiRequest r = Parse(R"({
      "model": "smol", "messages": [
        {"role": "developer", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "Hi "}, {"type": "text", "text": "there"}],
         "name": "ann"},
        {"role": "assistant", "content": null}],
      "max_tokens": 7, "max_completion_tokens": 9, "temperature": 0.5, "top_p": 0.9, "seed": 42,
      "stop": ["\n", "END"], "presence_penalty": 0.5, "frequency_penalty": -0.5,
      "logprobs": true, "top_logprobs": 3, "user": "u-1", "n": 1, "stream": true,
      "stream_options": {"include_usage": true}, "response_format": {"type": "text"},
      "tools": [], "tool_choice": "none", "parallel_tool_calls": false,
      "top_k": 5, "min_p": 0.05, "repetition_penalty": 1.1, "min_tokens": 2,
      "ignore_eos": true, "stop_token_ids": [7], "priority": "interactive"})");
  const onecard::v1::GenerateRequest& g = r.request;
  EXPECT_EQ(g.model(), "smol");
  ASSERT_EQ(g.messages().messages_size(), 3);
  EXPECT_EQ(g.messages().messages(0).role(), "system");
  EXPECT_EQ(g.messages().messages(1).content(), "Hi there");
  EXPECT_EQ(g.messages().messages(2).content(), "");
  EXPECT_EQ(g.stopping().max_tokens(), 9);
  EXPECT_EQ(r.max_tokens_field, "max_completion_tokens");
  EXPECT_FLOAT_EQ(g.sampling().temperature(), 0.5f);
  EXPECT_FLOAT_EQ(g.sampling().top_p(), 0.9f);
  EXPECT_EQ(g.sampling().seed(), 42u);
  EXPECT_EQ(g.stopping().stop_strings_size(), 2);
  EXPECT_TRUE(r.stop_is_list);
  EXPECT_FLOAT_EQ(g.sampling().presence_penalty(), 0.5f);
  EXPECT_FLOAT_EQ(g.sampling().frequency_penalty(), -0.5f);
  EXPECT_TRUE(g.logprobs());
  EXPECT_EQ(g.top_logprobs(), 3);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(g.sampling().top_k(), 5);
  EXPECT_FLOAT_EQ(g.sampling().min_p(), 0.05f);
  EXPECT_FLOAT_EQ(g.sampling().repetition_penalty(), 1.1f);
  EXPECT_EQ(g.stopping().min_tokens(), 2);
  EXPECT_TRUE(g.stopping().ignore_eos());
  EXPECT_EQ(g.stopping().stop_token_ids(0), 7);
  EXPECT_EQ(g.priority(), onecard::v1::PRIORITY_INTERACTIVE);
}

TEST(OpenAiRequestTest, UnsetFieldsStayUnset) {
  const OpenAiRequest r =
      Parse(R"({"messages": [{"role": "user", "content": "x"}], "temperature": null})");
  EXPECT_FALSE(r.request.sampling().has_temperature());
  EXPECT_FALSE(r.request.sampling().has_top_p());
  EXPECT_FALSE(r.request.sampling().has_seed());
  EXPECT_FALSE(r.request.stopping().has_max_tokens());
  EXPECT_FALSE(r.stream);
  EXPECT_EQ(r.request.priority(), onecard::v1::PRIORITY_UNSPECIFIED);
}

TEST(OpenAiRequestTest, CompletionPromptForms) {
  constexpr auto kCompletions = OpenAiEndpoint::kCompletions;
  EXPECT_EQ(Parse(R"({"prompt": "Once"})", kCompletions).request.prompt(), "Once");
  EXPECT_EQ(Parse(R"({"prompt": ["Once"]})", kCompletions).request.prompt(), "Once");
  OpenAiRequest ids = Parse(R"({"prompt": [5, 6], "logprobs": 2, "stop": "x"})", kCompletions);
  EXPECT_EQ(ids.request.token_ids().ids_size(), 2);
  EXPECT_TRUE(ids.request.logprobs());
  EXPECT_EQ(ids.request.top_logprobs(), 2);
  EXPECT_FALSE(ids.stop_is_list);
  EXPECT_EQ(Parse(R"({"prompt": [[9]], "logprobs": 0})", kCompletions).request.token_ids().ids(0),
            9);
  EXPECT_TRUE(Parse(R"({"prompt": [[9]], "logprobs": 0})", kCompletions).request.logprobs());
  EXPECT_EQ(Parse(R"({"prompt": "x", "priority": 3})", kCompletions).request.priority(),
            onecard::v1::PRIORITY_BATCH);
  EXPECT_EQ(
      Parse(R"({"prompt": "x", "priority": "PRIORITY_BATCH"})", kCompletions).request.priority(),
      onecard::v1::PRIORITY_BATCH);
}

TEST(OpenAiRequestTest, RefusalsNameTheField) {
  constexpr auto kCompletions = OpenAiEndpoint::kCompletions;
  const std::string chat = R"("messages": [{"role": "user", "content": "x"}])";
  Refusal("{", "body");
  Refusal("[]", "body");
  Refusal(R"({"messages": []})", "messages");
  Refusal(R"({"messages": "hi"})", "messages");
  Refusal(R"({})", "messages");
  Refusal(R"({"messages": [{"content": "x"}]})", "messages[0].role");
  Refusal(R"({"messages": [{"role": "tool", "content": "x"}]})", "messages[0].role");
  Refusal(R"({"messages": [{"role": "user", "content": 5}]})", "messages[0].content");
  Refusal(R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})",
          "messages[0].content[0].type");
  Refusal(R"({"messages": [{"role": "user", "content": "x", "tool_calls": []}]})",
          "messages[0].tool_calls");
  Refusal("{" + chat + R"(, "n": 2})", "n");
  Refusal("{" + chat + R"(, "temperature": "hot"})", "temperature");
  Refusal("{" + chat + R"(, "max_tokens": "5"})", "max_tokens");
  Refusal("{" + chat + R"(, "max_tokens": 1e12})", "max_tokens");
  Refusal("{" + chat + R"(, "max_completion_tokens": 2.5})", "max_completion_tokens");
  Refusal("{" + chat + R"(, "stream": "yes"})", "stream");
  Refusal("{" + chat + R"(, "stream_options": {"x": 1}})", "stream_options.x");
  Refusal("{" + chat + R"(, "stop": [1]})", "stop[0]");
  Refusal("{" + chat + R"(, "tools": [{"type": "function"}]})", "tools");
  Refusal("{" + chat + R"(, "response_format": {"type": "json_object"}})", "response_format");
  Refusal("{" + chat + R"(, "logit_bias": {"5": 1}})", "logit_bias");
  Refusal("{" + chat + R"(, "frobnicate": true})", "frobnicate");
  Refusal("{" + chat + R"(, "priority": "urgent"})", "priority");
  Refusal("{" + chat + R"(, "prompt": "x"})", "prompt");  // a completions field
  Refusal(R"({"prompt": ["a", "b"]})", "prompt", kCompletions);
  Refusal(R"({"prompt": [1, "b"]})", "prompt[1]", kCompletions);
  Refusal(R"({"prompt": "x", "echo": true})", "echo", kCompletions);
  Refusal(R"({"prompt": "x", "best_of": 3})", "best_of", kCompletions);
  Refusal(R"({"prompt": "x", "logprobs": true})", "logprobs", kCompletions);
  Refusal(R"({"prompt": "x", "messages": []})", "messages", kCompletions);
  Refusal(R"({"prompt": "x", "seed": "1"})", "seed", kCompletions);
  // The default of an unsupported field is accepted.
  Parse(R"({"prompt": "x", "n": 1, "best_of": 1, "echo": false, "logit_bias": {}})", kCompletions);
}

TEST(OpenAiRequestTest, ProtoPathsBecomeTheClientsFields) {
  OpenAiRequest chat = Parse(R"({"messages": [{"role": "user", "content": "x"}],
                                 "max_completion_tokens": 5, "stop": ["a", "b"]})");
  const auto renamed = [&](const OpenAiRequest& r, const std::string& message) {
    return std::string(InOpenAiTerms(absl::InvalidArgumentError(message), r).message());
  };
  EXPECT_EQ(renamed(chat, "sampling.top_p: must be in (0, 1], got 2"),
            "top_p: must be in (0, 1], got 2");
  EXPECT_EQ(renamed(chat, "stopping.max_tokens: must be >= 1, got -5"),
            "max_completion_tokens: must be >= 1, got -5");
  EXPECT_EQ(renamed(chat, "stopping.stop_strings[1]: empty"), "stop[1]: empty");
  EXPECT_EQ(renamed(chat, "stopping.min_tokens: x"), "min_tokens: x");
  EXPECT_EQ(renamed(chat, "stopping.stop_token_ids[0]: x"), "stop_token_ids[0]: x");
  EXPECT_EQ(renamed(chat, "top_logprobs: x"), "top_logprobs: x");
  EXPECT_EQ(renamed(chat, "messages[0].role: unknown role 'robot'"),
            "messages[0].role: unknown role 'robot'");
  EXPECT_EQ(renamed(chat, "the worker is draining"), "the worker is draining");
  OpenAiRequest completion =
      Parse(R"({"prompt": [1, 2], "stop": "a"})", OpenAiEndpoint::kCompletions);
  EXPECT_EQ(renamed(completion, "token_ids.ids[1]: 99999 is outside the vocabulary"),
            "prompt[1]: 99999 is outside the vocabulary");
  EXPECT_EQ(renamed(completion, "stopping.stop_strings[0]: empty"), "stop: empty");
  EXPECT_EQ(renamed(completion, "top_logprobs: must be in [0, 20], got 21"),
            "logprobs: must be in [0, 20], got 21");
  const absl::Status not_found = InOpenAiTerms(absl::NotFoundError("model: unknown"), completion);
  EXPECT_EQ(not_found.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(NamedField(absl::UnavailableError("no worker is available")), "");
}

}  // namespace
}  // namespace onecard::router
