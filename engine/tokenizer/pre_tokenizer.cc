// PCRE2-backed pre-tokenizers (see pre_tokenizer.h).
// Tested by tests/engine/tokenizer/pre_tokenizer_test.cc.
#include "engine/tokenizer/pre_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/common/log.h"
#include "engine/tokenizer/utf8.h"

namespace onecard::engine {

// One compiled pattern. pcre2_code is read-only once compiled (JIT included),
// so one Regex serves every thread; match data is made per call.
class PreTokenizer::Regex {
 public:
  static absl::StatusOr<std::unique_ptr<Regex>> Compile(std::string_view pattern) {
    int error = 0;
    PCRE2_SIZE offset = 0;
    pcre2_code* code =
        pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                      PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &error, &offset, nullptr);
    if (code == nullptr) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(error, message, sizeof(message));
      return absl::InternalError(absl::StrCat("pre-tokenizer regex does not compile at offset ",
                                              offset, ": ",
                                              reinterpret_cast<const char*>(message)));
    }
    // Without a JIT (or on failure) pcre2_match interprets: slower, same
    // result.
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
    return std::unique_ptr<Regex>(new Regex(code));
  }
  ~Regex() { pcre2_code_free(code_); }

  // Splits `text` into matches and the gaps between them, in order.
  void Split(std::string_view text, std::vector<std::string_view>* out) const {
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(code_, nullptr);
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    size_t pos = 0;
    size_t gap_start = 0;
    while (pos < text.size()) {
      // The text is valid UTF-8 (PreTokenizer::Split checks it once).
      int rc = pcre2_match(code_, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, md, nullptr);
      if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {  // the interpreter has a larger
                                               // (heap) budget
        rc = pcre2_match(code_, subject, text.size(), pos, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md,
                         nullptr);
      }
      if (rc == PCRE2_ERROR_NOMATCH) break;  // the rest is a gap
      if (rc < 0) {  // a resource limit: keep the rest as one word (no byte is lost)
        Log(LogLevel::kWarn, "tokenizer", "pre-tokenizer regex error %d at byte %d of %d", rc,
            static_cast<int64_t>(pos), static_cast<int64_t>(text.size()));
        break;
      }
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
      const size_t begin = ov[0];
      const size_t end = ov[1];
      if (end == begin) {  // an empty match: step over one character
        pos = begin + 1;
        while (pos < text.size() && (static_cast<uint8_t>(text[pos]) & 0xC0) == 0x80) ++pos;
        continue;
      }
      if (begin > gap_start) out->push_back(text.substr(gap_start, begin - gap_start));
      out->push_back(text.substr(begin, end - begin));
      gap_start = pos = end;
    }
    if (gap_start < text.size()) out->push_back(text.substr(gap_start));
    pcre2_match_data_free(md);
  }

 private:
  explicit Regex(pcre2_code* code) : code_(code) {}
  pcre2_code* code_;
};

PreTokenizer::PreTokenizer(PreTokenizerKind kind) : kind_(kind) {}
PreTokenizer::~PreTokenizer() = default;

absl::StatusOr<std::unique_ptr<PreTokenizer>> PreTokenizer::Create(PreTokenizerKind kind) {
  std::vector<std::string_view> patterns;
  switch (kind) {
    case PreTokenizerKind::kGpt2:
      patterns = {kGpt2Pattern};
      break;
    case PreTokenizerKind::kLlama3:
      patterns = {kLlama3Pattern};
      break;
    case PreTokenizerKind::kQwen2:
      patterns = {kQwen2Pattern};
      break;
    case PreTokenizerKind::kSmolLM:
      patterns = {kDigitPattern, kGpt2Pattern};
      break;
  }
  auto pre = std::unique_ptr<PreTokenizer>(new PreTokenizer(kind));
  for (const std::string_view pattern : patterns) {
    auto regex = Regex::Compile(pattern);
    if (!regex.ok()) return regex.status();
    pre->stages_.push_back(*std::move(regex));
  }
  return pre;
}

void PreTokenizer::SplitStage(size_t stage, std::string_view text,
                              std::vector<std::string_view>* words) const {
  if (stage + 1 == stages_.size()) {
    stages_[stage]->Split(text, words);
    return;
  }
  std::vector<std::string_view> pieces;
  stages_[stage]->Split(text, &pieces);
  for (const std::string_view piece : pieces) SplitStage(stage + 1, piece, words);
}

void PreTokenizer::Split(std::string_view text, std::vector<std::string_view>* words) const {
  if (IsValidUtf8(text)) {
    if (!text.empty()) SplitStage(0, text, words);
    return;
  }
  // Invalid UTF-8 (which no HF input can hold): the valid runs are split as
  // usual and each run of invalid bytes is a word of its own, encoded bytewise.
  size_t pos = 0;
  size_t run_start = 0;
  while (pos < text.size()) {
    uint32_t cp = 0;
    int prefix = 0;
    const int len = DecodeUtf8(text, pos, &cp, &prefix);
    if (len > 0) {
      pos += len;
      continue;
    }
    if (pos > run_start) SplitStage(0, text.substr(run_start, pos - run_start), words);
    const size_t bad = prefix > 0 ? prefix : 1;
    words->push_back(text.substr(pos, bad));
    pos += bad;
    run_start = pos;
  }
  if (pos > run_start) SplitStage(0, text.substr(run_start, pos - run_start), words);
}

absl::StatusOr<PreTokenizerKind> PreTokenizerKindFromGgufName(std::string_view name) {
  if (name == "gpt2" || name == "gpt-2") return PreTokenizerKind::kGpt2;
  if (name == "llama3" || name == "llama-v3" || name == "llama-bpe") {
    return PreTokenizerKind::kLlama3;
  }
  if (name == "qwen2") return PreTokenizerKind::kQwen2;
  if (name == "smollm") return PreTokenizerKind::kSmolLM;
  return absl::InvalidArgumentError(
      absl::StrCat("tokenizer.ggml.pre: unsupported pre-tokenizer '", std::string(name),
                   "' (supported: gpt2, gpt-2, llama3, llama-v3, llama-bpe, qwen2, "
                   "smollm)"));
}

std::string_view PreTokenizerKindName(PreTokenizerKind kind) {
  switch (kind) {
    case PreTokenizerKind::kGpt2:
      return "gpt2";
    case PreTokenizerKind::kLlama3:
      return "llama3";
    case PreTokenizerKind::kQwen2:
      return "qwen2";
    case PreTokenizerKind::kSmolLM:
      return "smollm";
  }
  return "unknown";
}

}  // namespace onecard::engine
