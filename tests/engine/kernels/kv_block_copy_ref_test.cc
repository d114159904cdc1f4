// Tests of CopyKvBlocksRef (engine/kernels/kv_block_copy_ref.cc): every byte
// written is the one its (part, block, offset) names (values encode where
// they were made, checked by decoding them, not by the same indexing), the
// blocks outside the pairs keep their bytes, both directions, parts of
// different block bytes, and the errors naming the bad argument.
#include <cstdint>
#include <vector>

#include "engine/kernels/kv_block_copy.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace onecard::engine {
namespace {

using ::testing::HasSubstr;

constexpr int32_t kDeviceBlocks = 6;
constexpr int32_t kHostBlocks = 4;
const std::vector<int64_t> kBlockBytes = {24, 7, 64};

// The byte a side makes at (part, block, offset): device and host differ.
char Made(bool device, int64_t part, int64_t block, int64_t offset) {
  return static_cast<char>((device ? 0x80 : 0) ^ (part * 37 + block * 11 + offset * 3));
}

struct Pools {
  std::vector<std::vector<char>> device, host;
  std::vector<KvCopyPart> parts;
  Pools() {
    for (size_t p = 0; p < kBlockBytes.size(); ++p) {
      const int64_t b = kBlockBytes[p];
      device.emplace_back(kDeviceBlocks * b);
      host.emplace_back(kHostBlocks * b);
      for (int64_t i = 0; i < kDeviceBlocks * b; ++i) device[p][i] = Made(true, p, i / b, i % b);
      for (int64_t i = 0; i < kHostBlocks * b; ++i) host[p][i] = Made(false, p, i / b, i % b);
    }
    for (size_t p = 0; p < kBlockBytes.size(); ++p) {
      parts.push_back({device[p].data(), host[p].data(), kBlockBytes[p]});
    }
  }
  CopyKvBlocksParams Params(const std::vector<KvBlockPair>& pairs, KvCopyDirection d) const {
    return {.parts = parts,
            .pairs = pairs,
            .num_device_blocks = kDeviceBlocks,
            .num_host_blocks = kHostBlocks,
            .direction = d};
  }
};

TEST(CopyKvBlocksRefTest, ToHostWritesThePairsHostBlocksOnly) {
  Pools pools;
  const std::vector<KvBlockPair> pairs = {{5, 0}, {2, 3}};
  ASSERT_TRUE(CopyKvBlocksRef(pools.Params(pairs, KvCopyDirection::kToHost)).ok());
  for (size_t p = 0; p < kBlockBytes.size(); ++p) {
    const int64_t b = kBlockBytes[p];
    for (int64_t h = 0; h < kHostBlocks; ++h) {
      // Host block 0 holds device block 5, 3 holds 2; 1 and 2 are untouched.
      const bool copied = h == 0 || h == 3;
      const int64_t from = h == 0 ? 5 : 2;
      for (int64_t o = 0; o < b; ++o) {
        ASSERT_EQ(pools.host[p][h * b + o], copied ? Made(true, p, from, o) : Made(false, p, h, o))
            << "part " << p << " host block " << h << " byte " << o;
      }
    }
    for (int64_t i = 0; i < kDeviceBlocks * b; ++i) {
      ASSERT_EQ(pools.device[p][i], Made(true, p, i / b, i % b)) << "a source changed";
    }
  }
}

TEST(CopyKvBlocksRefTest, ToDeviceWritesThePairsDeviceBlocksOnly) {
  Pools pools;
  const std::vector<KvBlockPair> pairs = {{1, 3}, {4, 1}, {0, 2}};
  ASSERT_TRUE(CopyKvBlocksRef(pools.Params(pairs, KvCopyDirection::kToDevice)).ok());
  for (size_t p = 0; p < kBlockBytes.size(); ++p) {
    const int64_t b = kBlockBytes[p];
    for (int64_t d = 0; d < kDeviceBlocks; ++d) {
      const int64_t from = d == 1 ? 3 : d == 4 ? 1 : d == 0 ? 2 : -1;
      for (int64_t o = 0; o < b; ++o) {
        ASSERT_EQ(pools.device[p][d * b + o],
                  from >= 0 ? Made(false, p, from, o) : Made(true, p, d, o))
            << "part " << p << " device block " << d << " byte " << o;
      }
    }
  }
}

TEST(CopyKvBlocksRefTest, NoPairsChangeNothing) {
  Pools pools;
  const Pools before;
  ASSERT_TRUE(CopyKvBlocksRef(pools.Params({}, KvCopyDirection::kToHost)).ok());
  EXPECT_EQ(pools.host, before.host);
  EXPECT_EQ(pools.device, before.device);
}

TEST(CopyKvBlocksRefTest, ErrorsNameTheArgument) {
  Pools pools;
  const Pools before;
  EXPECT_THAT(CopyKvBlocksRef(pools.Params({{0, 0}, {6, 1}}, KvCopyDirection::kToHost)).message(),
              HasSubstr("pairs[1].device_block=6 is outside [0, 6)"));
  EXPECT_THAT(CopyKvBlocksRef(pools.Params({{0, -1}}, KvCopyDirection::kToDevice)).message(),
              HasSubstr("pairs[0].host_block=-1 is outside [0, 4)"));
  // Checked before any copy: nothing moved.
  EXPECT_EQ(pools.host, before.host);
  CopyKvBlocksParams p = pools.Params({{0, 0}}, KvCopyDirection::kToHost);
  p.parts = {};
  EXPECT_THAT(CopyKvBlocksRef(p).message(), HasSubstr("no parts"));
  std::vector<KvCopyPart> parts = pools.parts;
  parts[2].block_bytes = 0;
  p.parts = parts;
  EXPECT_THAT(CopyKvBlocksRef(p).message(), HasSubstr("parts[2]"));
  parts[2] = pools.parts[2];
  parts[1].host = nullptr;
  EXPECT_THAT(CopyKvBlocksRef(p).message(), HasSubstr("parts[1]"));
  p = pools.Params({{0, 0}}, KvCopyDirection::kToHost);
  p.num_host_blocks = 0;
  EXPECT_THAT(CopyKvBlocksRef(p).message(), HasSubstr("num_host_blocks=0"));
}

}  // namespace
}  // namespace onecard::engine
