// Request validation and conversion to the engine. See request_convert.h.
#include "services/worker/request_convert.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "google/protobuf/descriptor.h"

namespace onecard::services {
namespace {

using google::protobuf::FieldDescriptor;

absl::Status Invalid(absl::string_view field, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
}

absl::Status CheckSize(const google::protobuf::Message& request, const RequestLimits& limits) {
  const size_t size = request.ByteSizeLong();
  if (static_cast<int64_t>(size) <= limits.max_request_bytes) return absl::OkStatus();
  return Invalid(LargestField(request), absl::StrCat("the request is ", size, " bytes, over the ",
                                                     limits.max_request_bytes, "-byte limit"));
}

absl::Status CheckModel(const std::string& model, const RequestLimits& limits) {
  if (model.empty() || model == limits.model_name) return absl::OkStatus();
  return Invalid("model", absl::StrCat("unknown model \"", model, "\"; this worker serves \"",
                                       limits.model_name, "\""));
}

template <typename Ids>
absl::Status CheckTokenIds(const Ids& ids, absl::string_view field, int32_t vocab_size) {
  for (int i = 0; i < static_cast<int>(ids.size()); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab_size) {
      return Invalid(absl::StrCat(field, "[", i, "]"),
                     absl::StrCat(ids[i], " is outside the vocabulary [0, ", vocab_size, ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckRange(absl::string_view field, float value, float lo, float hi,
                        absl::string_view range) {
  if (std::isfinite(value) && value >= lo && value <= hi) return absl::OkStatus();
  return Invalid(field, absl::StrCat("must be in ", range, ", got ", value));
}

uint64_t RandomSeed() {
  thread_local absl::BitGen gen;
  return absl::Uniform<uint64_t>(gen);
}

absl::Status ConvertSampling(const v1::SamplingParams& p, engine::SamplingParams* out) {
  constexpr float kMax = 3.4e38f;
  out->temperature = p.has_temperature() ? p.temperature() : 1.0f;
  RETURN_IF_ERROR(CheckRange("sampling.temperature", out->temperature, 0, kMax, "[0, inf)"));
  if (p.top_k() < 0)
    return Invalid("sampling.top_k", absl::StrCat("must be >= 0, got ", p.top_k()));
  out->top_k = p.top_k();
  out->top_p = p.has_top_p() ? p.top_p() : 1.0f;
  if (!(out->top_p > 0 && out->top_p <= 1)) {
    return Invalid("sampling.top_p", absl::StrCat("must be in (0, 1], got ", out->top_p));
  }
  out->min_p = p.min_p();
  RETURN_IF_ERROR(CheckRange("sampling.min_p", out->min_p, 0, 1, "[0, 1]"));
  out->repetition_penalty = p.has_repetition_penalty() ? p.repetition_penalty() : 1.0f;
  if (!(out->repetition_penalty > 0) || !std::isfinite(out->repetition_penalty)) {
    return Invalid("sampling.repetition_penalty",
                   absl::StrCat("must be > 0, got ", out->repetition_penalty));
  }
  out->presence_penalty = p.presence_penalty();
  RETURN_IF_ERROR(CheckRange("sampling.presence_penalty", out->presence_penalty, -2, 2, "[-2, 2]"));
  out->frequency_penalty = p.frequency_penalty();
  RETURN_IF_ERROR(
      CheckRange("sampling.frequency_penalty", out->frequency_penalty, -2, 2, "[-2, 2]"));
  out->seed = p.has_seed() ? p.seed() : RandomSeed();
  return absl::OkStatus();
}

// Sampling, priority and logprobs: the checks that need no prompt.
absl::Status ConvertOptions(const v1::SamplingParams& sampling, v1::Priority priority,
                            bool logprobs, int32_t top_logprobs, engine::GenerationRequest* out) {
  RETURN_IF_ERROR(ConvertSampling(sampling, &out->sampling));
  if (!v1::Priority_IsValid(priority)) {
    return Invalid("priority", absl::StrCat("unknown value ", static_cast<int>(priority)));
  }
  out->priority = EnginePriority(priority);
  if (top_logprobs < 0 || top_logprobs > 20) {
    return Invalid("top_logprobs", absl::StrCat("must be in [0, 20], got ", top_logprobs));
  }
  if (top_logprobs > 0 && !logprobs) return Invalid("top_logprobs", "needs logprobs = true");
  out->logprobs = logprobs;
  out->top_logprobs = top_logprobs;
  return absl::OkStatus();
}

// The prompt fits with room for at least one generated token.
absl::Status CheckPrompt(const std::vector<int32_t>& ids, absl::string_view field,
                         const RequestLimits& limits) {
  if (ids.empty()) return Invalid(field, "empty: no prompt tokens");
  if (static_cast<int64_t>(ids.size()) >= limits.max_context) {
    return Invalid(field, absl::StrCat("the prompt is ", ids.size(), " tokens; the context holds ",
                                       limits.max_context, " (prompt + generated)"));
  }
  return absl::OkStatus();
}

absl::Status ConvertStopping(const v1::StoppingCriteria& s, int32_t prompt_tokens,
                             const RequestLimits& limits, engine::StoppingCriteria* out) {
  const int32_t room = limits.max_context - prompt_tokens;
  if (s.has_max_tokens()) {
    if (s.max_tokens() <= 0) {
      return Invalid("stopping.max_tokens", absl::StrCat("must be >= 1, got ", s.max_tokens()));
    }
    if (s.max_tokens() > room) {
      return Invalid("stopping.max_tokens",
                     absl::StrCat("the prompt (", prompt_tokens, " tokens) plus max_tokens (",
                                  s.max_tokens(), ") exceeds the context of ", limits.max_context));
    }
    out->max_tokens = s.max_tokens();
  } else {
    out->max_tokens = std::min(limits.default_max_tokens, room);
  }
  for (int i = 0; i < s.stop_strings_size(); ++i) {
    if (s.stop_strings(i).empty())
      return Invalid(absl::StrCat("stopping.stop_strings[", i, "]"), "empty");
  }
  RETURN_IF_ERROR(CheckTokenIds(s.stop_token_ids(), "stopping.stop_token_ids", limits.vocab_size));
  out->stop_strings.assign(s.stop_strings().begin(), s.stop_strings().end());
  out->stop_token_ids.assign(s.stop_token_ids().begin(), s.stop_token_ids().end());
  out->ignore_eos = s.ignore_eos();
  return absl::OkStatus();
}

struct PromptIds {
  std::vector<int32_t> ids;
  std::string field;  // where the prompt came from, for errors
};

absl::StatusOr<std::string> RenderChat(const v1::ChatMessages& messages,
                                       const engine::Tokenizer& tokenizer) {
  if (messages.messages_size() == 0) return Invalid("messages.messages", "empty");
  std::vector<engine::ChatMessage> chat;
  for (const v1::ChatMessage& m : messages.messages()) chat.push_back({m.role(), m.content()});
  absl::StatusOr<engine::ChatTemplate> tmpl = engine::ChatTemplate::ForTokenizer(tokenizer);
  if (!tmpl.ok()) return Invalid("messages", tmpl.status().message());
  absl::StatusOr<std::string> text = tmpl->Render(chat, /*add_generation_prompt=*/true);
  if (!text.ok()) return Invalid("messages", text.status().message());
  return text;
}

// Prompt text or chat messages to ids (the input oneof of both messages).
absl::StatusOr<PromptIds> EncodeText(bool has_prompt, const std::string& prompt,
                                     const v1::ChatMessages* messages,
                                     const engine::Tokenizer& tokenizer) {
  if (has_prompt) {
    if (prompt.empty()) return Invalid("prompt", "empty");
    return PromptIds{tokenizer.Encode(prompt, /*add_special_tokens=*/true), "prompt"};
  }
  if (messages == nullptr) return Invalid("input", "set one of prompt, messages, token_ids");
  ASSIGN_OR_RETURN(std::string text, RenderChat(*messages, tokenizer));
  // The template writes the special tokens itself (HF: add_special_tokens=False).
  return PromptIds{tokenizer.Encode(text, /*add_special_tokens=*/false), "messages"};
}

absl::StatusOr<PromptIds> EncodeInput(const v1::GenerateRequest& r, const RequestLimits& limits,
                                      const engine::Tokenizer& tokenizer) {
  if (r.input_case() == v1::GenerateRequest::kTokenIds) {
    RETURN_IF_ERROR(CheckTokenIds(r.token_ids().ids(), "token_ids.ids", limits.vocab_size));
    return PromptIds{{r.token_ids().ids().begin(), r.token_ids().ids().end()}, "token_ids.ids"};
  }
  return EncodeText(r.input_case() == v1::GenerateRequest::kPrompt, r.prompt(),
                    r.has_messages() ? &r.messages() : nullptr, tokenizer);
}

absl::Status FinishPrompt(PromptIds prompt, const v1::StoppingCriteria& stopping,
                          const RequestLimits& limits, engine::GenerationRequest* out) {
  RETURN_IF_ERROR(CheckPrompt(prompt.ids, prompt.field, limits));
  RETURN_IF_ERROR(
      ConvertStopping(stopping, static_cast<int32_t>(prompt.ids.size()), limits, &out->stopping));
  out->prompt_token_ids = std::move(prompt.ids);
  return absl::OkStatus();
}

int64_t FieldSize(const google::protobuf::Message& m, const FieldDescriptor* f) {
  const auto* r = m.GetReflection();
  const int count = f->is_repeated() ? r->FieldSize(m, f) : 1;
  int64_t size = 0;
  for (int i = 0; i < count; ++i) {
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_STRING) {
      size += f->is_repeated() ? r->GetRepeatedString(m, f, i).size() : r->GetString(m, f).size();
    } else if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      size += f->is_repeated() ? r->GetRepeatedMessage(m, f, i).ByteSizeLong()
                               : r->GetMessage(m, f).ByteSizeLong();
    } else {
      size += 8;
    }
  }
  return size;
}

}  // namespace

int32_t EnginePriority(v1::Priority priority) {
  switch (priority) {
    case v1::PRIORITY_INTERACTIVE:
      return 2;
    case v1::PRIORITY_BATCH:
      return 0;
    default:
      return 1;
  }
}

v1::Priority ProtoPriority(int32_t engine_priority) {
  if (engine_priority >= 2) return v1::PRIORITY_INTERACTIVE;
  return engine_priority <= 0 ? v1::PRIORITY_BATCH : v1::PRIORITY_STANDARD;
}

std::string LargestField(const google::protobuf::Message& message) {
  std::vector<const FieldDescriptor*> fields;
  message.GetReflection()->ListFields(message, &fields);
  std::string best;
  int64_t best_size = -1;
  for (const FieldDescriptor* f : fields) {
    const int64_t size = FieldSize(message, f);
    if (size > best_size) {
      best_size = size;
      best = f->name();
    }
  }
  return best;
}

absl::StatusOr<engine::GenerationRequest> FromWorkerRequest(const v1::WorkerGenerateRequest& r,
                                                            const RequestLimits& limits) {
  RETURN_IF_ERROR(CheckSize(r, limits));
  RETURN_IF_ERROR(CheckModel(r.model(), limits));
  engine::GenerationRequest out;
  out.request_id = r.request_id();
  RETURN_IF_ERROR(ConvertOptions(r.sampling(), r.priority(), r.logprobs(), r.top_logprobs(), &out));
  RETURN_IF_ERROR(CheckTokenIds(r.prompt_token_ids(), "prompt_token_ids", limits.vocab_size));
  PromptIds prompt{{r.prompt_token_ids().begin(), r.prompt_token_ids().end()}, "prompt_token_ids"};
  RETURN_IF_ERROR(FinishPrompt(std::move(prompt), r.stopping(), limits, &out));
  return out;
}

absl::StatusOr<engine::GenerationRequest> FromGenerateRequest(const v1::GenerateRequest& r,
                                                              const RequestLimits& limits,
                                                              const engine::Tokenizer& tokenizer) {
  RETURN_IF_ERROR(CheckSize(r, limits));
  RETURN_IF_ERROR(CheckModel(r.model(), limits));
  engine::GenerationRequest out;
  out.request_id = r.request_id();
  RETURN_IF_ERROR(ConvertOptions(r.sampling(), r.priority(), r.logprobs(), r.top_logprobs(), &out));
  ASSIGN_OR_RETURN(PromptIds prompt, EncodeInput(r, limits, tokenizer));
  RETURN_IF_ERROR(FinishPrompt(std::move(prompt), r.stopping(), limits, &out));
  return out;
}

absl::StatusOr<std::vector<int32_t>> TokenizeInput(const v1::TokenizeRequest& r,
                                                   const RequestLimits& limits,
                                                   const engine::Tokenizer& tokenizer) {
  RETURN_IF_ERROR(CheckSize(r, limits));
  RETURN_IF_ERROR(CheckModel(r.model(), limits));
  ASSIGN_OR_RETURN(PromptIds prompt,
                   EncodeText(r.input_case() == v1::TokenizeRequest::kPrompt, r.prompt(),
                              r.has_messages() ? &r.messages() : nullptr, tokenizer));
  return std::move(prompt.ids);
}

}  // namespace onecard::services
