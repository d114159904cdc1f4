// OpenAI response and error bodies (see openai_response.h).
// Tested by tests/router/openai_response_test.cc.
#include "router/openai_response.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "services/common/status.h"

namespace onecard::router {
namespace {

using nlohmann::json;
using onecard::v1::FinishReason;

json FinishReasonJson(FinishReason reason) {
  switch (reason) {
    case onecard::v1::FINISH_REASON_UNSPECIFIED:
      return nullptr;
    case onecard::v1::FINISH_REASON_LENGTH:
      return "length";
    default:
      return "stop";  // stop tokens, end of sequence, stop strings
  }
}

json UsageJson(const onecard::v1::Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens()},
          {"completion_tokens", u.completion_tokens()},
          {"total_tokens", u.prompt_tokens() + u.completion_tokens()},
          {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens()}}}};
}

json BytesJson(const std::string& bytes) {
  json out = json::array();
  for (unsigned char c : bytes) out.push_back(static_cast<int>(c));
  return out;
}

// Chat-format entries ({token, logprob, bytes, top_logprobs}) in the
// completions format, the text offsets counted from *offset.
json CompletionLogprobs(const json& entries, int64_t* offset) {
  json out = {{"tokens", json::array()},
              {"token_logprobs", json::array()},
              {"top_logprobs", json::array()},
              {"text_offset", json::array()}};
  for (const json& e : entries) {
    out["tokens"].push_back(e["token"]);
    out["token_logprobs"].push_back(e["logprob"]);
    json top = json::object();
    for (const json& t : e["top_logprobs"]) top[t["token"].get<std::string>()] = t["logprob"];
    out["top_logprobs"].push_back(std::move(top));
    out["text_offset"].push_back(*offset);
    *offset += static_cast<int64_t>(e["bytes"].size());
  }
  return out;
}

const char* ErrorType(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kUnauthenticated:
    case absl::StatusCode::kNotFound:
      return "invalid_request_error";
    case absl::StatusCode::kPermissionDenied:
      return "permission_error";
    case absl::StatusCode::kResourceExhausted:
      return "rate_limit_error";
    default:
      return "server_error";
  }
}

json ErrorCode(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kUnauthenticated:
      return "invalid_api_key";
    case absl::StatusCode::kResourceExhausted:
      return "rate_limit_exceeded";
    case absl::StatusCode::kUnavailable:
      return "service_unavailable";
    case absl::StatusCode::kDeadlineExceeded:
      return "timeout";
    default:
      return nullptr;
  }
}

}  // namespace

OpenAiResponder::OpenAiResponder(const OpenAiRequest& request, std::string id, std::string model,
                                 int64_t created, const engine::Tokenizer* tokenizer)
    : chat_(request.endpoint == OpenAiEndpoint::kChat),
      include_usage_(request.stream && request.include_usage),
      logprobs_(request.request.logprobs()),
      id_(std::move(id)),
      model_(std::move(model)),
      created_(created),
      tokenizer_(tokenizer) {}

json OpenAiResponder::Envelope(const char* object) const {
  return {{"id", id_}, {"object", object}, {"created", created_}, {"model", model_}};
}

json OpenAiResponder::Logprobs(const onecard::v1::GenerateResponse& chunk) {
  json entries = json::array();
  for (const onecard::v1::TokenLogprob& lp : chunk.logprobs()) {
    const std::string bytes = tokenizer_->TokenBytes(lp.token_id());
    json top = json::array();
    for (const onecard::v1::TopLogprob& t : lp.top_logprobs()) {
      const std::string t_bytes = tokenizer_->TokenBytes(t.token_id());
      top.push_back({{"token", t_bytes}, {"logprob", t.logprob()}, {"bytes", BytesJson(t_bytes)}});
    }
    entries.push_back({{"token", bytes},
                       {"logprob", lp.logprob()},
                       {"bytes", BytesJson(bytes)},
                       {"top_logprobs", std::move(top)}});
  }
  return entries;
}

json OpenAiResponder::Choice(const std::string& text, const json& logprobs, FinishReason reason,
                             bool delta) const {
  json choice = {{"index", 0}};
  if (!chat_) {
    choice["text"] = text;
  } else if (delta) {
    choice["delta"] = text.empty() ? json::object() : json{{"content", text}};
  } else {
    choice["message"] = {{"role", "assistant"}, {"content", text}};
  }
  choice["logprobs"] = logprobs;
  choice["finish_reason"] = FinishReasonJson(reason);
  return choice;
}

std::string OpenAiResponder::Events(const onecard::v1::GenerateResponse& chunk) {
  std::string out;
  if (chunk.has_usage()) usage_ = chunk.usage();
  if (chat_ && !role_sent_) {
    role_sent_ = true;
    json e = Envelope("chat.completion.chunk");
    e["choices"] = json::array({{{"index", 0},
                                 {"delta", {{"role", "assistant"}, {"content", ""}}},
                                 {"logprobs", nullptr},
                                 {"finish_reason", nullptr}}});
    if (include_usage_) e["usage"] = nullptr;
    out += SseEvent(DumpJson(e));
  }
  if (chunk.token_ids_size() == 0 && chunk.text().empty() &&
      chunk.finish_reason() == onecard::v1::FINISH_REASON_UNSPECIFIED) {
    return out;
  }
  json logprobs = nullptr;
  if (logprobs_) {
    json entries = Logprobs(chunk);
    logprobs =
        chat_ ? json{{"content", std::move(entries)}} : CompletionLogprobs(entries, &text_offset_);
  }
  json e = Envelope(chat_ ? "chat.completion.chunk" : "text_completion");
  e["choices"] = json::array({Choice(chunk.text(), logprobs, chunk.finish_reason(), true)});
  if (include_usage_) e["usage"] = nullptr;
  return out + SseEvent(DumpJson(e));
}

std::string OpenAiResponder::Done() const {
  std::string out;
  if (include_usage_) {
    json e = Envelope(chat_ ? "chat.completion.chunk" : "text_completion");
    e["choices"] = json::array();
    e["usage"] = UsageJson(usage_.value_or(onecard::v1::Usage()));
    out = SseEvent(DumpJson(e));
  }
  return out + SseEvent("[DONE]");
}

void OpenAiResponder::Add(const onecard::v1::GenerateResponse& chunk) {
  text_ += chunk.text();
  if (logprobs_) {
    for (json& entry : Logprobs(chunk)) logprob_items_.push_back(std::move(entry));
  }
  if (chunk.finish_reason() != onecard::v1::FINISH_REASON_UNSPECIFIED) {
    finish_reason_ = chunk.finish_reason();
  }
  if (chunk.has_usage()) usage_ = chunk.usage();
}

std::string OpenAiResponder::Body() const {
  json logprobs = nullptr;
  if (logprobs_) {
    int64_t offset = 0;
    logprobs =
        chat_ ? json{{"content", logprob_items_}} : CompletionLogprobs(logprob_items_, &offset);
  }
  json body = Envelope(chat_ ? "chat.completion" : "text_completion");
  body["choices"] = json::array({Choice(text_, logprobs, finish_reason_, false)});
  body["usage"] = UsageJson(usage_.value_or(onecard::v1::Usage()));
  return DumpJson(body);
}

int HttpStatus(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk:
      return 200;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kFailedPrecondition:
      return 400;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kResourceExhausted:
      return 429;
    case absl::StatusCode::kCancelled:
      return 499;
    case absl::StatusCode::kUnavailable:
      return 503;
    case absl::StatusCode::kDeadlineExceeded:
      return 504;
    default:
      return 500;
  }
}

std::string ErrorBody(const absl::Status& status) {
  const std::string field = NamedField(status);
  json error = {{"message", std::string(status.message())},
                {"type", ErrorType(status.code())},
                {"param", field.empty() ? json(nullptr) : json(field)},
                {"code", status.code() == absl::StatusCode::kNotFound && field == "model"
                             ? json("model_not_found")
                             : ErrorCode(status.code())}};
  return DumpJson(json{{"error", std::move(error)}});
}

std::optional<std::string> RetryAfterHeader(const absl::Status& status) {
  const std::optional<absl::Duration> hint = services::RetryAfter(status);
  if (!hint.has_value()) return std::nullopt;
  const double seconds = std::ceil(absl::ToDoubleSeconds(*hint));
  return absl::StrCat(std::max<int64_t>(1, static_cast<int64_t>(seconds)));
}

std::string SseEvent(const std::string& data) { return absl::StrCat("data: ", data, "\n\n"); }

std::string DumpJson(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace onecard::router
