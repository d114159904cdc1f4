// OpenAI's request bodies (POST /v1/completions, /v1/chat/completions) as
// onecard.v1.GenerateRequests, which then take the gRPC API's path through
// the router (GenerateCall, RequestPreparer): one set of checks for both.
//
// Fields: model; prompt (a string, one string in an array, token ids, or one
// array of token ids) or messages (roles system, developer = system, user,
// assistant; content a string or text parts); max_tokens or (chat)
// max_completion_tokens; temperature, top_p, seed, stop (a string or
// strings), presence_penalty, frequency_penalty; logprobs (completions: the
// number of alternatives; chat: a boolean, with top_logprobs); stream,
// stream_options.include_usage; user (accepted, unused). onecard's extras,
// accepted as vLLM accepts its own: top_k, min_p, repetition_penalty,
// min_tokens, ignore_eos, stop_token_ids, priority ("interactive",
// "standard", "batch", or generation.proto's enum number).
// Refused naming the field (INVALID_ARGUMENT): n, best_of > 1, echo, suffix,
// logit_bias, tools, functions, non-text response_format or modalities,
// audio and other features onecard does not implement, unknown fields, and
// values of the wrong type.
// Tested by tests/router/openai_request_test.cc.
#ifndef ONECARD_ROUTER_OPENAI_REQUEST_H_
#define ONECARD_ROUTER_OPENAI_REQUEST_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "onecard/v1/generation.pb.h"

namespace onecard::router {

enum class OpenAiEndpoint { kCompletions, kChat };

struct OpenAiRequest {
  OpenAiEndpoint endpoint = OpenAiEndpoint::kCompletions;
  onecard::v1::GenerateRequest request;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  // How the client named fields that have two names or forms, for errors.
  std::string max_tokens_field = "max_tokens";  // or max_completion_tokens
  bool stop_is_list = false;                    // `stop` was an array
};

// Parses a JSON body into `out` (its endpoint is `endpoint` whatever
// happens). INVALID_ARGUMENT whose message starts with the OpenAI field
// ("n: only 1 is supported", "messages[0].content: expected ...", "body:
// not valid JSON: ...").
absl::Status ParseOpenAiRequest(absl::string_view body, OpenAiEndpoint endpoint,
                                OpenAiRequest* out);

// A status whose message starts with a generation.proto path (the request's
// checks name those: "sampling.top_p: ...") rewritten to the field the
// client sent ("top_p: ..."); other statuses as they are.
absl::Status InOpenAiTerms(const absl::Status& status, const OpenAiRequest& request);

// The field a status names (the message's start before ": ", when that is a
// path), or "" when it names none.
std::string NamedField(const absl::Status& status);

}  // namespace onecard::router

#endif  // ONECARD_ROUTER_OPENAI_REQUEST_H_
