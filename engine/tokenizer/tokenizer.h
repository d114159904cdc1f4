// Tokenizer: byte-level BPE (GPT-2 / SmolLM2, Llama-3 and Qwen2 pre-tokenizer
// patterns) built from GGUF metadata or an HF tokenizer.json, with special and
// added tokens. IncrementalDetokenizer streams text that never splits a UTF-8
// character. ChatTemplate renders chat messages (ChatML, Llama-3).
// Tested by tests/engine/tokenizer/*_test.cc against HF tokenizers goldens.
#ifndef ONECARD_ENGINE_TOKENIZER_TOKENIZER_H_
#define ONECARD_ENGINE_TOKENIZER_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace onecard::engine {

class GgufFile;
struct Checkpoint;

// How text is split into words before BPE (engine/tokenizer/pre_tokenizer.h
// holds the patterns). kSmolLM is GPT-2's pattern after isolating every digit
// (HF: Digits(individual_digits) + ByteLevel; GGUF pre "smollm").
enum class PreTokenizerKind { kGpt2, kLlama3, kQwen2, kSmolLM };

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // From GGUF metadata (tokenizer.ggml.model == "gpt2": tokens, merges,
  // token_type, pre, bos/eos ids, chat_template).
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromGguf(const GgufFile& gguf);
  // From an HF tokenizer.json (model.type == "BPE", byte-level); the optional
  // tokenizer_config.json supplies bos/eos and the chat template.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromHfJson(
      const std::string& tokenizer_json_path, const std::string& tokenizer_config_path = "");

  // Encodes text. Special/added tokens written in the text are matched as
  // whole tokens (HF behaviour). add_bos prepends bos when the model has one
  // and its config asks for it (add_bos_token).
  virtual std::vector<int32_t> Encode(std::string_view text, bool add_special_tokens) const = 0;
  // Decodes ids to text; special tokens are kept unless skip_special_tokens.
  virtual std::string Decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const = 0;
  // The raw bytes of one token (byte-level decoded); empty for unknown ids.
  virtual std::string TokenBytes(int32_t id) const = 0;
  // Looks up a token by its string form (e.g. "<|im_end|>"); -1 when absent.
  virtual int32_t TokenId(std::string_view token) const = 0;
  virtual bool IsSpecial(int32_t id) const = 0;

  virtual int32_t vocab_size() const = 0;
  virtual int32_t bos_id() const = 0;  // -1 when none
  virtual int32_t eos_id() const = 0;  // -1 when none
  // Every id that ends generation (eos, <|im_end|>, <|eot_id|>, ...).
  virtual const std::vector<int32_t>& stop_ids() const = 0;
  virtual const std::string& chat_template() const = 0;  // raw Jinja source, may be empty
};

// The tokenizer of an opened checkpoint: a GGUF file's metadata (FromGguf),
// a synthetic model's (synthetic_tokenizer.h), else the HF folder's
// tokenizer files (FromHfJson).
absl::StatusOr<std::unique_ptr<Tokenizer>> OpenTokenizer(const Checkpoint& checkpoint);

// Streams text for a growing list of ids: each Add returns the new, complete
// UTF-8 text; bytes of an unfinished character wait for the next token.
class IncrementalDetokenizer {
 public:
  IncrementalDetokenizer(const Tokenizer* tokenizer, bool skip_special_tokens);
  std::string Add(int32_t id);
  std::string Flush();  // whatever is left (invalid bytes as U+FFFD)
 private:
  const Tokenizer* tokenizer_;
  bool skip_special_tokens_;
  std::string pending_;
};

struct ChatMessage {
  std::string role;  // "system", "user", "assistant"
  std::string content;
};

enum class ChatTemplateKind { kChatML, kLlama3 };

// Renders messages plus the assistant prompt header. The kind is chosen from
// the model's template source (see ChooseChatTemplate).
class ChatTemplate {
 public:
  // Chooses from tokenizer.chat_template(): ChatML when it writes
  // <|im_start|>, Llama-3 when it writes <|start_header_id|>. With no template
  // the vocabulary decides the same way; anything else is InvalidArgument.
  static absl::StatusOr<ChatTemplate> ForTokenizer(const Tokenizer& tokenizer);
  // The same choice from a Jinja source alone (bos_token for Llama-3).
  static absl::StatusOr<ChatTemplate> FromSource(std::string_view source,
                                                 std::string bos_token = "<|begin_of_text|>");
  // default_system: the system prompt ChatML templates insert when
  // messages[0] is not a system message (empty: none). bos_token: the text
  // Llama-3 templates start with.
  explicit ChatTemplate(ChatTemplateKind kind, std::string default_system = "",
                        std::string bos_token = "<|begin_of_text|>")
      : kind_(kind), default_system_(std::move(default_system)), bos_token_(std::move(bos_token)) {}
  // InvalidArgument naming messages[i].role for unknown roles,
  // messages[i].content for content that is not valid UTF-8, or "messages"
  // when the list is empty.
  absl::StatusOr<std::string> Render(const std::vector<ChatMessage>& messages,
                                     bool add_generation_prompt) const;
  ChatTemplateKind kind() const { return kind_; }
  const std::string& default_system() const { return default_system_; }

 private:
  std::string RenderChatML(const std::vector<ChatMessage>& messages,
                           bool add_generation_prompt) const;
  std::string RenderLlama3(const std::vector<ChatMessage>& messages,
                           bool add_generation_prompt) const;

  ChatTemplateKind kind_;
  std::string default_system_;
  std::string bos_token_;
};

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_TOKENIZER_TOKENIZER_H_
