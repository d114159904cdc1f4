// IncrementalDetokenizer (declared in tokenizer.h): keeps the bytes of an
// unfinished UTF-8 character until a later token completes it. Bytes that can
// never form a character are emitted at once as U+FFFD, exactly as Decode()
// renders them, so the pieces always concatenate to Decode(all ids).
// Tested by tests/engine/tokenizer/incremental_detokenizer_test.cc.
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/utf8.h"

namespace onecard::engine {

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer* tokenizer, bool skip_special_tokens)
    : tokenizer_(tokenizer), skip_special_tokens_(skip_special_tokens) {}

std::string IncrementalDetokenizer::Add(int32_t id) {
  if (skip_special_tokens_ && tokenizer_->IsSpecial(id)) return "";
  pending_ += tokenizer_->TokenBytes(id);
  const size_t complete = Utf8CompletePrefix(pending_);
  std::string out = Utf8Lossy(std::string_view(pending_).substr(0, complete));
  pending_.erase(0, complete);
  return out;
}

std::string IncrementalDetokenizer::Flush() {
  std::string out = Utf8Lossy(pending_);
  pending_.clear();
  return out;
}

}  // namespace onecard::engine
