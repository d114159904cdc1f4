// Wire <-> engine request conversion (see request_convert.h).
// Tested by tests/services/common/request_convert_test.cc.
#include "services/common/request_convert.h"

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

uint64_t RandomSeed() {
  thread_local absl::BitGen gen;
  return absl::Uniform<uint64_t>(gen);
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

absl::StatusOr<PromptIds> EncodeChat(const v1::ChatMessages& messages,
                                     const engine::Tokenizer& tokenizer,
                                     const engine::ChatTemplate* chat_template) {
  if (messages.messages_size() == 0) return Invalid("messages", "empty");
  if (chat_template == nullptr) return Invalid("messages", "the model has no chat template");
  std::vector<engine::ChatMessage> chat;
  for (const v1::ChatMessage& m : messages.messages()) chat.push_back({m.role(), m.content()});
  ASSIGN_OR_RETURN(std::string text, chat_template->Render(chat, /*add_generation_prompt=*/true));
  // The template writes the special tokens itself (HF: add_special_tokens=False).
  return PromptIds{tokenizer.Encode(text, /*add_special_tokens=*/false), "messages"};
}

absl::StatusOr<PromptIds> EncodePrompt(const std::string& prompt,
                                       const engine::Tokenizer& tokenizer) {
  if (prompt.empty()) return Invalid("prompt", "empty");
  return PromptIds{tokenizer.Encode(prompt, /*add_special_tokens=*/true), "prompt"};
}

// The fields GenerateRequest and WorkerGenerateRequest share.
struct CommonFields {
  const std::string& request_id;
  const v1::SamplingParams& sampling;
  const v1::StoppingCriteria& stopping;
  v1::Priority priority;
  bool logprobs;
  int32_t top_logprobs;
};

engine::SamplingParams ConvertSampling(const v1::SamplingParams& p) {
  engine::SamplingParams out;
  if (p.has_temperature()) out.temperature = p.temperature();
  out.top_k = p.top_k();
  if (p.has_top_p()) out.top_p = p.top_p();
  out.min_p = p.min_p();
  if (p.has_repetition_penalty()) out.repetition_penalty = p.repetition_penalty();
  out.presence_penalty = p.presence_penalty();
  out.frequency_penalty = p.frequency_penalty();
  out.seed = p.has_seed() ? p.seed() : RandomSeed();
  return out;
}

absl::StatusOr<engine::GenerationRequest> Convert(const CommonFields& f,
                                                  std::vector<int32_t> prompt_ids,
                                                  const engine::RequestLimits& limits) {
  if (!v1::Priority_IsValid(f.priority)) {
    return Invalid("priority", absl::StrCat("unknown value ", static_cast<int>(f.priority)));
  }
  engine::GenerationRequest out;
  out.request_id = f.request_id;
  out.sampling = ConvertSampling(f.sampling);
  const v1::StoppingCriteria& s = f.stopping;
  out.stopping.max_tokens =
      s.has_max_tokens()
          ? s.max_tokens()
          : engine::DefaultMaxTokens(static_cast<int64_t>(prompt_ids.size()), limits);
  out.stopping.stop_strings.assign(s.stop_strings().begin(), s.stop_strings().end());
  out.stopping.stop_token_ids.assign(s.stop_token_ids().begin(), s.stop_token_ids().end());
  out.stopping.ignore_eos = s.ignore_eos();
  out.stopping.min_tokens = s.min_tokens();
  out.priority = EnginePriority(f.priority);
  out.logprobs = f.logprobs;
  out.top_logprobs = f.top_logprobs;
  out.prompt_token_ids = std::move(prompt_ids);
  return out;
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

absl::Status CheckModel(const std::string& model, const std::string& served) {
  if (model.empty() || model == served) return absl::OkStatus();
  return absl::NotFoundError(
      absl::StrCat("model: unknown model \"", model, "\"; this server serves \"", served, "\""));
}

absl::Status CheckRequestSize(const google::protobuf::Message& request, int64_t max_bytes) {
  const size_t size = request.ByteSizeLong();
  if (static_cast<int64_t>(size) <= max_bytes) return absl::OkStatus();
  return Invalid(LargestField(request), absl::StrCat("the request is ", size, " bytes, over the ",
                                                     max_bytes, "-byte limit"));
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

absl::StatusOr<PromptIds> EncodeInput(const v1::GenerateRequest& r,
                                      const engine::Tokenizer& tokenizer,
                                      const engine::ChatTemplate* chat_template) {
  switch (r.input_case()) {
    case v1::GenerateRequest::kPrompt:
      return EncodePrompt(r.prompt(), tokenizer);
    case v1::GenerateRequest::kMessages:
      return EncodeChat(r.messages(), tokenizer, chat_template);
    case v1::GenerateRequest::kTokenIds:
      return PromptIds{{r.token_ids().ids().begin(), r.token_ids().ids().end()}, "token_ids.ids"};
    case v1::GenerateRequest::INPUT_NOT_SET:
      break;
  }
  return Invalid("input", "set one of prompt, messages, token_ids");
}

absl::StatusOr<PromptIds> EncodeInput(const v1::TokenizeRequest& r,
                                      const engine::Tokenizer& tokenizer,
                                      const engine::ChatTemplate* chat_template) {
  switch (r.input_case()) {
    case v1::TokenizeRequest::kPrompt:
      return EncodePrompt(r.prompt(), tokenizer);
    case v1::TokenizeRequest::kMessages:
      return EncodeChat(r.messages(), tokenizer, chat_template);
    case v1::TokenizeRequest::INPUT_NOT_SET:
      break;
  }
  return Invalid("input", "set one of prompt, messages");
}

absl::StatusOr<engine::GenerationRequest> ToEngineRequest(const v1::GenerateRequest& r,
                                                          std::vector<int32_t> prompt_ids,
                                                          const engine::RequestLimits& limits) {
  return Convert(
      {r.request_id(), r.sampling(), r.stopping(), r.priority(), r.logprobs(), r.top_logprobs()},
      std::move(prompt_ids), limits);
}

absl::StatusOr<engine::GenerationRequest> ToEngineRequest(const v1::WorkerGenerateRequest& r,
                                                          const engine::RequestLimits& limits) {
  return Convert(
      {r.request_id(), r.sampling(), r.stopping(), r.priority(), r.logprobs(), r.top_logprobs()},
      {r.prompt_token_ids().begin(), r.prompt_token_ids().end()}, limits);
}

v1::WorkerGenerateRequest ToWorkerRequest(const engine::GenerationRequest& r,
                                          const std::string& model) {
  v1::WorkerGenerateRequest w;
  w.set_request_id(r.request_id);
  w.set_model(model);
  w.mutable_prompt_token_ids()->Add(r.prompt_token_ids.begin(), r.prompt_token_ids.end());
  v1::SamplingParams* s = w.mutable_sampling();
  s->set_temperature(r.sampling.temperature);
  s->set_top_k(r.sampling.top_k);
  s->set_top_p(r.sampling.top_p);
  s->set_min_p(r.sampling.min_p);
  s->set_repetition_penalty(r.sampling.repetition_penalty);
  s->set_presence_penalty(r.sampling.presence_penalty);
  s->set_frequency_penalty(r.sampling.frequency_penalty);
  s->set_seed(r.sampling.seed);
  v1::StoppingCriteria* stop = w.mutable_stopping();
  stop->set_max_tokens(r.stopping.max_tokens);
  stop->mutable_stop_strings()->Add(r.stopping.stop_strings.begin(), r.stopping.stop_strings.end());
  stop->mutable_stop_token_ids()->Add(r.stopping.stop_token_ids.begin(),
                                      r.stopping.stop_token_ids.end());
  stop->set_ignore_eos(r.stopping.ignore_eos);
  stop->set_min_tokens(r.stopping.min_tokens);
  w.set_priority(ProtoPriority(r.priority));
  w.set_logprobs(r.logprobs);
  w.set_top_logprobs(r.top_logprobs);
  return w;
}

}  // namespace onecard::services
