// Tests of KvCacheWriteRef and KvSlot (engine/kernels/kv_cache_write*): tokens
// of several sequences with random non-contiguous block tables land where the
// layout says (offsets computed here by hand from kv_layout.h's formula), the
// rest of the poisoned pools stays untouched, padding slots are skipped, and
// slots past the pool are errors. FP8 pools: every code is the spec's
// E4m3CodeOf(x, scale[kv_head]) of the value as stored in the input's dtype,
// and reads back within E4M3's rounding of it (checked here from the format's
// spacing, not from fp8.h) or at +-448 * scale past the range; outlier
// scales, saturation, no NaN from finite input, and the scales' errors.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <tuple>

#include "engine/common/fp8.h"
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

// What an FP8 pool element must read back as for the value x (fp32) and its
// head's scale: not NaN; +-448 * scale from |x| >= 448 * scale on (E4M3's
// largest finite); else within half a step of E4M3's grid of x / scale: 2^-4
// relative for normals (3 mantissa bits), 2^-10 absolute below 2^-6
// (subnormal steps of 2^-9), both times scale.
::testing::AssertionResult ReadsBackAsE4m3Of(float x, uint8_t code, float scale) {
  const float got = E4m3ToFloat(code) * scale;
  if (std::isnan(got)) return ::testing::AssertionFailure() << "NaN for " << x;
  const float max = 448.0f * scale;
  if (std::abs(x) >= max) {
    if (got == std::copysign(max, x)) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << x << " read back as " << got << ", not +-" << max;
  }
  const double bound = std::max(std::abs(double(x)) / 16, std::ldexp(double(scale), -10));
  if (std::abs(double(got) - x) <= bound) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << x << " read back as " << got << " (scale " << scale
                                       << "), more than " << bound << " away";
}

// FP8 pools from F32 and BF16 inputs of magnitude up to 8, with per-head
// scales 1/64, 40, 0.37, 3e-4 (OutlierKvScales): saturated, subnormal and
// ordinary codes; unwritten codes keep their poison (0x7f, E4M3's NaN).
TEST_P(KvCacheWriteRefTest, Fp8WritesEachValueThroughItsHeadsScale) {
  const auto [num_tokens, head_dim, block_size] = GetParam();
  const int32_t num_kv_heads = 4;
  const KvLayout layout{40, block_size, num_kv_heads, head_dim};
  const std::vector<float> k_scales = testing::OutlierKvScales(num_kv_heads);
  std::vector<float> v_scales = k_scales;
  std::reverse(v_scales.begin(), v_scales.end());  // K and V scales differ per head
  std::vector<int32_t> slots = testing::Shuffled(40 * block_size, 57);
  slots[num_tokens / 2] = -1;  // padding: skipped
  const int64_t token = int64_t(num_kv_heads) * head_dim;
  for (const DType dtype : {DType::kF32, DType::kBF16}) {
    SCOPED_TRACE(DTypeName(dtype));
    std::vector<float> k = RandomFloats(num_tokens * token, 58, -8.0f, 8.0f);
    std::vector<float> v = RandomFloats(num_tokens * token, 59, -8.0f, 8.0f);
    const std::vector<uint16_t> k16 = testing::ToBf16(k), v16 = testing::ToBf16(v);
    if (dtype == DType::kBF16) {  // the values as stored in the input's dtype
      k = testing::FromBf16(k16);
      v = testing::FromBf16(v16);
    }
    std::vector<uint8_t> k_cache(layout.PoolElements(), 0x7f), v_cache(layout.PoolElements(), 0x7f);
    KvCacheWriteParams p{dtype,
                         dtype == DType::kF32 ? static_cast<const void*>(k.data()) : k16.data(),
                         dtype == DType::kF32 ? static_cast<const void*>(v.data()) : v16.data(),
                         token,
                         token,
                         k_cache.data(),
                         v_cache.data(),
                         layout,
                         slots.data(),
                         num_tokens,
                         {k_scales.data(), v_scales.data()}};
    ASSERT_TRUE(KvCacheWriteRef(p).ok());
    int64_t written = 0;
    for (int32_t t = 0; t < num_tokens; ++t) {
      if (slots[t] < 0) continue;
      for (int64_t i = 0; i < token; ++i) {
        const int64_t at = slots[t] * token + i;
        const int32_t h = static_cast<int32_t>(i / head_dim);
        ASSERT_EQ(k_cache[at], E4m3CodeOf(k[t * token + i], k_scales[h])) << t << " " << i;
        ASSERT_EQ(v_cache[at], E4m3CodeOf(v[t * token + i], v_scales[h])) << t << " " << i;
        ASSERT_TRUE(ReadsBackAsE4m3Of(k[t * token + i], k_cache[at], k_scales[h]));
        ASSERT_TRUE(ReadsBackAsE4m3Of(v[t * token + i], v_cache[at], v_scales[h]));
        ++written;
      }
    }
    int64_t poisoned = 0;
    for (int64_t i = 0; i < layout.PoolElements(); ++i) {
      poisoned += k_cache[i] == 0x7f;
      poisoned += v_cache[i] == 0x7f;
    }
    EXPECT_EQ(poisoned, 2 * (layout.PoolElements() - written));  // no code written is NaN
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

// One token of one head (head_dim 16) of extreme values through scales 1 and
// 2^-20: +-448 * scale and beyond (up to FLT_MAX and infinity) saturate at
// +-448 * scale, zeros stay zeros of their sign, nothing becomes NaN.
TEST(KvCacheWriteRefFp8Test, SaturatesAtTheRangeAndNeverMakesNaN) {
  const float inf = std::numeric_limits<float>::infinity();
  const float big = std::numeric_limits<float>::max();
  const KvLayout layout{1, 1, 1, 16};
  const int32_t slot = 0;
  for (const float scale : {1.0f, std::ldexp(1.0f, -20)}) {
    SCOPED_TRACE(scale);
    const float max = 448.0f * scale;
    const std::vector<float> k = {
        max,  -max,  449.0f * scale, -460.0f * scale, big,  -big,        inf,    -inf,
        0.0f, -0.0f, 1e6f * scale,   -1e6f * scale,   1.0f, 464 * scale, 1e-30f, -1e-30f};
    const std::vector<float> want = {
        max, -max, max,  -max, max, -max, max, -max, 0.0f, -0.0f, max, -max, std::min(1.0f, max),
        max, 0.0f, -0.0f};
    std::vector<uint8_t> k_cache(16, 0x7f), v_cache(16, 0x7f);
    KvCacheWriteParams p{DType::kF32,     k.data(),       k.data(), 16,    16,
                         k_cache.data(),  v_cache.data(), layout,   &slot, 1,
                         {&scale, &scale}};
    ASSERT_TRUE(KvCacheWriteRef(p).ok());
    for (int i = 0; i < 16; ++i) {
      const float got = E4m3ToFloat(k_cache[i]) * scale;
      EXPECT_EQ(got, want[i]) << i;
      EXPECT_EQ(std::signbit(got), std::signbit(want[i])) << i;
      EXPECT_EQ(k_cache[i], v_cache[i]) << i;
    }
  }
}

// A half-set fp8 pair and every kind of bad scale are InvalidArgument naming
// the field, and nothing is written.
TEST(KvCacheWriteRefFp8Test, BadScalesNameTheField) {
  const KvLayout layout{4, 16, 4, 8};
  std::vector<float> kv(32, 0.5f);
  std::vector<uint8_t> k_cache(layout.PoolElements(), 0x7f), v_cache(layout.PoolElements(), 0x7f);
  const int32_t slot = 3;
  std::vector<float> k_scales = {1, 1, 1, 1}, v_scales = {1, 1, 1, 1};
  KvCacheWriteParams p{DType::kF32,
                       kv.data(),
                       kv.data(),
                       32,
                       32,
                       k_cache.data(),
                       v_cache.data(),
                       layout,
                       &slot,
                       1,
                       {k_scales.data(), nullptr}};
  const auto expect_error = [&](const std::string& field) {
    const absl::Status status = KvCacheWriteRef(p);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << field;
    EXPECT_NE(status.message().find(field), std::string::npos) << status;
  };
  expect_error("fp8.v is null");
  p.fp8 = {nullptr, v_scales.data()};
  expect_error("fp8.k is null");
  p.fp8 = {k_scales.data(), v_scales.data()};
  ASSERT_TRUE(KvCacheWriteRef(p).ok());
  std::fill(k_cache.begin(), k_cache.end(), 0x7f);
  k_scales[3] = 0.0f;
  expect_error("fp8.k[3] = 0 ");
  k_scales[3] = 1.0f;
  for (const float bad :
       {-1.0f, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    v_scales[1] = bad;
    expect_error("fp8.v[1] = ");
  }
  for (uint8_t code : k_cache) ASSERT_EQ(code, 0x7f);
}

}  // namespace
}  // namespace onecard::engine
