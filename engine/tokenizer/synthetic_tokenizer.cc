// MakeSyntheticTokenizer (see synthetic_tokenizer.h).
// Tested by tests/engine/tokenizer/synthetic_tokenizer_test.cc.
#include "engine/tokenizer/synthetic_tokenizer.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/tokenizer/utf8.h"

namespace onecard::engine {
namespace {

constexpr int32_t kImStart = 256;
constexpr int32_t kImEnd = 257;
constexpr int32_t kFirstFree = 258;

class SyntheticTokenizer : public Tokenizer {
 public:
  explicit SyntheticTokenizer(const ModelConfig& config)
      : vocab_size_(static_cast<int32_t>(config.vocab_size)) {
    specials_ = {{kImStart, "<|im_start|>"}, {kImEnd, "<|im_end|>"}};
    if (Usable(config.bos_token_id)) {
      bos_ = static_cast<int32_t>(config.bos_token_id);
      specials_.push_back({bos_, "<|begin_of_text|>"});
    }
    eos_ = kImEnd;
    if (Usable(config.eos_token_id) && config.eos_token_id != bos_) {
      eos_ = static_cast<int32_t>(config.eos_token_id);
      specials_.push_back({eos_, "<|end_of_text|>"});
    }
    stop_ids_ = {eos_};
    if (eos_ != kImEnd) stop_ids_.push_back(kImEnd);
  }

  std::vector<int32_t> Encode(std::string_view text, bool add_special_tokens) const override {
    std::vector<int32_t> ids;
    if (add_special_tokens && bos_ >= 0) ids.push_back(bos_);
    size_t i = 0;
    while (i < text.size()) {
      const int32_t special = SpecialAt(text.substr(i));
      if (special >= 0) {
        ids.push_back(special);
        i += TokenBytes(special).size();
      } else {
        ids.push_back(static_cast<unsigned char>(text[i++]));
      }
    }
    return ids;
  }

  std::string Decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const override {
    std::string bytes;
    for (int32_t id : ids) {
      if (skip_special_tokens && IsSpecial(id)) continue;
      bytes += TokenBytes(id);
    }
    return Utf8Lossy(bytes);
  }

  std::string TokenBytes(int32_t id) const override {
    if (id < 0 || id >= vocab_size_) return "";
    if (id < kImStart) return std::string(1, static_cast<char>(id));
    for (const auto& [special, text] : specials_) {
      if (special == id) return text;
    }
    return absl::StrCat("<", id, ">");
  }

  int32_t TokenId(std::string_view token) const override {
    for (const auto& [special, text] : specials_) {
      if (text == token) return special;
    }
    if (token.size() == 1) return static_cast<unsigned char>(token[0]);
    return -1;
  }

  bool IsSpecial(int32_t id) const override {
    return std::any_of(specials_.begin(), specials_.end(),
                       [id](const auto& s) { return s.first == id; });
  }

  int32_t vocab_size() const override { return vocab_size_; }
  int32_t bos_id() const override { return bos_; }
  int32_t eos_id() const override { return eos_; }
  const std::vector<int32_t>& stop_ids() const override { return stop_ids_; }
  const std::string& chat_template() const override { return chat_template_; }

 private:
  bool Usable(int32_t id) const { return id >= kFirstFree && id < vocab_size_; }

  // The special token whose text starts `text`; -1 when none.
  int32_t SpecialAt(std::string_view text) const {
    for (const auto& [special, token] : specials_) {
      if (text.starts_with(token)) return special;
    }
    return -1;
  }

  int32_t vocab_size_;
  int32_t bos_ = -1;
  int32_t eos_ = kImEnd;
  std::vector<std::pair<int32_t, std::string>> specials_;
  std::vector<int32_t> stop_ids_;
  std::string chat_template_;  // none: ChatTemplate::ForTokenizer finds <|im_start|>
};

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> MakeSyntheticTokenizer(const ModelConfig& config) {
  if (config.vocab_size < kFirstFree) {
    return absl::InvalidArgumentError(absl::StrCat("synthetic tokenizer: vocab_size ",
                                                   config.vocab_size, " < ", kFirstFree,
                                                   " (the 256 bytes and two special tokens)"));
  }
  return std::make_unique<SyntheticTokenizer>(config);
}

}  // namespace onecard::engine
