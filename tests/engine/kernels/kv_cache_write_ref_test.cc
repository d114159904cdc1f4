// Tests of KvCacheWriteRef and KvSlot (engine/kernels/kv_cache_write*): tokens
// of several sequences with random non-contiguous block tables land where the
// layout says (offsets computed here by hand from kv_layout.h's formula), the
// rest of the poisoned pools stays untouched, padding slots are skipped, and
// slots past the pool are errors.
#include <cmath>
#include <cstring>
#include <tuple>

#include "engine/kernels/kv_cache_write.h"
#include "gtest/gtest.h"
#include "tests/engine/kernels/kernel_test_util.h"

namespace onecard::engine {
namespace {

using testing::Poisoned;
using testing::RandomFloats;
using testing::RandomInts;

// (num_tokens, head_dim, block_size)
class KvCacheWriteRefTest : public ::testing::TestWithParam<std::tuple<int32_t, int32_t, int32_t>> {
};

TEST_P(KvCacheWriteRefTest, WritesEachTokenToItsSlot) {
  const auto [num_tokens, head_dim, block_size] = GetParam();
  const int32_t num_kv_heads = 3, num_blocks = 40;
  const KvLayout layout{num_blocks, block_size, num_kv_heads, head_dim};
  // Each token belongs to one of 4 sequences with shuffled block tables.
  const std::vector<int32_t> blocks = testing::Shuffled(num_blocks, 51);
  const int32_t blocks_per_seq = num_blocks / 4;
  const std::vector<int32_t> seq_of = RandomInts(num_tokens, 52, 0, 4);
  std::vector<int32_t> slots(num_tokens);
  for (int32_t t = 0; t < num_tokens; ++t) {
    // Distinct positions per token: t itself (< blocks_per_seq * block_size).
    const int32_t* table = blocks.data() + seq_of[t] * blocks_per_seq;
    slots[t] = KvSlot(layout, table, t);
    EXPECT_EQ(slots[t], table[t / block_size] * block_size + t % block_size);
  }
  slots[num_tokens / 2] = -1;                          // padding: skipped
  const int64_t stride = 5 * num_kv_heads * head_dim;  // k and v inside a wider row
  const std::vector<float> act = RandomFloats(num_tokens * stride, 53);
  std::vector<float> k_cache = Poisoned(layout.PoolElements());
  std::vector<float> v_cache = Poisoned(layout.PoolElements());
  const float* k = act.data() + num_kv_heads * head_dim;
  const float* v = act.data() + 3 * num_kv_heads * head_dim;
  KvCacheWriteParams p{
      DType::kF32,  k,         v, stride, stride, k_cache.data(), v_cache.data(), layout,
      slots.data(), num_tokens};
  ASSERT_TRUE(KvCacheWriteRef(p).ok());

  std::vector<bool> written(layout.PoolElements(), false);
  for (int32_t t = 0; t < num_tokens; ++t) {
    if (slots[t] < 0) continue;
    for (int32_t h = 0; h < num_kv_heads; ++h) {
      for (int32_t d = 0; d < head_dim; ++d) {
        const int64_t at = (int64_t(slots[t]) * num_kv_heads + h) * head_dim + d;
        ASSERT_EQ(k_cache[at], k[t * stride + h * head_dim + d]) << t << " " << h << " " << d;
        ASSERT_EQ(v_cache[at], v[t * stride + h * head_dim + d]) << t << " " << h << " " << d;
        written[at] = true;
      }
    }
  }
  for (int64_t i = 0; i < layout.PoolElements(); ++i) {
    if (!written[i]) ASSERT_TRUE(std::isnan(k_cache[i]) && std::isnan(v_cache[i])) << i;
  }
}

TEST_P(KvCacheWriteRefTest, Bf16CopiesBits) {
  const auto [num_tokens, head_dim, block_size] = GetParam();
  const KvLayout layout{40, block_size, 2, head_dim};
  const std::vector<int32_t> slots = testing::Shuffled(40 * block_size, 54);
  const int64_t token = 2 * head_dim;
  const std::vector<uint16_t> k = testing::ToBf16(RandomFloats(num_tokens * token, 55));
  const std::vector<uint16_t> v = testing::ToBf16(RandomFloats(num_tokens * token, 56));
  std::vector<uint16_t> k_cache(layout.PoolElements()), v_cache(layout.PoolElements());
  KvCacheWriteParams p{DType::kBF16,   k.data(),       v.data(), token,        token,
                       k_cache.data(), v_cache.data(), layout,   slots.data(), num_tokens};
  ASSERT_TRUE(KvCacheWriteRef(p).ok());
  for (int32_t t = 0; t < num_tokens; ++t) {
    EXPECT_EQ(std::memcmp(&k_cache[slots[t] * token], &k[t * token], token * 2), 0) << t;
    EXPECT_EQ(std::memcmp(&v_cache[slots[t] * token], &v[t * token], token * 2), 0) << t;
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, KvCacheWriteRefTest,
                         ::testing::Combine(::testing::Values(1, 7, 33), ::testing::Values(64, 128),
                                            ::testing::Values(16, 5)));

TEST(KvCacheWriteRefErrorsTest, SlotPastThePoolNamesTheToken) {
  const KvLayout layout{4, 16, 1, 8};
  std::vector<float> kv(16), k_cache(layout.PoolElements()), v_cache(layout.PoolElements());
  const std::vector<int32_t> slots = {3, 64};
  KvCacheWriteParams p{DType::kF32,    kv.data(), kv.data(),    8, 8, k_cache.data(),
                       v_cache.data(), layout,    slots.data(), 2};
  const absl::Status status = KvCacheWriteRef(p);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("slot_mapping[1]"), std::string::npos) << status;
  p.k_token_stride = 4;
  EXPECT_EQ(KvCacheWriteRef(p).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace onecard::engine
