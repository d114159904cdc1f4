// BpeTokenizer: encode = added-token split -> pre-tokenize -> BPE per word;
// decode = raw bytes of each token -> lossy UTF-8 (as HF's ByteLevel decoder).
// Tested by tests/engine/tokenizer/bpe_tokenizer_test.cc.
#include "engine/tokenizer/bpe_tokenizer.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/tokenizer/byte_level.h"
#include "engine/tokenizer/utf8.h"

namespace onecard::engine {
namespace {

absl::Status CheckId(const BpeTokenizerSpec& spec, int32_t id, int32_t vocab_size,
                     const std::string& field) {
  if (id >= -1 && id < vocab_size) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      spec.source, ": ", field, " = ", id, " is outside the vocabulary [0, ", vocab_size, ")"));
}

// The bytes a token decodes to: its byte-level string mapped back, or (for
// added tokens written as plain text, e.g. with spaces) the text itself.
std::string RawBytes(const std::string& token) {
  std::optional<std::string> bytes = ByteLevelToBytes(token);
  return bytes.has_value() ? *std::move(bytes) : token;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> CreateBpeTokenizer(BpeTokenizerSpec spec) {
  auto tok = std::unique_ptr<BpeTokenizer>(new BpeTokenizer);
  int32_t vocab_size = static_cast<int32_t>(spec.tokens.size());
  for (const AddedToken& t : spec.added_tokens) {
    if (t.id < 0 || t.content.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(spec.source, ": added token '", t.content, "' has id ", t.id,
                       t.content.empty() ? " and no content" : " (ids start at 0)"));
    }
    vocab_size = std::max(vocab_size, t.id + 1);
  }
  RETURN_IF_ERROR(CheckId(spec, spec.bos_id, vocab_size, "bos token id"));
  RETURN_IF_ERROR(CheckId(spec, spec.eos_id, vocab_size, "eos token id"));
  tok->vocab_size_ = vocab_size;
  tok->token_bytes_.resize(vocab_size);
  for (size_t id = 0; id < spec.tokens.size(); ++id) {
    tok->token_bytes_[id] = RawBytes(spec.tokens[id]);
  }
  for (const AddedToken& t : spec.added_tokens) tok->token_bytes_[t.id] = RawBytes(t.content);
  ASSIGN_OR_RETURN(tok->model_,
                   BpeModel::Create(std::move(spec.tokens), spec.merges, spec.ignore_merges,
                                    absl::StrCat(spec.source, ": ", spec.merges_field)));
  ASSIGN_OR_RETURN(tok->pre_, PreTokenizer::Create(spec.pre_tokenizer));
  tok->normalizer_ = spec.normalizer;
  tok->added_ = AddedTokens(std::move(spec.added_tokens));
  tok->bos_id_ = spec.bos_id;
  tok->eos_id_ = spec.eos_id;
  tok->add_bos_ = spec.add_bos && spec.bos_id >= 0;
  tok->add_eos_ = spec.add_eos && spec.eos_id >= 0;
  tok->chat_template_ = std::move(spec.chat_template);
  tok->stop_ids_ = FindStopIds(*tok);
  return tok;
}

std::vector<int32_t> FindStopIds(const Tokenizer& tokenizer) {
  std::vector<int32_t> ids;
  if (tokenizer.eos_id() >= 0) ids.push_back(tokenizer.eos_id());
  for (const char* name : {"<|im_end|>", "<|eot_id|>", "<|end_of_text|>", "<|endoftext|>"}) {
    const int32_t id = tokenizer.TokenId(name);
    if (id >= 0) ids.push_back(id);
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

void BpeTokenizer::EncodeText(std::string_view text, std::vector<int32_t>* ids) const {
  std::vector<std::string_view> words;
  pre_->Split(text, &words);
  for (const std::string_view word : words) model_->EncodeWord(word, ids);
}

void BpeTokenizer::EncodeSegment(std::string_view text, std::vector<int32_t>* ids) const {
  std::string normalized;
  if (normalizer_ != NormalizerKind::kNone) {
    normalized = Normalize(normalizer_, text);
    text = normalized;
  }
  for (const TextSegment& s : added_.SplitNormalized(text)) {
    if (s.id >= 0) {
      ids->push_back(s.id);
    } else {
      EncodeText(text.substr(s.begin, s.end - s.begin), ids);
    }
  }
}

std::vector<int32_t> BpeTokenizer::Encode(std::string_view text, bool add_special_tokens) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 2);
  if (add_special_tokens && add_bos_) ids.push_back(bos_id_);
  for (const TextSegment& s : added_.SplitRaw(text)) {
    if (s.id >= 0) {
      ids.push_back(s.id);
    } else {
      EncodeSegment(text.substr(s.begin, s.end - s.begin), &ids);
    }
  }
  if (add_special_tokens && add_eos_) ids.push_back(eos_id_);
  return ids;
}

std::string BpeTokenizer::Decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const {
  std::string bytes;
  for (const int32_t id : ids) {
    if (id < 0 || id >= vocab_size_) continue;  // unknown ids decode to nothing, as in HF
    if (skip_special_tokens && IsSpecial(id)) continue;
    bytes += token_bytes_[id];
  }
  return Utf8Lossy(bytes);
}

std::string BpeTokenizer::TokenBytes(int32_t id) const {
  if (id < 0 || id >= vocab_size_) return "";
  return token_bytes_[id];
}

int32_t BpeTokenizer::TokenId(std::string_view token) const {
  if (const AddedToken* t = added_.FindByContent(token)) return t->id;
  return model_->Find(token);
}

bool BpeTokenizer::IsSpecial(int32_t id) const {
  const AddedToken* t = added_.FindById(id);
  return t != nullptr && t->special;
}

}  // namespace onecard::engine
