// BpeTokenizer: the Tokenizer implementation (byte-level BPE + a
// pre-tokenizer + added tokens), built from a BpeTokenizerSpec that the GGUF
// and tokenizer.json loaders fill in. Tested by
// tests/engine/tokenizer/bpe_tokenizer_test.cc (HF goldens of three
// tokenizers).
#ifndef ONECARD_ENGINE_TOKENIZER_BPE_TOKENIZER_H_
#define ONECARD_ENGINE_TOKENIZER_BPE_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/tokenizer/added_tokens.h"
#include "engine/tokenizer/bpe_model.h"
#include "engine/tokenizer/normalizer.h"
#include "engine/tokenizer/pre_tokenizer.h"
#include "engine/tokenizer/tokenizer.h"

namespace onecard::engine {

// Everything a loader reads from a model's files.
struct BpeTokenizerSpec {
  std::string source;               // file name, for errors
  std::string merges_field;         // e.g. "tokenizer.ggml.merges", for errors
  std::vector<std::string> tokens;  // byte-level strings by id ("" for holes)
  std::vector<std::pair<std::string, std::string>> merges;  // best first
  std::vector<AddedToken> added_tokens;
  NormalizerKind normalizer = NormalizerKind::kNone;  // applied to text outside added tokens
  PreTokenizerKind pre_tokenizer = PreTokenizerKind::kGpt2;
  bool ignore_merges = false;
  int32_t bos_id = -1;
  int32_t eos_id = -1;
  bool add_bos = false;  // Encode(add_special_tokens) prepends bos
  bool add_eos = false;  // ... and appends eos
  std::string chat_template;
};

// The spec of a GGUF file's tokenizer (what Tokenizer::FromGguf builds):
// tokenizer.ggml.model "gpt2" only; errors name the file and the key.
absl::StatusOr<BpeTokenizerSpec> BpeTokenizerSpecFromGguf(const GgufFile& gguf);

// Validates the spec (ids in range, merges in the vocabulary; errors name
// spec.source and the field) and builds the tokenizer.
absl::StatusOr<std::unique_ptr<Tokenizer>> CreateBpeTokenizer(BpeTokenizerSpec spec);

// The tokens that end a turn when present: eos, <|im_end|>, <|eot_id|>,
// <|end_of_text|>, <|endoftext|> (sorted, no repeats).
std::vector<int32_t> FindStopIds(const Tokenizer& tokenizer);

class BpeTokenizer : public Tokenizer {
 public:
  std::vector<int32_t> Encode(std::string_view text, bool add_special_tokens) const override;
  std::string Decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const override;
  std::string TokenBytes(int32_t id) const override;
  int32_t TokenId(std::string_view token) const override;
  bool IsSpecial(int32_t id) const override;

  int32_t vocab_size() const override { return vocab_size_; }
  int32_t bos_id() const override { return bos_id_; }
  int32_t eos_id() const override { return eos_id_; }
  const std::vector<int32_t>& stop_ids() const override { return stop_ids_; }
  const std::string& chat_template() const override { return chat_template_; }
  PreTokenizerKind pre_tokenizer_kind() const { return pre_->kind(); }

 private:
  friend absl::StatusOr<std::unique_ptr<Tokenizer>> CreateBpeTokenizer(BpeTokenizerSpec spec);
  BpeTokenizer() = default;
  void EncodeText(std::string_view text, std::vector<int32_t>* ids) const;
  // Normalizes a text segment, then matches normalized added tokens in it.
  void EncodeSegment(std::string_view text, std::vector<int32_t>* ids) const;

  std::unique_ptr<BpeModel> model_;
  std::unique_ptr<PreTokenizer> pre_;
  NormalizerKind normalizer_ = NormalizerKind::kNone;
  AddedTokens added_;
  std::vector<std::string> token_bytes_;  // raw bytes of every id
  int32_t vocab_size_ = 0;
  int32_t bos_id_ = -1;
  int32_t eos_id_ = -1;
  bool add_bos_ = false;
  bool add_eos_ = false;
  std::vector<int32_t> stop_ids_;
  std::string chat_template_;
};

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_TOKENIZER_BPE_TOKENIZER_H_
