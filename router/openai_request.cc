// OpenAI request bodies -> GenerateRequest (see openai_request.h).
// Tested by tests/router/openai_request_test.cc.
#include "router/openai_request.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "engine/common/status_macros.h"
#include "router/json_body.h"

namespace onecard::router {
namespace {

using nlohmann::json;
using onecard::v1::GenerateRequest;

absl::Status Invalid(absl::string_view field, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
}

// Read by both endpoints (onecard's extras last).
constexpr const char* kCommonFields[] = {
    "model",      "stream",         "stream_options", "max_tokens",         "temperature",
    "top_p",      "seed",           "stop",           "presence_penalty",   "frequency_penalty",
    "user",       "top_k",          "min_p",          "repetition_penalty", "min_tokens",
    "ignore_eos", "stop_token_ids", "priority"};
constexpr const char* kCompletionFields[] = {"prompt", "logprobs"};
constexpr const char* kChatFields[] = {
    "messages", "max_completion_tokens", "logprobs",           "top_logprobs", "store",
    "metadata", "service_tier",          "parallel_tool_calls"};

// Features onecard does not implement: refused unless null or their default.
struct Unsupported {
  const char* name;
  const char* why;
  bool (*is_default)(const json& value);
};
constexpr Unsupported kUnsupported[] = {
    {"n", "only 1 is supported", [](const json& v) { return v == 1; }},
    {"best_of", "only 1 is supported", [](const json& v) { return v == 1; }},
    {"echo", "echoing the prompt is not supported", [](const json& v) { return v == false; }},
    {"suffix", "suffixes are not supported", [](const json& v) { return v == ""; }},
    {"logit_bias", "logit_bias is not supported",
     [](const json& v) { return v.is_object() && v.empty(); }},
    {"tools", "tool calls are not supported",
     [](const json& v) { return v.is_array() && v.empty(); }},
    {"tool_choice", "tool calls are not supported", [](const json& v) { return v == "none"; }},
    {"functions", "function calls are not supported",
     [](const json& v) { return v.is_array() && v.empty(); }},
    {"function_call", "function calls are not supported",
     [](const json& v) { return v == "none"; }},
    {"response_format", "only {\"type\": \"text\"} is supported",
     [](const json& v) {
       return v == json{{"type", "text"}};
     }},
    {"modalities", "only [\"text\"] is supported",
     [](const json& v) { return v == json::array({"text"}); }},
    {"audio", "audio output is not supported", [](const json&) { return false; }},
    {"prediction", "predicted outputs are not supported", [](const json&) { return false; }},
    {"reasoning_effort", "not supported", [](const json&) { return false; }},
    {"web_search_options", "web search is not supported", [](const json&) { return false; }},
};

template <size_t N>
bool In(const char* const (&names)[N], const std::string& key) {
  return std::find_if(std::begin(names), std::end(names),
                      [&](const char* n) { return key == n; }) != std::end(names);
}

absl::Status CheckKeys(const json& body, OpenAiEndpoint endpoint) {
  const bool chat = endpoint == OpenAiEndpoint::kChat;
  for (const auto& item : body.items()) {
    const std::string& key = item.key();  // a named variable: lambdas capture it
    const json& value = item.value();
    if (In(kCommonFields, key) || (chat ? In(kChatFields, key) : In(kCompletionFields, key))) {
      continue;
    }
    const auto* u = std::find_if(std::begin(kUnsupported), std::end(kUnsupported),
                                 [&](const Unsupported& x) { return key == x.name; });
    if (u == std::end(kUnsupported)) {
      return Invalid(key, chat ? "unrecognized request argument for /v1/chat/completions"
                               : "unrecognized request argument for /v1/completions");
    }
    if (!value.is_null() && !u->is_default(value)) return Invalid(key, u->why);
  }
  return absl::OkStatus();
}

absl::Status ParseSampling(const JsonObject& o, GenerateRequest* r) {
  onecard::v1::SamplingParams* s = r->mutable_sampling();
  ASSIGN_OR_RETURN(std::optional<double> temperature, o.Number("temperature"));
  if (temperature) s->set_temperature(static_cast<float>(*temperature));
  ASSIGN_OR_RETURN(std::optional<double> top_p, o.Number("top_p"));
  if (top_p) s->set_top_p(static_cast<float>(*top_p));
  ASSIGN_OR_RETURN(std::optional<int32_t> top_k, o.Int("top_k"));
  s->set_top_k(top_k.value_or(0));
  ASSIGN_OR_RETURN(std::optional<double> min_p, o.Number("min_p"));
  s->set_min_p(static_cast<float>(min_p.value_or(0)));
  ASSIGN_OR_RETURN(std::optional<double> repetition, o.Number("repetition_penalty"));
  if (repetition) s->set_repetition_penalty(static_cast<float>(*repetition));
  ASSIGN_OR_RETURN(std::optional<double> presence, o.Number("presence_penalty"));
  s->set_presence_penalty(static_cast<float>(presence.value_or(0)));
  ASSIGN_OR_RETURN(std::optional<double> frequency, o.Number("frequency_penalty"));
  s->set_frequency_penalty(static_cast<float>(frequency.value_or(0)));
  ASSIGN_OR_RETURN(std::optional<uint64_t> seed, o.Uint64Bits("seed"));
  if (seed) s->set_seed(*seed);
  return absl::OkStatus();
}

absl::Status ParseStopping(const JsonObject& o, OpenAiRequest* out) {
  onecard::v1::StoppingCriteria* s = out->request.mutable_stopping();
  std::optional<int32_t> max_tokens;
  for (const char* name : {"max_tokens", "max_completion_tokens"}) {
    if (!o.Has(name)) continue;
    ASSIGN_OR_RETURN(max_tokens, o.Int(name));
    out->max_tokens_field = name;  // the newer name wins when both are sent
  }
  if (max_tokens) s->set_max_tokens(*max_tokens);
  ASSIGN_OR_RETURN(std::optional<int32_t> min_tokens, o.Int("min_tokens"));
  s->set_min_tokens(min_tokens.value_or(0));
  ASSIGN_OR_RETURN(std::vector<std::string> stop, o.Strings("stop", &out->stop_is_list));
  for (std::string& text : stop) s->add_stop_strings(std::move(text));
  ASSIGN_OR_RETURN(std::vector<int32_t> stop_ids, o.Ints("stop_token_ids"));
  s->mutable_stop_token_ids()->Add(stop_ids.begin(), stop_ids.end());
  ASSIGN_OR_RETURN(std::optional<bool> ignore_eos, o.Bool("ignore_eos"));
  s->set_ignore_eos(ignore_eos.value_or(false));
  return absl::OkStatus();
}

absl::StatusOr<onecard::v1::Priority> ParsePriority(const JsonObject& o) {
  const json& v = o.Get("priority");
  if (v.is_null()) return onecard::v1::PRIORITY_UNSPECIFIED;
  if (v.is_string()) {
    for (auto [name, p] : {std::pair{"interactive", onecard::v1::PRIORITY_INTERACTIVE},
                           std::pair{"standard", onecard::v1::PRIORITY_STANDARD},
                           std::pair{"batch", onecard::v1::PRIORITY_BATCH}}) {
      if (v == name || v == onecard::v1::Priority_Name(p)) return p;
    }
    return Invalid("priority",
                   absl::StrCat("unknown class ", v.dump(), " (interactive, standard or batch)"));
  }
  ASSIGN_OR_RETURN(int32_t number, JsonInt32(v, "priority"));
  return static_cast<onecard::v1::Priority>(number);  // the request's checks refuse unknown ones
}

// One message's content: a string, or text parts ({"type": "text", "text": ...}).
absl::StatusOr<std::string> ParseContent(const JsonObject& m) {
  const json& content = m.Get("content");
  if (content.is_null()) return std::string();
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) return m.String("content").status();  // names the wrong type
  std::string text;
  for (size_t j = 0; j < content.size(); ++j) {
    if (!content[j].is_object()) {
      return Invalid(m.Path(absl::StrCat("content[", j, "]")), "expected a content part object");
    }
    const JsonObject part(content[j], m.Path(absl::StrCat("content[", j, "].")));
    ASSIGN_OR_RETURN(std::optional<std::string> type, part.String("type"));
    if (type != "text") return Invalid(part.Path("type"), "only text parts are supported");
    ASSIGN_OR_RETURN(std::optional<std::string> part_text, part.String("text"));
    absl::StrAppend(&text, part_text.value_or(""));
  }
  return text;
}

absl::Status ParseMessage(const json& value, int i, onecard::v1::ChatMessage* out) {
  const std::string prefix = absl::StrCat("messages[", i, "]");
  if (!value.is_object()) return Invalid(prefix, "expected a message object");
  const JsonObject m(value, prefix + ".");
  for (const auto& [key, unused] : value.items()) {
    if (key != "role" && key != "content" && key != "name") {
      return Invalid(m.Path(key), key == "tool_calls" || key == "tool_call_id"
                                      ? "tool calls are not supported"
                                      : "unrecognized message field");
    }
  }
  ASSIGN_OR_RETURN(std::optional<std::string> role, m.String("role"));
  if (!role) return Invalid(m.Path("role"), "required");
  if (*role == "tool" || *role == "function") {
    return Invalid(m.Path("role"), "tool and function messages are not supported");
  }
  out->set_role(*role == "developer" ? "system" : *role);  // other roles: the template decides
  ASSIGN_OR_RETURN(*out->mutable_content(), ParseContent(m));
  return absl::OkStatus();
}

absl::Status ParseMessages(const JsonObject& o, GenerateRequest* r) {
  const json& messages = o.Get("messages");
  if (messages.is_null()) return Invalid("messages", "required");
  if (!messages.is_array()) return Invalid("messages", "expected an array of messages");
  if (messages.empty()) return Invalid("messages", "empty");
  onecard::v1::ChatMessages* out = r->mutable_messages();
  for (size_t i = 0; i < messages.size(); ++i) {
    RETURN_IF_ERROR(ParseMessage(messages[i], static_cast<int>(i), out->add_messages()));
  }
  return absl::OkStatus();
}

// A string, [string], [int...] or [[int...]]: one prompt, as text or ids.
absl::Status ParsePrompt(const JsonObject& o, GenerateRequest* r) {
  json prompt = o.Get("prompt");
  if (prompt.is_null()) return Invalid("prompt", "required");
  if (prompt.is_array() && prompt.size() == 1 && (prompt[0].is_string() || prompt[0].is_array())) {
    json first = std::move(prompt[0]);  // a batch of one
    prompt = std::move(first);
  }
  if (prompt.is_string()) {
    r->set_prompt(prompt.get<std::string>());
    return absl::OkStatus();
  }
  if (!prompt.is_array()) return Invalid("prompt", "expected a string or token ids");
  if (!prompt.empty() && (prompt[0].is_string() || prompt[0].is_array())) {
    return Invalid("prompt", "only one prompt a request is supported");
  }
  onecard::v1::TokenIds* ids = r->mutable_token_ids();
  for (size_t i = 0; i < prompt.size(); ++i) {
    ASSIGN_OR_RETURN(int32_t id, JsonInt32(prompt[i], absl::StrCat("prompt[", i, "]")));
    ids->add_ids(id);
  }
  return absl::OkStatus();
}

absl::Status ParseLogprobs(const JsonObject& o, OpenAiEndpoint endpoint, GenerateRequest* r) {
  if (endpoint == OpenAiEndpoint::kCompletions) {  // logprobs: the number of alternatives
    ASSIGN_OR_RETURN(std::optional<int32_t> top, o.Int("logprobs"));
    r->set_logprobs(top.has_value());
    r->set_top_logprobs(top.value_or(0));
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(std::optional<bool> logprobs, o.Bool("logprobs"));
  r->set_logprobs(logprobs.value_or(false));
  ASSIGN_OR_RETURN(std::optional<int32_t> top, o.Int("top_logprobs"));
  r->set_top_logprobs(top.value_or(0));
  return absl::OkStatus();
}

absl::Status ParseStream(const JsonObject& o, OpenAiRequest* out) {
  ASSIGN_OR_RETURN(std::optional<bool> stream, o.Bool("stream"));
  out->stream = stream.value_or(false);
  const json& options = o.Get("stream_options");
  if (options.is_null()) return absl::OkStatus();
  if (!options.is_object()) return Invalid("stream_options", "expected an object");
  const JsonObject stream_options(options, "stream_options.");
  for (const auto& [key, unused] : options.items()) {
    if (key != "include_usage") return Invalid(stream_options.Path(key), "unrecognized option");
  }
  ASSIGN_OR_RETURN(std::optional<bool> usage, stream_options.Bool("include_usage"));
  out->include_usage = usage.value_or(false);
  return absl::OkStatus();
}

absl::Status ParseBody(const json& body, OpenAiRequest* out) {
  RETURN_IF_ERROR(CheckKeys(body, out->endpoint));
  const JsonObject o(body, "");
  GenerateRequest& r = out->request;
  ASSIGN_OR_RETURN(std::optional<std::string> model, o.String("model"));
  r.set_model(model.value_or(""));
  RETURN_IF_ERROR(out->endpoint == OpenAiEndpoint::kChat ? ParseMessages(o, &r)
                                                         : ParsePrompt(o, &r));
  RETURN_IF_ERROR(ParseSampling(o, &r));
  RETURN_IF_ERROR(ParseStopping(o, out));
  RETURN_IF_ERROR(ParseLogprobs(o, out->endpoint, &r));
  ASSIGN_OR_RETURN(onecard::v1::Priority priority, ParsePriority(o));
  r.set_priority(priority);
  RETURN_IF_ERROR(o.String("user").status());  // checked, unused
  return ParseStream(o, out);
}

// generation.proto paths -> the client's field names.
std::string ClientField(absl::string_view path, const OpenAiRequest& r) {
  const bool chat = r.endpoint == OpenAiEndpoint::kChat;
  if (absl::ConsumePrefix(&path, "sampling.")) return std::string(path);
  if (path == "stopping.max_tokens") return r.max_tokens_field;
  if (path == "stopping.min_tokens") return "min_tokens";
  if (absl::ConsumePrefix(&path, "stopping.stop_strings")) {
    return r.stop_is_list ? absl::StrCat("stop", path) : "stop";
  }
  if (absl::ConsumePrefix(&path, "stopping.")) return std::string(path);
  if (path == "top_logprobs" && !chat) return "logprobs";
  if (absl::ConsumePrefix(&path, "token_ids.ids")) return absl::StrCat("prompt", path);
  if (path == "input") return chat ? "messages" : "prompt";
  return std::string(path);
}

}  // namespace

absl::Status ParseOpenAiRequest(absl::string_view body, OpenAiEndpoint endpoint,
                                OpenAiRequest* out) {
  *out = OpenAiRequest();
  out->endpoint = endpoint;
  absl::StatusOr<json> parsed = ParseJsonBody(body);
  if (!parsed.ok()) return parsed.status();
  return ParseBody(*parsed, out);
}

std::string NamedField(const absl::Status& status) {
  const absl::string_view message = status.message();
  const size_t colon = message.find(": ");
  if (colon == absl::string_view::npos || colon == 0) return "";
  const absl::string_view field = message.substr(0, colon);
  if (field.find(' ') != absl::string_view::npos) return "";
  return std::string(field);
}

absl::Status InOpenAiTerms(const absl::Status& status, const OpenAiRequest& request) {
  const std::string field = NamedField(status);
  if (field.empty()) return status;
  const std::string renamed = ClientField(field, request);
  if (renamed == field) return status;
  absl::Status out(status.code(), absl::StrCat(renamed, status.message().substr(field.size())));
  status.ForEachPayload(
      [&out](absl::string_view url, const absl::Cord& payload) { out.SetPayload(url, payload); });
  return out;
}

}  // namespace onecard::router
