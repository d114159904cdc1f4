// BlockManager implementation (contract in block_manager.h).
// Tested by tests/engine/kv_cache/block_manager_test.cc.
#include "engine/kv_cache/block_manager.h"

#include <algorithm>
#include <cassert>

#include "absl/strings/str_cat.h"

namespace onecard::engine {
namespace {

// splitmix64 finalizer: a cheap, well-mixed 64-bit step.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

BlockManager::BlockManager(const BlockManagerOptions& options)
    : block_size_(options.block_size),
      enable_prefix_caching_(options.enable_prefix_caching),
      blocks_(std::max(options.num_blocks, 0)) {
  assert(options.block_size > 0 && "block_size must be positive");
  for (int32_t i = 0; i < num_blocks(); ++i) free_uncached_.push_back(i);
}

uint64_t BlockManager::BlockKey(uint64_t prev_key, std::span<const int32_t> tokens) const {
  uint64_t key = Mix(prev_key ^ 0x6f6e6563617264ull);  // "onecard"
  for (int32_t token : tokens) key = Mix(key ^ static_cast<uint32_t>(token));
  return key;
}

std::vector<int32_t> BlockManager::MatchPrefix(std::span<const int32_t> token_ids) const {
  std::vector<int32_t> hits;
  if (!enable_prefix_caching_ || token_ids.empty()) return hits;
  // Only blocks that lie wholly inside the first n - 1 tokens: the last token
  // is always computed again to produce logits.
  const size_t max_blocks = (token_ids.size() - 1) / block_size_;
  uint64_t key = 0;
  for (size_t i = 0; i < max_blocks; ++i) {
    auto tokens = token_ids.subspan(i * block_size_, block_size_);
    key = BlockKey(key, tokens);
    auto it = cache_.find(key);
    if (it == cache_.end()) break;
    const Block& block = blocks_[it->second];
    if (!std::equal(tokens.begin(), tokens.end(), block.token_ids.begin(), block.token_ids.end())) {
      break;  // a key collision: treat as a miss
    }
    hits.push_back(it->second);
  }
  return hits;
}

int32_t BlockManager::NumFreeNeeded(std::span<const int32_t> token_ids,
                                    const std::vector<int32_t>& hits) const {
  int32_t needed =
      BlocksFor(static_cast<int64_t>(token_ids.size())) - static_cast<int32_t>(hits.size());
  for (int32_t id : hits) {
    if (blocks_[id].ref_count == 0) ++needed;  // a free cached block gets used
  }
  return needed;
}

bool BlockManager::CanAllocate(std::span<const int32_t> token_ids) const {
  return NumFreeNeeded(token_ids, MatchPrefix(token_ids)) <= num_free_blocks();
}

std::optional<int32_t> BlockManager::Allocate(int64_t seq_id, std::span<const int32_t> token_ids) {
  assert(!seqs_.contains(seq_id) && "Allocate: the sequence already has blocks");
  std::vector<int32_t> hits = MatchPrefix(token_ids);
  if (NumFreeNeeded(token_ids, hits) > num_free_blocks()) return std::nullopt;
  SeqState& seq = seqs_[seq_id];
  // Claim the hits first so that taking fresh blocks cannot evict them.
  for (int32_t id : hits) {
    Acquire(id);
    seq.block_ids.push_back(id);
  }
  const int32_t total = BlocksFor(static_cast<int64_t>(token_ids.size()));
  while (static_cast<int32_t>(seq.block_ids.size()) < total) {
    seq.block_ids.push_back(TakeFreshBlock());
  }
  seq.num_tokens = static_cast<int32_t>(token_ids.size());
  seq.num_keyed_blocks = static_cast<int32_t>(hits.size());
  seq.last_key = hits.empty() ? 0 : blocks_[hits.back()].key;
  return static_cast<int32_t>(hits.size()) * block_size_;
}

bool BlockManager::CanAppend(int64_t seq_id, int32_t num_new_tokens) const {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return false;
  const SeqState& seq = it->second;
  const int32_t needed = BlocksFor(static_cast<int64_t>(seq.num_tokens) + num_new_tokens) -
                         static_cast<int32_t>(seq.block_ids.size());
  return needed <= num_free_blocks();
}

bool BlockManager::Append(int64_t seq_id, int32_t num_new_tokens) {
  assert(num_new_tokens >= 0 && "Append: negative token count");
  if (!CanAppend(seq_id, num_new_tokens)) return false;
  SeqState& seq = seqs_.at(seq_id);
  seq.num_tokens += num_new_tokens;
  const int32_t total = BlocksFor(seq.num_tokens);
  while (static_cast<int32_t>(seq.block_ids.size()) < total) {
    seq.block_ids.push_back(TakeFreshBlock());
  }
  return true;
}

void BlockManager::CacheComputedBlocks(int64_t seq_id, std::span<const int32_t> token_ids,
                                       int32_t num_computed_tokens) {
  if (!enable_prefix_caching_) return;
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return;
  SeqState& seq = it->second;
  const int32_t computed =
      std::min({num_computed_tokens, seq.num_tokens, static_cast<int32_t>(token_ids.size())});
  const int32_t num_full = computed / block_size_;
  for (int32_t i = seq.num_keyed_blocks; i < num_full; ++i) {
    auto tokens = token_ids.subspan(static_cast<size_t>(i) * block_size_, block_size_);
    const uint64_t key = BlockKey(seq.last_key, tokens);
    Block& block = blocks_[seq.block_ids[i]];
    if (!block.cached && !cache_.contains(key)) {
      block.cached = true;
      block.key = key;
      block.token_ids.assign(tokens.begin(), tokens.end());
      cache_[key] = seq.block_ids[i];
    }
    // A duplicate of an already cached prefix stays private to this sequence;
    // the key chain continues either way.
    seq.last_key = key;
    seq.num_keyed_blocks = i + 1;
  }
}

void BlockManager::Free(int64_t seq_id) {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return;
  // Tail blocks first, so that the LRU evicts a prefix's tail before its head.
  const std::vector<int32_t>& ids = it->second.block_ids;
  for (auto id = ids.rbegin(); id != ids.rend(); ++id) Release(*id);
  seqs_.erase(it);
}

std::span<const int32_t> BlockManager::BlockTable(int64_t seq_id) const {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return {};
  return it->second.block_ids;
}

int32_t BlockManager::num_tokens(int64_t seq_id) const {
  auto it = seqs_.find(seq_id);
  return it == seqs_.end() ? 0 : it->second.num_tokens;
}

int32_t BlockManager::TakeFreshBlock() {
  int32_t id;
  if (!free_uncached_.empty()) {
    id = free_uncached_.front();
    free_uncached_.pop_front();
  } else {
    assert(!free_cached_.empty() && "TakeFreshBlock: caller checked the free count");
    id = free_cached_.front();
    free_cached_.pop_front();
    Block& victim = blocks_[id];
    cache_.erase(victim.key);
    victim.cached = false;
    victim.key = 0;
    victim.token_ids.clear();
  }
  blocks_[id].ref_count = 1;
  return id;
}

void BlockManager::Acquire(int32_t block_id) {
  Block& block = blocks_[block_id];
  if (block.ref_count == 0) {
    assert(block.cached && "Acquire: only cached blocks are shared");
    free_cached_.erase(block.lru_pos);
  }
  ++block.ref_count;
}

void BlockManager::Release(int32_t block_id) {
  Block& block = blocks_[block_id];
  assert(block.ref_count > 0 && "Release: block is not in use");
  if (--block.ref_count > 0) return;
  if (block.cached) {
    block.lru_pos = free_cached_.insert(free_cached_.end(), block_id);
  } else {
    free_uncached_.push_back(block_id);
  }
}

absl::Status BlockManager::CheckTables(std::vector<int32_t>* refs) const {
  for (const auto& [seq_id, seq] : seqs_) {
    if (static_cast<int32_t>(seq.block_ids.size()) != BlocksFor(seq.num_tokens)) {
      return absl::InternalError(absl::StrCat("seq ", seq_id, ": ", seq.block_ids.size(),
                                              " blocks for ", seq.num_tokens, " tokens"));
    }
    if (seq.num_keyed_blocks > seq.num_tokens / block_size_) {
      return absl::InternalError(absl::StrCat("seq ", seq_id, ": keyed past its full blocks"));
    }
    std::vector<int32_t> sorted = seq.block_ids;
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
      return absl::InternalError(absl::StrCat("seq ", seq_id, ": a block appears twice"));
    }
    for (int32_t id : seq.block_ids) {
      if (id < 0 || id >= num_blocks()) {
        return absl::InternalError(absl::StrCat("seq ", seq_id, ": bad block id ", id));
      }
      ++(*refs)[id];
    }
  }
  return absl::OkStatus();
}

absl::Status BlockManager::CheckFreeLists(std::vector<int32_t>* in_free) const {
  for (int32_t id : free_uncached_) {
    if (blocks_[id].cached) {
      return absl::InternalError(absl::StrCat("block ", id, ": cached but on the uncached list"));
    }
    ++(*in_free)[id];
  }
  for (auto it = free_cached_.begin(); it != free_cached_.end(); ++it) {
    const Block& block = blocks_[*it];
    if (!block.cached || block.lru_pos != it) {
      return absl::InternalError(absl::StrCat("block ", *it, ": bad LRU entry"));
    }
    ++(*in_free)[*it];
  }
  return absl::OkStatus();
}

absl::Status BlockManager::CheckInvariants() const {
  std::vector<int32_t> refs(num_blocks(), 0);
  std::vector<int32_t> in_free(num_blocks(), 0);
  if (absl::Status s = CheckTables(&refs); !s.ok()) return s;
  if (absl::Status s = CheckFreeLists(&in_free); !s.ok()) return s;
  int32_t num_cached = 0;
  for (int32_t id = 0; id < num_blocks(); ++id) {
    const Block& block = blocks_[id];
    if (block.ref_count != refs[id]) {
      return absl::InternalError(absl::StrCat("block ", id, ": ref_count ", block.ref_count,
                                              " but ", refs[id], " table references"));
    }
    if (in_free[id] != (block.ref_count == 0 ? 1 : 0)) {
      return absl::InternalError(absl::StrCat("block ", id, ": on free lists ", in_free[id],
                                              " times with ref_count ", block.ref_count));
    }
    if (block.ref_count > 1 && !block.cached) {
      return absl::InternalError(absl::StrCat("block ", id, ": shared but not cached"));
    }
    if (!block.cached) continue;
    ++num_cached;
    auto it = cache_.find(block.key);
    if (it == cache_.end() || it->second != id ||
        static_cast<int32_t>(block.token_ids.size()) != block_size_) {
      return absl::InternalError(absl::StrCat("block ", id, ": cache entry mismatch"));
    }
  }
  if (num_cached != static_cast<int32_t>(cache_.size())) {
    return absl::InternalError("cache map holds blocks not marked cached");
  }
  if (!enable_prefix_caching_ && !cache_.empty()) {
    return absl::InternalError("prefix caching is off but blocks are cached");
  }
  return absl::OkStatus();
}

}  // namespace onecard::engine
