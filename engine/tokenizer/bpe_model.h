// BpeModel: the byte-level BPE core. Holds the vocabulary (byte-level strings
// by id) and the merge ranks, and encodes one pre-tokenized word (raw bytes)
// into ids by applying the lowest-ranked merge first (leftmost on ties), as HF
// tokenizers' BPE does. Results for words up to kMaxCachedWordBytes are kept
// in a bounded, mutex-guarded cache (cleared when full) so repeated words
// cost one lookup. Tested by tests/engine/tokenizer/bpe_model_test.cc.
#ifndef ONECARD_ENGINE_TOKENIZER_BPE_MODEL_H_
#define ONECARD_ENGINE_TOKENIZER_BPE_MODEL_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace onecard::engine {

class BpeModel {
 public:
  static constexpr size_t kMaxCachedWordBytes = 128;
  static constexpr size_t kCacheCapacity = 1 << 16;  // words

  // tokens[id]: the byte-level string of each id (empty for unused ids).
  // merges: pairs of token strings, best first. ignore_merges: a word found
  // whole in the vocabulary is that token (Llama-3). `where` names the source
  // in errors (e.g. "tokenizer.json: model.merges").
  static absl::StatusOr<std::unique_ptr<BpeModel>> Create(
      std::vector<std::string> tokens,
      const std::vector<std::pair<std::string, std::string>>& merges, bool ignore_merges,
      std::string_view where);

  // Appends the ids of one word (raw bytes). Bytes with no token of their own
  // are dropped, as HF's BPE without an unk token does. Thread-safe.
  void EncodeWord(std::string_view word, std::vector<int32_t>* ids) const;

  // The byte-level string of an id ("" when out of range), and the reverse.
  const std::string& Token(int32_t id) const;
  int32_t Find(std::string_view token) const;  // -1 when absent
  int32_t size() const { return static_cast<int32_t>(tokens_.size()); }
  size_t num_merges() const { return merges_.size(); }

 private:
  struct Merge {
    int32_t rank;
    int32_t merged_id;
  };
  BpeModel() = default;
  static uint64_t PairKey(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }
  const Merge* FindMerge(int32_t left, int32_t right) const;
  void ApplyMerges(std::string_view word, std::vector<int32_t>* ids) const;

  std::vector<std::string> tokens_;
  absl::flat_hash_map<std::string, int32_t> ids_;
  absl::flat_hash_map<uint64_t, Merge> merges_;
  std::array<int32_t, 256> byte_ids_{};  // the id of each single byte, -1 if none
  bool ignore_merges_ = false;

  mutable absl::Mutex cache_mu_;
  mutable absl::flat_hash_map<std::string, std::vector<int32_t>> cache_ ABSL_GUARDED_BY(cache_mu_);
};

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_TOKENIZER_BPE_MODEL_H_
