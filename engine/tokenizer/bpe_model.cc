// Byte-level BPE encoding of single words (see bpe_model.h).
// Tested by tests/engine/tokenizer/bpe_model_test.cc.
#include "engine/tokenizer/bpe_model.h"

#include <queue>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/tokenizer/byte_level.h"

namespace onecard::engine {
namespace {

// A symbol of the word being merged: a token id in a doubly linked list.
struct Symbol {
  int32_t id;
  int32_t prev;  // index, -1 at the start
  int32_t next;  // index, -1 at the end
  bool alive;
};

// A candidate merge of symbols[pos] with its right neighbour.
struct Candidate {
  int32_t rank;
  int32_t pos;
  int32_t merged_id;
  bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
};

}  // namespace

absl::StatusOr<std::unique_ptr<BpeModel>> BpeModel::Create(
    std::vector<std::string> tokens, const std::vector<std::pair<std::string, std::string>>& merges,
    bool ignore_merges, std::string_view where) {
  auto model = std::unique_ptr<BpeModel>(new BpeModel);
  model->ignore_merges_ = ignore_merges;
  model->tokens_ = std::move(tokens);
  model->ids_.reserve(model->tokens_.size());
  for (size_t id = 0; id < model->tokens_.size(); ++id) {
    if (model->tokens_[id].empty()) continue;
    model->ids_.emplace(model->tokens_[id], static_cast<int32_t>(id));
  }
  for (int b = 0; b < 256; ++b) {
    const char byte = static_cast<char>(b);
    model->byte_ids_[b] = model->Find(BytesToByteLevel(std::string_view(&byte, 1)));
  }
  model->merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [left, right] = merges[rank];
    const int32_t left_id = model->Find(left);
    const int32_t right_id = model->Find(right);
    const int32_t merged_id = model->Find(left + right);
    if (left_id < 0 || right_id < 0 || merged_id < 0) {
      const std::string& missing = left_id < 0 ? left : right_id < 0 ? right : left + right;
      return absl::InvalidArgumentError(absl::StrCat(std::string(where), "[", rank, "] ('", left,
                                                     " ", right, "'): token '", missing,
                                                     "' is not in the vocabulary"));
    }
    // The first (best) rank of a repeated pair wins, as in HF.
    model->merges_.try_emplace(PairKey(left_id, right_id),
                               Merge{static_cast<int32_t>(rank), merged_id});
  }
  return model;
}

const std::string& BpeModel::Token(int32_t id) const {
  static const std::string* const kEmpty = new std::string;
  if (id < 0 || id >= size()) return *kEmpty;
  return tokens_[id];
}

int32_t BpeModel::Find(std::string_view token) const {
  const auto it = ids_.find(absl::string_view(token.data(), token.size()));
  return it == ids_.end() ? -1 : it->second;
}

const BpeModel::Merge* BpeModel::FindMerge(int32_t left, int32_t right) const {
  const auto it = merges_.find(PairKey(left, right));
  return it == merges_.end() ? nullptr : &it->second;
}

// One symbol per byte of the word, linked in order.
static std::vector<Symbol> InitialSymbols(std::string_view word,
                                          const std::array<int32_t, 256>& byte_ids) {
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  for (const char c : word) {
    const int32_t id = byte_ids[static_cast<uint8_t>(c)];
    if (id < 0) continue;  // no token for this byte: dropped
    const auto n = static_cast<int32_t>(symbols.size());
    symbols.push_back(Symbol{id, n - 1, -1, true});
    if (n > 0) symbols[n - 1].next = n;
  }
  return symbols;
}

void BpeModel::ApplyMerges(std::string_view word, std::vector<int32_t>* ids) const {
  std::vector<Symbol> symbols = InitialSymbols(word, byte_ids_);
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  const auto push = [&](int32_t pos) {
    if (pos < 0 || symbols[pos].next < 0) return;
    if (const Merge* m = FindMerge(symbols[pos].id, symbols[symbols[pos].next].id)) {
      queue.push(Candidate{m->rank, pos, m->merged_id});
    }
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(symbols.size()); ++i) push(i);
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& left = symbols[top.pos];
    if (!left.alive || left.next < 0) continue;
    const Merge* m = FindMerge(left.id, symbols[left.next].id);
    if (m == nullptr || m->merged_id != top.merged_id) continue;  // stale candidate
    Symbol& right = symbols[left.next];
    left.id = top.merged_id;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = top.pos;
    push(left.prev);
    push(top.pos);
  }
  for (const Symbol& s : symbols) {
    if (s.alive) ids->push_back(s.id);
  }
}

void BpeModel::EncodeWord(std::string_view word, std::vector<int32_t>* ids) const {
  if (word.empty()) return;
  if (word.size() == 1) {
    const int32_t id = byte_ids_[static_cast<uint8_t>(word[0])];
    if (id >= 0) ids->push_back(id);
    return;
  }
  if (ignore_merges_) {
    const int32_t whole = Find(BytesToByteLevel(word));
    if (whole >= 0) {
      ids->push_back(whole);
      return;
    }
  }
  const bool cacheable = word.size() <= kMaxCachedWordBytes;
  if (cacheable) {
    absl::MutexLock lock(&cache_mu_);
    const auto it = cache_.find(absl::string_view(word.data(), word.size()));
    if (it != cache_.end()) {
      ids->insert(ids->end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const size_t first = ids->size();
  ApplyMerges(word, ids);
  if (cacheable) {
    absl::MutexLock lock(&cache_mu_);
    if (cache_.size() >= kCacheCapacity) cache_.clear();
    cache_.emplace(std::string(word), std::vector<int32_t>(ids->begin() + first, ids->end()));
  }
}

}  // namespace onecard::engine
