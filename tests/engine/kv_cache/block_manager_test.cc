// Tests of BlockManager: the verbs on hand-built cases, prefix caching and LRU
// eviction, and randomized operation sequences checked against a simulated KV
// pool (every computed slot a sequence reads through its table must hold that
// sequence's token) with CheckInvariants() after every operation.
#include "engine/kv_cache/block_manager.h"

#include <map>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "gtest/gtest.h"

namespace onecard::engine {
namespace {

constexpr int32_t kBs = 4;

std::vector<int32_t> Range(int32_t begin, int32_t n) {
  std::vector<int32_t> v(n);
  std::iota(v.begin(), v.end(), begin);
  return v;
}

#define EXPECT_INVARIANTS(bm) EXPECT_TRUE((bm).CheckInvariants().ok()) << (bm).CheckInvariants()

BlockManager Make(int32_t num_blocks, bool caching = true) {
  return BlockManager(
      {.num_blocks = num_blocks, .block_size = kBs, .enable_prefix_caching = caching});
}

TEST(BlockManagerTest, AllocateAppendFreeCounts) {
  BlockManager bm = Make(8);
  EXPECT_EQ(bm.num_free_blocks(), 8);
  auto cached = bm.Allocate(1, Range(0, 9));  // 9 tokens -> 3 blocks
  ASSERT_TRUE(cached.has_value());
  EXPECT_EQ(*cached, 0);
  EXPECT_EQ(bm.BlockTable(1).size(), 3u);
  EXPECT_EQ(bm.num_tokens(1), 9);
  EXPECT_EQ(bm.num_used_blocks(), 3);
  EXPECT_INVARIANTS(bm);
  EXPECT_TRUE(bm.Append(1, 3));  // 12 tokens: still 3 blocks
  EXPECT_EQ(bm.num_used_blocks(), 3);
  EXPECT_TRUE(bm.Append(1, 1));  // 13 tokens: 4 blocks
  EXPECT_EQ(bm.num_used_blocks(), 4);
  EXPECT_INVARIANTS(bm);
  bm.Free(1);
  EXPECT_EQ(bm.num_free_blocks(), 8);
  EXPECT_FALSE(bm.HasSequence(1));
  EXPECT_TRUE(bm.BlockTable(1).empty());
  EXPECT_INVARIANTS(bm);
  bm.Free(1);  // unknown ids are a no-op
  EXPECT_INVARIANTS(bm);
}

TEST(BlockManagerTest, RunningOutIsAValueAndChangesNothing) {
  BlockManager bm = Make(3);
  ASSERT_TRUE(bm.Allocate(1, Range(0, 8)).has_value());  // 2 blocks
  EXPECT_FALSE(bm.CanAllocate(Range(100, 5)));           // needs 2, 1 free
  EXPECT_FALSE(bm.Allocate(2, Range(100, 5)).has_value());
  EXPECT_FALSE(bm.HasSequence(2));
  EXPECT_EQ(bm.num_free_blocks(), 1);
  EXPECT_TRUE(bm.CanAppend(1, 4));
  EXPECT_FALSE(bm.CanAppend(1, 5));
  EXPECT_FALSE(bm.Append(1, 5));
  EXPECT_EQ(bm.num_tokens(1), 8);
  EXPECT_EQ(bm.BlockTable(1).size(), 2u);
  EXPECT_FALSE(bm.CanAppend(99, 1));  // unknown sequence
  EXPECT_INVARIANTS(bm);
}

TEST(BlockManagerTest, PrefixIsSharedOnlyAfterItIsComputed) {
  BlockManager bm = Make(16);
  std::vector<int32_t> a = Range(0, 10);  // blocks [0..3] [4..7] [8,9]
  ASSERT_EQ(bm.Allocate(1, a), 0);
  // Not computed yet: a second sequence with the same prefix gets no hits.
  std::vector<int32_t> b = Range(0, 12);
  ASSERT_EQ(bm.Allocate(2, b), 0);
  bm.Free(2);
  bm.CacheComputedBlocks(1, a, 10);
  EXPECT_EQ(bm.num_cached_blocks(), 2);  // the partial third block is not cached
  EXPECT_INVARIANTS(bm);
  ASSERT_EQ(bm.Allocate(3, b), 8);
  auto t1 = bm.BlockTable(1);
  auto t3 = bm.BlockTable(3);
  EXPECT_EQ(t3[0], t1[0]);
  EXPECT_EQ(t3[1], t1[1]);
  EXPECT_NE(t3[2], t1[2]);
  EXPECT_EQ(bm.num_used_blocks(), 3 + 1);
  EXPECT_INVARIANTS(bm);
}

TEST(BlockManagerTest, LastTokenIsNeverServedFromTheCache) {
  BlockManager bm = Make(16);
  std::vector<int32_t> a = Range(0, 8);  // exactly two full blocks
  ASSERT_EQ(bm.Allocate(1, a), 0);
  bm.CacheComputedBlocks(1, a, 8);
  EXPECT_EQ(bm.num_cached_blocks(), 2);
  // The same 8 tokens: the second block holds the last token, so only the first hits.
  ASSERT_EQ(bm.Allocate(2, a), 4);
  // 9 tokens: both full blocks lie before the last token.
  ASSERT_EQ(bm.Allocate(3, Range(0, 9)), 8);
  EXPECT_INVARIANTS(bm);
}

TEST(BlockManagerTest, DifferentHistoryDoesNotMatch) {
  BlockManager bm = Make(16);
  std::vector<int32_t> a = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  ASSERT_EQ(bm.Allocate(1, a), 0);
  bm.CacheComputedBlocks(1, a, 9);
  // Same second block, different first block: the chained key differs.
  std::vector<int32_t> b = {0, 2, 3, 4, 5, 6, 7, 8, 9};
  EXPECT_EQ(bm.Allocate(2, b), 0);
  EXPECT_INVARIANTS(bm);
}

TEST(BlockManagerTest, FreedCachedBlocksAreReusedThenEvictedLeastRecentFirst) {
  BlockManager bm = Make(4);
  std::vector<int32_t> a = Range(0, 9);  // 3 blocks, 2 full
  ASSERT_EQ(bm.Allocate(1, a), 0);
  bm.CacheComputedBlocks(1, a, 9);
  bm.Free(1);
  EXPECT_EQ(bm.num_free_blocks(), 4);
  EXPECT_EQ(bm.num_cached_blocks(), 2);
  EXPECT_INVARIANTS(bm);
  // A new sequence with the same prefix revives the cached blocks.
  ASSERT_EQ(bm.Allocate(2, a), 8);
  EXPECT_EQ(bm.num_used_blocks(), 3);
  bm.Free(2);
  // A sequence needing 3 fresh blocks takes the 2 never-cached ones first,
  // then evicts the cached tail block (freed before the head block).
  ASSERT_EQ(bm.Allocate(3, Range(50, 12)), 0);
  EXPECT_EQ(bm.num_cached_blocks(), 1);
  EXPECT_INVARIANTS(bm);
  bm.Free(3);
  // The head block survived: a 5-token prompt with the same first block hits it.
  EXPECT_EQ(bm.Allocate(4, Range(0, 5)), 4);
  EXPECT_INVARIANTS(bm);
}

TEST(BlockManagerTest, CanAllocateCountsFreeCachedHitsAsUsed) {
  BlockManager bm = Make(3);
  std::vector<int32_t> a = Range(0, 9);
  ASSERT_EQ(bm.Allocate(1, a), 0);
  bm.CacheComputedBlocks(1, a, 9);
  bm.Free(1);  // 3 free, 2 of them cached
  // 13 tokens, 2 hits + 2 fresh = 4 blocks > 3.
  EXPECT_FALSE(bm.CanAllocate(Range(0, 13)));
  EXPECT_FALSE(bm.Allocate(2, Range(0, 13)).has_value());
  EXPECT_EQ(bm.num_cached_blocks(), 2);
  EXPECT_TRUE(bm.CanAllocate(Range(0, 12)));
  EXPECT_EQ(bm.Allocate(2, Range(0, 12)), 8);
  EXPECT_INVARIANTS(bm);
}

TEST(BlockManagerTest, DuplicatePrefixesComputedTogetherCacheOnce) {
  BlockManager bm = Make(16);
  std::vector<int32_t> a = Range(0, 9);
  ASSERT_EQ(bm.Allocate(1, a), 0);
  ASSERT_EQ(bm.Allocate(2, a), 0);
  bm.CacheComputedBlocks(1, a, 9);
  bm.CacheComputedBlocks(2, a, 9);
  EXPECT_EQ(bm.num_cached_blocks(), 2);
  EXPECT_INVARIANTS(bm);
  ASSERT_EQ(bm.Allocate(3, a), 8);
  EXPECT_EQ(bm.BlockTable(3)[0], bm.BlockTable(1)[0]);
  bm.Free(1);
  bm.Free(2);
  bm.Free(3);
  EXPECT_EQ(bm.num_free_blocks(), 16);
  EXPECT_INVARIANTS(bm);
}

TEST(BlockManagerTest, CachingOffNeverShares) {
  BlockManager bm = Make(8, /*caching=*/false);
  std::vector<int32_t> a = Range(0, 9);
  ASSERT_EQ(bm.Allocate(1, a), 0);
  bm.CacheComputedBlocks(1, a, 9);
  EXPECT_EQ(bm.num_cached_blocks(), 0);
  EXPECT_EQ(bm.Allocate(2, a), 0);
  EXPECT_EQ(bm.num_used_blocks(), 6);
  EXPECT_INVARIANTS(bm);
}

// Randomized operation sequences. A simulated pool records which token each
// slot holds; after every operation, every computed position of every live
// sequence must read back its own token through its table.
class Simulation {
 public:
  Simulation(int32_t num_blocks, bool caching, uint64_t seed)
      : bm_({.num_blocks = num_blocks, .block_size = kBs, .enable_prefix_caching = caching}),
        pool_(static_cast<size_t>(num_blocks) * kBs, -1),
        rng_(seed) {}

  void Run(int num_ops) {
    for (int op = 0; op < num_ops; ++op) {
      switch (Uniform(0, 3)) {
        case 0:
          NewSequence();
          break;
        case 1:
          Compute();
          break;
        case 2:
          Grow();
          break;
        default:
          FreeOne();
          break;
      }
      ASSERT_TRUE(bm_.CheckInvariants().ok()) << "op " << op << ": " << bm_.CheckInvariants();
      CheckPool(op);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
  int64_t hits() const { return hit_tokens_; }

 private:
  struct Seq {
    std::vector<int32_t> tokens;
    int32_t computed = 0;
  };
  int32_t Uniform(int32_t lo, int32_t hi) {
    return std::uniform_int_distribution<int32_t>(lo, hi)(rng_);
  }
  // Prompts share prefixes often: a few fixed stems plus random tails.
  void NewSequence() {
    Seq seq;
    const int32_t stem = Uniform(0, 3);
    const int32_t stem_len = Uniform(0, 3) * kBs;
    for (int32_t i = 0; i < stem_len; ++i) seq.tokens.push_back(stem * 100 + i);
    const int32_t tail = Uniform(1, 6);
    for (int32_t i = 0; i < tail; ++i) seq.tokens.push_back(Uniform(0, 3));
    const bool can = bm_.CanAllocate(seq.tokens);
    const int32_t free_before = bm_.num_free_blocks();
    std::optional<int32_t> cached = bm_.Allocate(next_id_, seq.tokens);
    ASSERT_EQ(can, cached.has_value());
    if (!cached) {
      ASSERT_EQ(free_before, bm_.num_free_blocks());
      return;
    }
    ASSERT_EQ(*cached % kBs, 0);
    ASSERT_LT(*cached, static_cast<int32_t>(seq.tokens.size()));
    seq.computed = *cached;
    hit_tokens_ += *cached;
    seqs_[next_id_++] = std::move(seq);
  }
  // Computes a chunk of a random live sequence: writes its slots, then caches.
  void Compute() {
    if (seqs_.empty()) return;
    auto it = std::next(seqs_.begin(), Uniform(0, static_cast<int32_t>(seqs_.size()) - 1));
    Seq& seq = it->second;
    const int32_t capacity = bm_.num_tokens(it->first);
    if (seq.computed >= capacity) return;
    const int32_t n = Uniform(1, capacity - seq.computed);
    auto table = bm_.BlockTable(it->first);
    for (int32_t p = seq.computed; p < seq.computed + n; ++p) {
      while (static_cast<int32_t>(seq.tokens.size()) <= p) seq.tokens.push_back(Uniform(0, 3));
      pool_[static_cast<size_t>(table[p / kBs]) * kBs + p % kBs] = seq.tokens[p];
    }
    seq.computed += n;
    bm_.CacheComputedBlocks(it->first, seq.tokens, seq.computed);
  }
  void Grow() {
    if (seqs_.empty()) return;
    auto it = std::next(seqs_.begin(), Uniform(0, static_cast<int32_t>(seqs_.size()) - 1));
    const int32_t n = Uniform(1, 2 * kBs);
    const bool can = bm_.CanAppend(it->first, n);
    const int32_t before = bm_.num_tokens(it->first);
    ASSERT_EQ(bm_.Append(it->first, n), can);
    ASSERT_EQ(bm_.num_tokens(it->first), can ? before + n : before);
  }
  void FreeOne() {
    if (seqs_.empty()) return;
    auto it = std::next(seqs_.begin(), Uniform(0, static_cast<int32_t>(seqs_.size()) - 1));
    bm_.Free(it->first);
    seqs_.erase(it);
  }
  void CheckPool(int op) {
    std::set<int32_t> used;
    for (const auto& [id, seq] : seqs_) {
      auto table = bm_.BlockTable(id);
      used.insert(table.begin(), table.end());
      for (int32_t p = 0; p < seq.computed; ++p) {
        ASSERT_EQ(pool_[static_cast<size_t>(table[p / kBs]) * kBs + p % kBs], seq.tokens[p])
            << "op " << op << " seq " << id << " pos " << p;
      }
    }
    ASSERT_EQ(static_cast<int32_t>(used.size()), bm_.num_used_blocks()) << "op " << op;
    ASSERT_EQ(bm_.num_used_blocks() + bm_.num_free_blocks(), bm_.num_blocks());
  }

  BlockManager bm_;
  std::vector<int32_t> pool_;  // [num_blocks * block_size] token written per slot
  std::mt19937_64 rng_;
  std::map<int64_t, Seq> seqs_;
  int64_t next_id_ = 0;
  int64_t hit_tokens_ = 0;
};

TEST(BlockManagerTest, RandomOperationSequencesKeepInvariantsAndKvContent) {
  int64_t total_hits = 0;
  for (uint64_t seed = 0; seed < 40; ++seed) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    Simulation sim(/*num_blocks=*/6 + static_cast<int32_t>(seed % 10), /*caching=*/true, seed);
    sim.Run(400);
    if (HasFatalFailure()) return;
    total_hits += sim.hits();
  }
  EXPECT_GT(total_hits, 0) << "the random prompts never exercised prefix hits";
}

TEST(BlockManagerTest, RandomOperationSequencesWithoutCaching) {
  for (uint64_t seed = 100; seed < 120; ++seed) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    Simulation sim(8, /*caching=*/false, seed);
    sim.Run(300);
    if (HasFatalFailure()) return;
    EXPECT_EQ(sim.hits(), 0);
  }
}

}  // namespace
}  // namespace onecard::engine
