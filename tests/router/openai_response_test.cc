// Tests router/openai_response.h: the response bodies and server-sent events
// of both endpoints (OpenAI's shapes, parsed back as JSON), logprobs in each
// endpoint's format, usage with stream_options.include_usage, and error
// bodies with their HTTP status and Retry-After.
#include "router/openai_response.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "services/common/status.h"
#include "tests/services/worker/fake_engine.h"

namespace onecard::router {
namespace {

using nlohmann::json;
using onecard::testing::FakeTokenizer;
using onecard::v1::GenerateResponse;

OpenAiRequest Request(OpenAiEndpoint endpoint, bool stream, bool usage, bool logprobs) {
  OpenAiRequest r;
  r.endpoint = endpoint;
  r.stream = stream;
  r.include_usage = usage;
  r.request.set_logprobs(logprobs);
  r.request.set_top_logprobs(logprobs ? 1 : 0);
  return r;
}

// Two chunks: "Hi" (ids 'H', 'i') and "!" with LENGTH and usage.
std::vector<GenerateResponse> Chunks() {
  GenerateResponse a;
  a.add_token_ids('H');
  a.add_token_ids('i');
  a.set_text("Hi");
  for (int id : {'H', 'i'}) {
    onecard::v1::TokenLogprob* lp = a.add_logprobs();
    lp->set_token_id(id);
    lp->set_logprob(-0.5f);
    onecard::v1::TopLogprob* top = lp->add_top_logprobs();
    top->set_token_id(id);
    top->set_logprob(-0.5f);
  }
  GenerateResponse b;
  b.add_token_ids(0xff);  // a byte that is not UTF-8 alone
  b.set_text("!");
  onecard::v1::TokenLogprob* lp = b.add_logprobs();
  lp->set_token_id(0xff);
  lp->set_logprob(-1.0f);
  b.set_finish_reason(onecard::v1::FINISH_REASON_LENGTH);
  b.mutable_usage()->set_prompt_tokens(5);
  b.mutable_usage()->set_completion_tokens(3);
  b.mutable_usage()->set_cached_tokens(2);
  return {a, b};
}

// The data of each "data: ...\n\n" event, in order.
std::vector<std::string> Events(const std::string& text) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at < text.size()) {
    EXPECT_EQ(text.compare(at, 6, "data: "), 0) << text.substr(at);
    const size_t end = text.find("\n\n", at);
    EXPECT_NE(end, std::string::npos);
    out.push_back(text.substr(at + 6, end - at - 6));
    at = end + 2;
  }
  return out;
}

TEST(OpenAiResponseTest, ChatBody) {
  const FakeTokenizer tok;
  OpenAiResponder r(Request(OpenAiEndpoint::kChat, false, false, true), "chatcmpl-1", "smol", 99,
                    &tok);
  for (const GenerateResponse& c : Chunks()) r.Add(c);
  const json body = json::parse(r.Body());
  EXPECT_EQ(body["id"], "chatcmpl-1");
  EXPECT_EQ(body["object"], "chat.completion");
  EXPECT_EQ(body["created"], 99);
  EXPECT_EQ(body["model"], "smol");
  const json& choice = body["choices"][0];
  EXPECT_EQ(choice["index"], 0);
  EXPECT_EQ(choice["message"], (json{{"role", "assistant"}, {"content", "Hi!"}}));
  EXPECT_EQ(choice["finish_reason"], "length");
  ASSERT_EQ(choice["logprobs"]["content"].size(), 3u);
  EXPECT_EQ(choice["logprobs"]["content"][0]["token"], "H");
  EXPECT_EQ(choice["logprobs"]["content"][0]["bytes"], json::array({'H'}));
  EXPECT_EQ(choice["logprobs"]["content"][0]["top_logprobs"][0]["token"], "H");
  EXPECT_EQ(choice["logprobs"]["content"][2]["token"], "\xef\xbf\xbd") << "U+FFFD";
  EXPECT_EQ(choice["logprobs"]["content"][2]["bytes"], json::array({0xff}));
  EXPECT_EQ(body["usage"], (json{{"prompt_tokens", 5},
                                 {"completion_tokens", 3},
                                 {"total_tokens", 8},
                                 {"prompt_tokens_details", {{"cached_tokens", 2}}}}));
}

TEST(OpenAiResponseTest, CompletionBodyWithLogprobs) {
  const FakeTokenizer tok;
  OpenAiResponder r(Request(OpenAiEndpoint::kCompletions, false, false, true), "cmpl-1", "smol", 1,
                    &tok);
  for (const GenerateResponse& c : Chunks()) r.Add(c);
  const json body = json::parse(r.Body());
  EXPECT_EQ(body["object"], "text_completion");
  const json& choice = body["choices"][0];
  EXPECT_EQ(choice["text"], "Hi!");
  EXPECT_EQ(choice["logprobs"]["tokens"], (json::array({"H", "i", "\xef\xbf\xbd"})));
  EXPECT_EQ(choice["logprobs"]["token_logprobs"], (json::array({-0.5, -0.5, -1.0})));
  EXPECT_EQ(choice["logprobs"]["text_offset"], (json::array({0, 1, 2})));
  EXPECT_EQ(choice["logprobs"]["top_logprobs"][1], (json{{"i", -0.5}}));
}

TEST(OpenAiResponseTest, ChatStreamStartsWithTheRoleAndEndsWithUsageAndDone) {
  const FakeTokenizer tok;
  OpenAiResponder r(Request(OpenAiEndpoint::kChat, true, true, false), "chatcmpl-2", "smol", 7,
                    &tok);
  std::string text;
  for (const GenerateResponse& c : Chunks()) text += r.Events(c);
  text += r.Done();
  const std::vector<std::string> events = Events(text);
  ASSERT_EQ(events.size(), 5u);
  const json role = json::parse(events[0]);
  EXPECT_EQ(role["object"], "chat.completion.chunk");
  EXPECT_EQ(role["choices"][0]["delta"], (json{{"role", "assistant"}, {"content", ""}}));
  EXPECT_TRUE(role["usage"].is_null()) << "every chunk carries usage: null";
  EXPECT_EQ(json::parse(events[1])["choices"][0]["delta"]["content"], "Hi");
  EXPECT_TRUE(json::parse(events[1])["choices"][0]["finish_reason"].is_null());
  const json last = json::parse(events[2]);
  EXPECT_EQ(last["choices"][0]["delta"]["content"], "!");
  EXPECT_EQ(last["choices"][0]["finish_reason"], "length");
  const json usage = json::parse(events[3]);
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["total_tokens"], 8);
  EXPECT_EQ(events[4], "[DONE]");
}

TEST(OpenAiResponseTest, CompletionStreamWithoutUsage) {
  const FakeTokenizer tok;
  OpenAiResponder r(Request(OpenAiEndpoint::kCompletions, true, false, false), "cmpl-3", "smol", 7,
                    &tok);
  std::string text;
  for (const GenerateResponse& c : Chunks()) text += r.Events(c);
  text += r.Done();
  const std::vector<std::string> events = Events(text);
  ASSERT_EQ(events.size(), 3u);
  const json first = json::parse(events[0]);
  EXPECT_EQ(first["object"], "text_completion");
  EXPECT_EQ(first["choices"][0]["text"], "Hi");
  EXPECT_FALSE(first.contains("usage"));
  EXPECT_EQ(json::parse(events[1])["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(events[2], "[DONE]");
}

TEST(OpenAiResponseTest, ErrorBodiesAndStatuses) {
  json e = json::parse(ErrorBody(absl::InvalidArgumentError("max_tokens: must be >= 1, got -5")));
  EXPECT_EQ(e["error"]["message"], "max_tokens: must be >= 1, got -5");
  EXPECT_EQ(e["error"]["type"], "invalid_request_error");
  EXPECT_EQ(e["error"]["param"], "max_tokens");
  EXPECT_TRUE(e["error"]["code"].is_null());
  e = json::parse(ErrorBody(absl::NotFoundError("model: unknown model \"gpt\"")));
  EXPECT_EQ(e["error"]["code"], "model_not_found");
  e = json::parse(ErrorBody(absl::UnauthenticatedError("missing API key")));
  EXPECT_EQ(e["error"]["code"], "invalid_api_key");
  EXPECT_TRUE(e["error"]["param"].is_null());
  EXPECT_EQ(HttpStatus(absl::StatusCode::kInvalidArgument), 400);
  EXPECT_EQ(HttpStatus(absl::StatusCode::kUnauthenticated), 401);
  EXPECT_EQ(HttpStatus(absl::StatusCode::kPermissionDenied), 403);
  EXPECT_EQ(HttpStatus(absl::StatusCode::kNotFound), 404);
  EXPECT_EQ(HttpStatus(absl::StatusCode::kResourceExhausted), 429);
  EXPECT_EQ(HttpStatus(absl::StatusCode::kUnavailable), 503);
  EXPECT_EQ(HttpStatus(absl::StatusCode::kDeadlineExceeded), 504);
  EXPECT_EQ(HttpStatus(absl::StatusCode::kInternal), 500);
  const absl::Status limited = services::WithRetryAfter(absl::ResourceExhaustedError("rate limit"),
                                                        absl::Milliseconds(1500));
  EXPECT_EQ(RetryAfterHeader(limited), "2");
  EXPECT_EQ(RetryAfterHeader(services::WithRetryAfter(absl::ResourceExhaustedError("x"),
                                                      absl::Milliseconds(10))),
            "1");
  EXPECT_EQ(RetryAfterHeader(absl::ResourceExhaustedError("x")), std::nullopt);
  EXPECT_EQ(SseEvent("[DONE]"), "data: [DONE]\n\n");
}

}  // namespace
}  // namespace onecard::router
