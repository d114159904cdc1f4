// Tests of SwapSpace (host block ids: lowest first, running out as a value,
// Release deferred to EndStep, invariants after every call, randomized
// operations) and KvBlockRuns (coalescing device <-> host pairs).
#include "engine/kv_cache/swap_space.h"

#include <map>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace onecard::engine {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

#define ASSERT_INVARIANTS(s) ASSERT_TRUE((s).CheckInvariants().ok()) << (s).CheckInvariants()

std::vector<int32_t> Ids(std::optional<std::span<int32_t>> table) {
  if (!table.has_value()) return {};
  return {table->begin(), table->end()};
}

TEST(SwapSpaceTest, HandsOutTheLowestFreeBlocksInOrder) {
  SwapSpace s(6);
  EXPECT_THAT(Ids(s.Allocate(1, 2)), ElementsAre(0, 1));
  EXPECT_THAT(Ids(s.Allocate(2, 3)), ElementsAre(2, 3, 4));
  ASSERT_INVARIANTS(s);
  s.Free(1);
  EXPECT_THAT(Ids(s.Allocate(3, 3)), ElementsAre(0, 1, 5));
  EXPECT_THAT(s.Table(2), ElementsAre(2, 3, 4));
  EXPECT_EQ(s.num_used_blocks(), 6);
  ASSERT_INVARIANTS(s);
}

TEST(SwapSpaceTest, RunningOutIsAValueAndChangesNothing) {
  SwapSpace s(3);
  ASSERT_TRUE(s.Allocate(1, 2).has_value());
  EXPECT_FALSE(s.Allocate(2, 2).has_value());
  EXPECT_FALSE(s.HasSequence(2));
  EXPECT_EQ(s.num_free_blocks(), 1);
  ASSERT_INVARIANTS(s);
  SwapSpace none(0);
  EXPECT_FALSE(none.Allocate(1, 1).has_value());
  ASSERT_INVARIANTS(none);
}

TEST(SwapSpaceTest, ReleasedBlocksAreFreeOnlyAfterTheStep) {
  SwapSpace s(2);
  ASSERT_TRUE(s.Allocate(1, 2).has_value());
  s.Release(1);
  EXPECT_FALSE(s.HasSequence(1));
  EXPECT_THAT(s.Table(1), IsEmpty());
  EXPECT_EQ(s.num_free_blocks(), 0);  // not reusable within the step
  EXPECT_FALSE(s.Allocate(2, 1).has_value());
  ASSERT_INVARIANTS(s);
  s.EndStep();
  EXPECT_EQ(s.num_free_blocks(), 2);
  EXPECT_THAT(Ids(s.Allocate(2, 2)), ElementsAre(0, 1));
  ASSERT_INVARIANTS(s);
}

TEST(SwapSpaceTest, UnknownIdsAreIgnored) {
  SwapSpace s(2);
  s.Free(7);
  s.Release(7);
  s.EndStep();
  EXPECT_EQ(s.num_free_blocks(), 2);
  ASSERT_INVARIANTS(s);
}

TEST(SwapSpaceTest, RandomOperationsKeepTheInvariants) {
  std::mt19937_64 rng(7);
  auto uniform = [&](int32_t lo, int32_t hi) {
    return std::uniform_int_distribution<int32_t>(lo, hi)(rng);
  };
  SwapSpace s(20);
  std::map<int64_t, int32_t> held;  // seq -> blocks
  int32_t released = 0;
  for (int64_t op = 0; op < 3000; ++op) {
    const int action = uniform(0, 3);
    if (action == 0) {
      const int32_t n = uniform(1, 6);
      const bool fits = n <= s.num_free_blocks();
      EXPECT_EQ(s.Allocate(op, n).has_value(), fits);
      if (fits) held[op] = n;
    } else if (!held.empty() && action < 3) {
      auto it = std::next(held.begin(), uniform(0, static_cast<int32_t>(held.size()) - 1));
      if (action == 1) {
        s.Free(it->first);
      } else {
        s.Release(it->first);
        released += it->second;
      }
      held.erase(it);
    } else {
      s.EndStep();
      released = 0;
    }
    int32_t used = released;
    for (const auto& [seq, n] : held) used += n;
    ASSERT_EQ(s.num_used_blocks(), used);
    ASSERT_INVARIANTS(s);
  }
}

TEST(KvBlockRunsTest, MergesPairsConsecutiveOnBothSides) {
  const std::vector<KvBlockCopy> copies = {{5, 2}, {3, 0}, {4, 1}, {9, 3}, {10, 7}, {11, 8}};
  EXPECT_THAT(KvBlockRuns(copies),
              ElementsAre(KvBlockRun{3, 0, 3}, KvBlockRun{10, 7, 2}, KvBlockRun{9, 3, 1}));
}

TEST(KvBlockRunsTest, DescendingOrScatteredPairsStayApart) {
  const std::vector<KvBlockCopy> copies = {{2, 0}, {1, 1}, {0, 2}};
  EXPECT_THAT(KvBlockRuns(copies),
              ElementsAre(KvBlockRun{0, 2, 1}, KvBlockRun{1, 1, 1}, KvBlockRun{2, 0, 1}));
  EXPECT_THAT(KvBlockRuns({}), IsEmpty());
}

// A device block shared by two swapped-out sequences is copied to two host
// blocks: both copies stay.
TEST(KvBlockRunsTest, ASharedDeviceBlockKeepsBothCopies) {
  const std::vector<KvBlockCopy> copies = {{4, 0}, {4, 2}, {5, 1}};
  EXPECT_THAT(KvBlockRuns(copies), ElementsAre(KvBlockRun{4, 2, 1}, KvBlockRun{4, 0, 2}));
}

}  // namespace
}  // namespace onecard::engine
