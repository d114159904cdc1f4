// Tests of KvSwapCopier: swapped-out blocks come back byte for byte into
// other device blocks, parts of different block sizes keep their own host
// ranges (HostPart says where), each run costs one copy a part, and ids out
// of range are refused before anything is copied.
#include "engine/kv_cache/swap_copy.h"

#include <cstring>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace onecard::engine {
namespace {

using ::testing::HasSubstr;

constexpr int32_t kDeviceBlocks = 10;
constexpr int32_t kHostBlocks = 6;

// Two parts of 24- and 8-byte blocks (a BF16 and an FP8 layer), seeded
// random bytes, and the swap space the copier works on.
class SwapCopyTest : public ::testing::Test {
 protected:
  SwapCopyTest() : k_(kDeviceBlocks * 24), v_(kDeviceBlocks * 8) {
    std::mt19937 rng(3);
    for (char& c : k_) c = static_cast<char>(rng());
    for (char& c : v_) c = static_cast<char>(rng());
    const std::vector<KvPoolPart> parts = {{k_.data(), 24}, {v_.data(), 8}};
    host_.assign(kHostBlocks * KvSwapCopier::BlockBytes(parts), 0);
    copier_ = KvSwapCopier(parts, kDeviceBlocks, host_.data(), kHostBlocks);
  }
  absl::Status Copy(std::span<const KvBlockCopy> copies, KvSwapDirection direction) {
    return copier_.ForEachRun(copies, direction, [&](char* dst, const char* src, int64_t bytes) {
      std::memcpy(dst, src, bytes);
      ++calls_;
      return absl::OkStatus();
    });
  }
  std::vector<char> Block(const std::vector<char>& pool, int32_t block, int64_t bytes) const {
    return {pool.begin() + block * bytes, pool.begin() + (block + 1) * bytes};
  }

  std::vector<char> k_, v_, host_;
  KvSwapCopier copier_;
  int calls_ = 0;
};

TEST_F(SwapCopyTest, BlocksComeBackIntoOtherDeviceBlocks) {
  EXPECT_EQ(copier_.block_bytes(), 32);
  const std::vector<char> k0 = k_, v0 = v_;
  // Device 2, 3, 4 -> host 0, 1, 2 (one run) and device 7 -> host 5.
  const std::vector<KvBlockCopy> out = {{2, 0}, {3, 1}, {4, 2}, {7, 5}};
  ASSERT_TRUE(Copy(out, KvSwapDirection::kOut).ok());
  EXPECT_EQ(calls_, 2 * 2);  // two runs, two parts
  std::fill(k_.begin(), k_.end(), 0);
  std::fill(v_.begin(), v_.end(), 0);
  const std::vector<KvBlockCopy> in = {{9, 0}, {0, 1}, {1, 2}, {5, 5}};
  ASSERT_TRUE(Copy(in, KvSwapDirection::kIn).ok());
  const int32_t from[] = {2, 3, 4, 7};
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(Block(k_, in[i].device_block, 24), Block(k0, from[i], 24)) << i;
    EXPECT_EQ(Block(v_, in[i].device_block, 8), Block(v0, from[i], 8)) << i;
  }
  EXPECT_EQ(Block(k_, 6, 24), std::vector<char>(24, 0));  // untouched
}

TEST_F(SwapCopyTest, EachPartHasItsOwnHostRange) {
  ASSERT_TRUE(Copy(std::vector<KvBlockCopy>{{4, 5}}, KvSwapDirection::kOut).ok());
  // K's range: host blocks of 24 bytes; V's starts after all of them.
  EXPECT_EQ(Block(host_, 5, 24), Block(k_, 4, 24));
  const std::vector<char> v_host(host_.begin() + kHostBlocks * 24 + 5 * 8,
                                 host_.begin() + kHostBlocks * 24 + 6 * 8);
  EXPECT_EQ(v_host, Block(v_, 4, 8));
}

TEST_F(SwapCopyTest, HostPartIsWhereEachPartsCopiesLand) {
  EXPECT_EQ(copier_.HostPart(0), host_.data());
  EXPECT_EQ(copier_.HostPart(1), host_.data() + kHostBlocks * 24);
  ASSERT_TRUE(Copy(std::vector<KvBlockCopy>{{7, 2}}, KvSwapDirection::kOut).ok());
  EXPECT_EQ(std::vector<char>(copier_.HostPart(1) + 2 * 8, copier_.HostPart(1) + 3 * 8),
            Block(v_, 7, 8));
}

TEST_F(SwapCopyTest, IdsOutOfRangeAreRefusedBeforeAnyCopy) {
  for (const KvBlockCopy& bad : {KvBlockCopy{kDeviceBlocks, 0}, KvBlockCopy{0, kHostBlocks},
                                 KvBlockCopy{-1, 0}, KvBlockCopy{0, -1}}) {
    const std::vector<KvBlockCopy> copies = {{1, 1}, bad};
    const absl::Status s = Copy(copies, KvSwapDirection::kIn);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("outside the pools"));
  }
  EXPECT_EQ(calls_, 0);
}

TEST_F(SwapCopyTest, TheFirstCopyErrorIsReturned) {
  const absl::Status s = copier_.ForEachRun(
      std::vector<KvBlockCopy>{{1, 1}}, KvSwapDirection::kOut,
      [](char*, const char*, int64_t) { return absl::InternalError("copy failed"); });
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
}

}  // namespace
}  // namespace onecard::engine
