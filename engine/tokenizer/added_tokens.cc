// Matching of added tokens in input text (see added_tokens.h), following HF
// tokenizers' AddedVocabulary::find_matches. Tested by
// tests/engine/tokenizer/added_tokens_test.cc.
#include "engine/tokenizer/added_tokens.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>

#include "engine/tokenizer/utf8.h"

namespace onecard::engine {
namespace {

// Whether the character at text[pos, pos + len) is a word character as the
// Rust regex crate's Unicode \w has it (alphabetic, marks, decimal digits,
// connector punctuation, joiners).
bool IsWordChar(std::string_view ch) {
  static pcre2_code* const kWord = [] {
    int error = 0;
    PCRE2_SIZE offset = 0;
    static constexpr char kPattern[] = R"([\p{L}\p{Nl}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D}])";
    return pcre2_compile(reinterpret_cast<PCRE2_SPTR>(kPattern), PCRE2_ZERO_TERMINATED,
                         PCRE2_UTF | PCRE2_UCP | PCRE2_ANCHORED, &error, &offset, nullptr);
  }();
  if (kWord == nullptr || ch.empty()) return false;
  pcre2_match_data* md = pcre2_match_data_create(1, nullptr);
  const int rc =
      pcre2_match(kWord, reinterpret_cast<PCRE2_SPTR>(ch.data()), ch.size(), 0, 0, md, nullptr);
  pcre2_match_data_free(md);
  return rc > 0;
}

// The last character of text (empty if none or invalid).
std::string_view LastChar(std::string_view text) {
  size_t start = text.size();
  while (start > 0) {
    --start;
    if ((static_cast<uint8_t>(text[start]) & 0xC0) != 0x80) break;
  }
  return text.substr(start);
}

std::string_view FirstChar(std::string_view text) {
  if (text.empty()) return text;
  uint32_t cp = 0;
  int prefix = 0;
  const int len = DecodeUtf8(text, 0, &cp, &prefix);
  return text.substr(0, len > 0 ? len : 1);
}

bool IsSpaceChar(std::string_view ch) {
  uint32_t cp = 0;
  int prefix = 0;
  return !ch.empty() && DecodeUtf8(ch, 0, &cp, &prefix) > 0 && IsUnicodeWhitespace(cp);
}

// Where the run of whitespace that ends `text` begins.
size_t TrailingSpaceStart(std::string_view text) {
  size_t end = text.size();
  while (end > 0) {
    const std::string_view ch = LastChar(text.substr(0, end));
    if (!IsSpaceChar(ch)) break;
    end -= ch.size();
  }
  return end;
}

// The length of the run of whitespace that starts `text`.
size_t LeadingSpaceLength(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    const std::string_view ch = FirstChar(text.substr(pos));
    if (!IsSpaceChar(ch)) break;
    pos += ch.size();
  }
  return pos;
}

}  // namespace

AddedTokens::AddedTokens(std::vector<AddedToken> tokens) : tokens_(std::move(tokens)) {
  for (size_t i = 0; i < tokens_.size(); ++i) {
    const AddedToken& t = tokens_[i];
    by_id_.try_emplace(t.id, i);
    by_content_.try_emplace(t.content, i);
    if (t.content.empty()) continue;
    Pass& pass = t.normalized ? normalized_pass_ : raw_pass_;
    pass.by_first_byte[static_cast<uint8_t>(t.content[0])].push_back(static_cast<int32_t>(i));
    pass.empty = false;
  }
}

const AddedToken* AddedTokens::FindById(int32_t id) const {
  const auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

const AddedToken* AddedTokens::FindByContent(std::string_view content) const {
  const auto it = by_content_.find(absl::string_view(content.data(), content.size()));
  return it == by_content_.end() ? nullptr : &tokens_[it->second];
}

int32_t AddedTokens::LongestAt(const Pass& pass, std::string_view text, size_t pos) const {
  int32_t best = -1;
  size_t best_len = 0;
  for (const int32_t i : pass.by_first_byte[static_cast<uint8_t>(text[pos])]) {
    const std::string& c = tokens_[i].content;
    if (c.size() > best_len && text.substr(pos, c.size()) == c) {
      best = i;
      best_len = c.size();
    }
  }
  return best;
}

void AddedTokens::SplitPass(const Pass& pass, std::string_view text, size_t offset,
                            std::vector<TextSegment>* out) const {
  size_t done = 0;  // text before this is in segments already
  size_t pos = 0;   // where the search for the next match resumes
  while (pos < text.size()) {
    const int32_t index = LongestAt(pass, text, pos);
    if (index < 0) {
      ++pos;
      continue;
    }
    const AddedToken& token = tokens_[index];
    size_t start = pos;
    size_t stop = pos + token.content.size();
    pos = stop;
    if (token.single_word) {
      const bool word_before = start > 0 && IsWordChar(LastChar(text.substr(0, start)));
      const bool word_after = stop < text.size() && IsWordChar(FirstChar(text.substr(stop)));
      if (word_before || word_after) continue;  // not a whole word: ignored
    }
    if (token.lstrip) start = std::max(TrailingSpaceStart(text.substr(0, start)), done);
    if (token.rstrip) stop += LeadingSpaceLength(text.substr(stop));
    // HF would let a match inside the swallowed spaces overlap; we resume after
    // them.
    pos = std::max(pos, stop);
    if (done < start) out->push_back(TextSegment{offset + done, offset + start, -1});
    out->push_back(TextSegment{offset + start, offset + stop, token.id});
    done = stop;
  }
  if (done < text.size()) out->push_back(TextSegment{offset + done, offset + text.size(), -1});
}

std::vector<TextSegment> AddedTokens::SplitRaw(std::string_view text) const {
  std::vector<TextSegment> out;
  if (raw_pass_.empty) {
    if (!text.empty()) out.push_back(TextSegment{0, text.size(), -1});
  } else {
    SplitPass(raw_pass_, text, 0, &out);
  }
  return out;
}

std::vector<TextSegment> AddedTokens::SplitNormalized(std::string_view text) const {
  std::vector<TextSegment> out;
  if (normalized_pass_.empty) {
    if (!text.empty()) out.push_back(TextSegment{0, text.size(), -1});
  } else {
    SplitPass(normalized_pass_, text, 0, &out);
  }
  return out;
}

std::vector<TextSegment> AddedTokens::Split(std::string_view text) const {
  std::vector<TextSegment> first = SplitRaw(text);
  if (normalized_pass_.empty) return first;
  std::vector<TextSegment> out;
  for (const TextSegment& s : first) {
    if (s.id >= 0) {
      out.push_back(s);
    } else {
      SplitPass(normalized_pass_, text.substr(s.begin, s.end - s.begin), s.begin, &out);
    }
  }
  return out;
}

}  // namespace onecard::engine
