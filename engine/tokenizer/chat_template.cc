// ChatTemplate (declared in tokenizer.h): ChatML and Llama-3 renderings that
// reproduce what HF's apply_chat_template gives for those models' Jinja
// templates, and the choice between them from a template's source.
// Tested by tests/engine/tokenizer/chat_template_test.cc against HF renderings.
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/utf8.h"

namespace onecard::engine {
namespace {

constexpr std::string_view kImStartSystem = "<|im_start|>system";
constexpr std::string_view kImEnd = "<|im_end|>";

// Jinja's `trim` (Python str.strip()): drops whitespace at both ends.
std::string_view Trim(std::string_view s) {
  const auto space_at = [&](size_t pos, int* len) {
    uint32_t cp = 0;
    int prefix = 0;
    *len = DecodeUtf8(s, pos, &cp, &prefix);
    return *len > 0 && (IsUnicodeWhitespace(cp) || (cp >= 0x1C && cp <= 0x1F));
  };
  int len = 0;
  while (!s.empty() && space_at(0, &len)) s.remove_prefix(len);
  while (!s.empty()) {
    size_t start = s.size() - 1;
    while (start > 0 && (static_cast<uint8_t>(s[start]) & 0xC0) == 0x80) --start;
    if (!space_at(start, &len)) break;
    s.remove_suffix(s.size() - start);
  }
  return s;
}

// The system prompt a ChatML template writes when messages[0] is not a
// system message: the literal "<|im_start|>system\n...<|im_end|>" whose body
// holds no quote (so it is not built from a message's content).
std::string DefaultSystemPrompt(std::string_view source) {
  size_t pos = 0;
  while ((pos = source.find(kImStartSystem, pos)) != std::string_view::npos) {
    pos += kImStartSystem.size();
    std::string_view rest = source.substr(pos);
    size_t newline = 0;
    if (rest.starts_with("\n")) newline = 1;
    if (rest.starts_with("\\n")) newline = 2;
    if (newline == 0) continue;
    rest.remove_prefix(newline);
    const size_t end = rest.find(kImEnd);
    if (end == std::string_view::npos) continue;
    const std::string_view body = rest.substr(0, end);
    if (body.find_first_of("'\"") != std::string_view::npos) continue;
    return absl::StrReplaceAll(std::string(body), {{"\\n", "\n"}});
  }
  return "";
}

absl::Status CheckMessages(const std::vector<ChatMessage>& messages) {
  if (messages.empty()) return absl::InvalidArgumentError("messages: empty");
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& role = messages[i].role;
    if (role != "system" && role != "user" && role != "assistant") {
      return absl::InvalidArgumentError(absl::StrCat("messages[", i, "].role: unknown role '", role,
                                                     "' (system, user, assistant)"));
    }
    if (!IsValidUtf8(messages[i].content)) {
      return absl::InvalidArgumentError(absl::StrCat("messages[", i, "].content: not valid UTF-8"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ChatTemplate> ChatTemplate::FromSource(std::string_view source,
                                                      std::string bos_token) {
  if (source.find("<|im_start|>") != std::string_view::npos) {
    return ChatTemplate(ChatTemplateKind::kChatML, DefaultSystemPrompt(source));
  }
  if (source.find("<|start_header_id|>") != std::string_view::npos) {
    if (source.find("Cutting Knowledge Date") != std::string_view::npos) {
      return absl::InvalidArgumentError(
          "chat_template: Llama-3.1-style templates (with a dated system "
          "header) are not "
          "supported (supported: ChatML, Llama-3)");
    }
    return ChatTemplate(ChatTemplateKind::kLlama3, "", std::move(bos_token));
  }
  return absl::InvalidArgumentError(
      "chat_template: not recognised (supported: "
      "ChatML with <|im_start|>, Llama-3 with "
      "<|start_header_id|>)");
}

absl::StatusOr<ChatTemplate> ChatTemplate::ForTokenizer(const Tokenizer& tokenizer) {
  std::string bos = "<|begin_of_text|>";
  if (tokenizer.bos_id() >= 0) bos = tokenizer.TokenBytes(tokenizer.bos_id());
  if (!tokenizer.chat_template().empty()) return FromSource(tokenizer.chat_template(), bos);
  if (tokenizer.TokenId("<|im_start|>") >= 0) return ChatTemplate(ChatTemplateKind::kChatML);
  if (tokenizer.TokenId("<|start_header_id|>") >= 0) {
    return ChatTemplate(ChatTemplateKind::kLlama3, "", bos);
  }
  return absl::NotFoundError(
      "chat_template: the model has none, and its "
      "vocabulary has neither <|im_start|> nor "
      "<|start_header_id|>");
}

std::string ChatTemplate::RenderChatML(const std::vector<ChatMessage>& messages,
                                       bool add_generation_prompt) const {
  std::string out;
  if (messages[0].role != "system" && !default_system_.empty()) {
    absl::StrAppend(&out, "<|im_start|>system\n", default_system_, "<|im_end|>\n");
  }
  for (const ChatMessage& m : messages) {
    absl::StrAppend(&out, "<|im_start|>", m.role, "\n", m.content, "<|im_end|>\n");
  }
  if (add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

std::string ChatTemplate::RenderLlama3(const std::vector<ChatMessage>& messages,
                                       bool add_generation_prompt) const {
  std::string out = bos_token_;
  for (const ChatMessage& m : messages) {
    absl::StrAppend(&out, "<|start_header_id|>", m.role, "<|end_header_id|>\n\n",
                    std::string(Trim(m.content)), "<|eot_id|>");
  }
  if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

absl::StatusOr<std::string> ChatTemplate::Render(const std::vector<ChatMessage>& messages,
                                                 bool add_generation_prompt) const {
  if (absl::Status s = CheckMessages(messages); !s.ok()) return s;
  switch (kind_) {
    case ChatTemplateKind::kChatML:
      return RenderChatML(messages, add_generation_prompt);
    case ChatTemplateKind::kLlama3:
      return RenderLlama3(messages, add_generation_prompt);
  }
  return absl::InternalError("chat template: unknown kind");
}

}  // namespace onecard::engine
