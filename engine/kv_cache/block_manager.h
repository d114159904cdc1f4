// BlockManager: hands out the paged KV cache's block ids to sequences, with
// prefix caching (after nano-vllm's block_manager.py and vLLM v1's
// KVCacheManager). Tested by tests/engine/kv_cache/block_manager_test.cc with
// CheckInvariants() after every operation and randomized operation sequences.
//
// Contract:
// - A sequence's block table covers its first num_tokens(seq) token slots:
//   token position p lives in block_table[p / block_size], slot p % block_size
//   (engine/kv_cache/kv_layout.h). Allocate creates the table for a new
//   sequence's known tokens; Append grows it; Free gives every block back.
// - Running out of blocks is a value, never an error: Allocate returns
//   std::nullopt and Append returns false, and neither changes any state.
//   CanAllocate / CanAppend answer the same question without acting.
// - Prefix caching: a block becomes cached once all block_size of its tokens
//   have been computed (CacheComputedBlocks). Its key chains the previous
//   block's key with its own token ids, so a key names a whole prefix.
//   Allocate reuses cached blocks for the longest matching prefix of full
//   blocks, leaving at least the last token uncomputed (its logits are
//   needed), and reports how many tokens that covers. Shared blocks are
//   ref-counted; only cached, full, already computed blocks are ever shared,
//   so no sequence writes into a block another one reads.
// - A block whose ref count drops to zero stays cached (its KV is intact)
//   until a fresh block is needed and no never-cached free block is left;
//   then the least recently freed cached block is evicted (LRU).
// - Counts: used (ref count > 0) + free (ref count == 0, cached or not) ==
//   num_blocks; cached counts blocks holding a registered key, used or free.
// Not thread-safe: one owner (the scheduler) drives it.
#ifndef ONECARD_ENGINE_KV_CACHE_BLOCK_MANAGER_H_
#define ONECARD_ENGINE_KV_CACHE_BLOCK_MANAGER_H_

#include <cstdint>
#include <deque>
#include <list>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "absl/status/status.h"

namespace onecard::engine {

struct BlockManagerOptions {
  int32_t num_blocks = 0;
  int32_t block_size = 16;  // tokens per block
  bool enable_prefix_caching = true;
};

class BlockManager {
 public:
  explicit BlockManager(const BlockManagerOptions& options);

  // Whether Allocate(token_ids) would succeed now.
  bool CanAllocate(std::span<const int32_t> token_ids) const;
  // Creates seq_id's table covering token_ids.size() slots, reusing cached
  // prefix blocks. Returns the number of leading tokens whose KV is already
  // there (a multiple of block_size, < token_ids.size()), or nullopt when the
  // free blocks do not suffice. seq_id must not hold a table already.
  std::optional<int32_t> Allocate(int64_t seq_id, std::span<const int32_t> token_ids);

  // Whether Append(seq_id, num_new_tokens) would succeed now.
  bool CanAppend(int64_t seq_id, int32_t num_new_tokens) const;
  // Grows seq_id's table by num_new_tokens slots; false (and no change) when
  // the free blocks do not suffice.
  bool Append(int64_t seq_id, int32_t num_new_tokens);

  // Registers, for prefix reuse, every full block of seq_id within its first
  // num_computed_tokens tokens that is not registered yet. token_ids are the
  // sequence's tokens (at least num_computed_tokens of them, the same tokens
  // Allocate saw as a prefix).
  void CacheComputedBlocks(int64_t seq_id, std::span<const int32_t> token_ids,
                           int32_t num_computed_tokens);

  // Gives back every block of seq_id (no-op for unknown ids).
  void Free(int64_t seq_id);

  // seq_id's block ids; empty for unknown ids. Valid until the next call
  // that changes seq_id's table.
  std::span<const int32_t> BlockTable(int64_t seq_id) const;
  int32_t num_tokens(int64_t seq_id) const;  // slots covered; 0 if unknown
  bool HasSequence(int64_t seq_id) const { return seqs_.contains(seq_id); }

  int32_t num_blocks() const { return static_cast<int32_t>(blocks_.size()); }
  int32_t block_size() const { return block_size_; }
  int32_t num_used_blocks() const { return num_blocks() - num_free_blocks(); }
  int32_t num_free_blocks() const {
    return static_cast<int32_t>(free_uncached_.size() + free_cached_.size());
  }
  int32_t num_cached_blocks() const { return static_cast<int32_t>(cache_.size()); }

  // Checks every internal invariant (ref counts equal table references, free
  // lists hold exactly the unreferenced blocks once, cache keys match their
  // blocks, tables cover their token counts). For tests; O(num_blocks).
  absl::Status CheckInvariants() const;

 private:
  struct Block {
    int32_t ref_count = 0;
    bool cached = false;  // registered in cache_ under key
    uint64_t key = 0;
    std::vector<int32_t> token_ids;        // the block's tokens while cached
    std::list<int32_t>::iterator lru_pos;  // valid while cached and free
  };
  struct SeqState {
    std::vector<int32_t> block_ids;
    int32_t num_tokens = 0;
    int32_t num_keyed_blocks = 0;  // leading full blocks whose key is known
    uint64_t last_key = 0;         // key of block num_keyed_blocks - 1
  };

  int32_t BlocksFor(int64_t num_tokens) const {
    return static_cast<int32_t>((num_tokens + block_size_ - 1) / block_size_);
  }
  // Cached blocks holding the longest reusable prefix of token_ids.
  std::vector<int32_t> MatchPrefix(std::span<const int32_t> token_ids) const;
  int32_t NumFreeNeeded(std::span<const int32_t> token_ids, const std::vector<int32_t>& hits) const;
  int32_t TakeFreshBlock();        // a free block, evicting the LRU cached one if needed
  void Acquire(int32_t block_id);  // ref_count++, leaving the free lists
  void Release(int32_t block_id);  // ref_count--, joining a free list at 0
  uint64_t BlockKey(uint64_t prev_key, std::span<const int32_t> tokens) const;
  absl::Status CheckTables(std::vector<int32_t>* refs) const;        // counts references
  absl::Status CheckFreeLists(std::vector<int32_t>* in_free) const;  // counts entries

  int32_t block_size_;
  bool enable_prefix_caching_;
  std::vector<Block> blocks_;
  std::deque<int32_t> free_uncached_;            // free, holding no cached prefix
  std::list<int32_t> free_cached_;               // free but cached; front = least recent
  std::unordered_map<uint64_t, int32_t> cache_;  // key -> block id
  std::unordered_map<int64_t, SeqState> seqs_;
};

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_KV_CACHE_BLOCK_MANAGER_H_
