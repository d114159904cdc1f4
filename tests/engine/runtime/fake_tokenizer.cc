// FakeTokenizer (see fake_tokenizer.h).
#include "tests/engine/runtime/fake_tokenizer.h"

namespace onecard::engine::testing {

FakeTokenizer::FakeTokenizer() {
  for (char c = 'a'; c <= 'z'; ++c) tokens_.push_back(std::string(1, c));
  tokens_.push_back(" ");
  tokens_.push_back("<eos>");
  tokens_.push_back("\xE2");
  tokens_.push_back("\x82");
  tokens_.push_back("\xAC");
  tokens_.push_back("END");
  tokens_.push_back("\n");
  for (char c = 'a'; c <= 'z'; ++c) tokens_.push_back(std::string("q") + c);
  for (const char* s : {"!", "?", ".", ",", "<pad>"}) tokens_.push_back(s);
}

std::vector<int32_t> FakeTokenizer::Encode(std::string_view text, bool) const {
  std::vector<int32_t> ids;
  size_t pos = 0;
  while (pos < text.size()) {
    int32_t best = -1;
    for (int32_t id = 0; id < kVocabSize; ++id) {
      const std::string& t = tokens_[id];
      if (text.substr(pos).starts_with(t) && (best < 0 || t.size() > tokens_[best].size())) {
        best = id;
      }
    }
    if (best < 0) {
      ++pos;  // not representable: dropped
      continue;
    }
    ids.push_back(best);
    pos += tokens_[best].size();
  }
  return ids;
}

std::string FakeTokenizer::Decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const {
  std::string out;
  for (int32_t id : ids) {
    if (skip_special_tokens && IsSpecial(id)) continue;
    out += TokenBytes(id);
  }
  return out;
}

std::string FakeTokenizer::TokenBytes(int32_t id) const {
  return id >= 0 && id < kVocabSize ? tokens_[id] : "";
}

int32_t FakeTokenizer::TokenId(std::string_view token) const {
  for (int32_t id = 0; id < kVocabSize; ++id) {
    if (tokens_[id] == token) return id;
  }
  return -1;
}

}  // namespace onecard::engine::testing
