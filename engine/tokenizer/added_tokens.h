// AddedTokens: the tokens matched whole in the input before pre-tokenization
// (special tokens such as <|im_start|>, and HF "added_tokens"), with HF
// tokenizers' semantics: leftmost-longest matching, first the tokens with
// normalized=false over the whole text, then those with normalized=true over
// the gaps; single_word (no word character may touch the match), lstrip and
// rstrip (the token swallows the whitespace beside it).
// Tested by tests/engine/tokenizer/added_tokens_test.cc.
#ifndef ONECARD_ENGINE_TOKENIZER_ADDED_TOKENS_H_
#define ONECARD_ENGINE_TOKENIZER_ADDED_TOKENS_H_

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace onecard::engine {

struct AddedToken {
  int32_t id = -1;
  std::string content;   // the text as written in the input
  bool special = false;  // skipped by Decode(skip_special_tokens)
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;
};

// A piece of the input: either an added token (id >= 0) or text to encode.
struct TextSegment {
  size_t begin = 0;
  size_t end = 0;
  int32_t id = -1;
};

class AddedTokens {
 public:
  AddedTokens() = default;
  explicit AddedTokens(std::vector<AddedToken> tokens);

  // Splits `text` into segments that cover it in order; text segments are
  // never empty. Both passes, for tokenizers without a normalizer.
  std::vector<TextSegment> Split(std::string_view text) const;
  // The first pass alone (tokens with normalized == false) ...
  std::vector<TextSegment> SplitRaw(std::string_view text) const;
  // ... and the second (normalized == true), run on each normalized text segment.
  std::vector<TextSegment> SplitNormalized(std::string_view text) const;

  const AddedToken* FindById(int32_t id) const;
  const AddedToken* FindByContent(std::string_view content) const;
  const std::vector<AddedToken>& tokens() const { return tokens_; }

 private:
  // Tokens of one matching pass, bucketed by their first byte.
  struct Pass {
    std::array<std::vector<int32_t>, 256> by_first_byte;  // indices into tokens_
    bool empty = true;
  };
  void SplitPass(const Pass& pass, std::string_view text, size_t offset,
                 std::vector<TextSegment>* out) const;
  // The longest token of `pass` that starts at text[pos], or -1.
  int32_t LongestAt(const Pass& pass, std::string_view text, size_t pos) const;

  std::vector<AddedToken> tokens_;
  absl::flat_hash_map<int32_t, size_t> by_id_;
  absl::flat_hash_map<std::string, size_t> by_content_;
  Pass raw_pass_;         // normalized == false
  Pass normalized_pass_;  // normalized == true
};

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_TOKENIZER_ADDED_TOKENS_H_
