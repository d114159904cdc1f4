// PreTokenizer: splits text into the words BPE encodes, with the regexes of
// GPT-2, Llama-3, Qwen2 and SmolLM2 (PCRE2 in UTF + UCP mode, JIT-compiled
// when PCRE2 has a JIT). Every stage isolates its matches; text between
// matches stays a word of its own, so the words always cover the input.
// Also maps GGUF `tokenizer.ggml.pre` names to kinds.
// Tested by tests/engine/tokenizer/pre_tokenizer_test.cc.
#ifndef ONECARD_ENGINE_TOKENIZER_PRE_TOKENIZER_H_
#define ONECARD_ENGINE_TOKENIZER_PRE_TOKENIZER_H_

#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/tokenizer/tokenizer.h"

namespace onecard::engine {

// The regexes (Perl syntax), as written in the models' tokenizer.json files.
inline constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
inline constexpr std::string_view kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|)"
    R"( ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
inline constexpr std::string_view kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|)"
    R"( ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// SmolLM2 first isolates every numeric character (HF's Digits pre-tokenizer).
inline constexpr std::string_view kDigitPattern = R"(\p{N})";

class PreTokenizer {
 public:
  static absl::StatusOr<std::unique_ptr<PreTokenizer>> Create(PreTokenizerKind kind);
  ~PreTokenizer();
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;

  // Appends the words of `text` (views into it, in order, none empty) to
  // *words. Thread-safe.
  void Split(std::string_view text, std::vector<std::string_view>* words) const;
  PreTokenizerKind kind() const { return kind_; }

 private:
  class Regex;
  explicit PreTokenizer(PreTokenizerKind kind);
  void SplitStage(size_t stage, std::string_view text, std::vector<std::string_view>* words) const;

  PreTokenizerKind kind_;
  std::vector<std::unique_ptr<Regex>> stages_;  // applied in order
};

// "gpt2"/"gpt-2", "llama3"/"llama-v3"/"llama-bpe", "qwen2", "smollm";
// anything else is InvalidArgument naming tokenizer.ggml.pre.
absl::StatusOr<PreTokenizerKind> PreTokenizerKindFromGgufName(std::string_view name);
std::string_view PreTokenizerKindName(PreTokenizerKind kind);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_TOKENIZER_PRE_TOKENIZER_H_
