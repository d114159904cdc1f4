// OpenAI's response bodies from onecard's GenerateResponse chunks, and its
// error body from an absl::Status.
//
// Non-streaming: Add every chunk, then Body(): a "text_completion" or
// "chat.completion" object with the text, finish_reason ("stop" for the stop
// and end-of-sequence reasons, "length"), logprobs when asked and usage.
// Streaming: Events(chunk) gives the server-sent events of a chunk
// ("data: {...}\n\n"; a chat stream starts with the assistant role's
// delta), Done() the last ones: with stream_options.include_usage a chunk
// with no choices and the usage (every other chunk has "usage": null), then
// "data: [DONE]". An error after the stream started is an event whose data
// is the error body, then "data: [DONE]".
// Logprobs: chat {"content": [{token, logprob, bytes, top_logprobs}]};
// completions {tokens, token_logprobs, top_logprobs, text_offset}. Token
// strings are the token's bytes (invalid UTF-8 replaced by U+FFFD; `bytes`
// keeps them exact).
//
// Errors: {"error": {"message", "type", "param", "code"}} with the HTTP
// status of the code: INVALID_ARGUMENT 400, UNAUTHENTICATED 401,
// PERMISSION_DENIED 403, NOT_FOUND 404, RESOURCE_EXHAUSTED 429 (with
// Retry-After in seconds), CANCELLED 499, UNAVAILABLE 503, DEADLINE_EXCEEDED
// 504, others 500. `param` is the field the message names.
// Tested by tests/router/openai_response_test.cc.
#ifndef ONECARD_ROUTER_OPENAI_RESPONSE_H_
#define ONECARD_ROUTER_OPENAI_RESPONSE_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "engine/tokenizer/tokenizer.h"
#include "nlohmann/json.hpp"
#include "onecard/v1/generation.pb.h"
#include "router/openai_request.h"

namespace onecard::router {

class OpenAiResponder {
 public:
  // `id` is the response's id ("chatcmpl-..."), `created` its Unix time;
  // `tokenizer` (for logprobs' token strings) must outlive the responder.
  OpenAiResponder(const OpenAiRequest& request, std::string id, std::string model, int64_t created,
                  const engine::Tokenizer* tokenizer);

  // Streaming.
  std::string Events(const onecard::v1::GenerateResponse& chunk);
  std::string Done() const;

  // Non-streaming.
  void Add(const onecard::v1::GenerateResponse& chunk);
  std::string Body() const;

 private:
  nlohmann::json Envelope(const char* object) const;
  nlohmann::json Logprobs(const onecard::v1::GenerateResponse& chunk);
  nlohmann::json Choice(const std::string& text, const nlohmann::json& logprobs,
                        onecard::v1::FinishReason reason, bool delta) const;

  const bool chat_;
  const bool include_usage_;
  const bool logprobs_;
  const std::string id_;
  const std::string model_;
  const int64_t created_;
  const engine::Tokenizer* tokenizer_;
  bool role_sent_ = false;
  int64_t text_offset_ = 0;  // completions' logprobs: bytes of text before the next token
  // Non-streaming: everything so far; both: the last usage.
  std::string text_;
  nlohmann::json logprob_items_ = nlohmann::json::array();
  onecard::v1::FinishReason finish_reason_ = onecard::v1::FINISH_REASON_UNSPECIFIED;
  std::optional<onecard::v1::Usage> usage_;
};

// The HTTP status of a status code (the table above).
int HttpStatus(absl::StatusCode code);
// {"error": {...}} for `status` (its message names `param` when it names a
// field).
std::string ErrorBody(const absl::Status& status);
// The Retry-After header's value (whole seconds, at least 1) of a status
// with a retry hint (services::WithRetryAfter); nullopt without one.
std::optional<std::string> RetryAfterHeader(const absl::Status& status);
// One server-sent event: "data: <data>\n\n".
std::string SseEvent(const std::string& data);
// nlohmann-json's dump with invalid UTF-8 replaced (it would throw).
std::string DumpJson(const nlohmann::json& value);

}  // namespace onecard::router

#endif  // ONECARD_ROUTER_OPENAI_RESPONSE_H_
