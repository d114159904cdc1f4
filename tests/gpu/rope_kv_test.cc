// MatchesReference for Rope, KvCacheWrite and the fused RopeKvWrite (BF16
// and F32; llama3 scaling on and off; head_dim 16 / 24 / 64 / 128; tokens
// 1 / 7 / 33 at scattered positions up to 8191; slots in random,
// non-contiguous blocks, some tokens skipped with slot -1).
#include <algorithm>
#include <numeric>
#include <string>

#include "engine/kernels/kv_cache_write.h"
#include "engine/kernels/rope.h"
#include "engine/kernels/rope_kv_write.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/testing/all_close.h"

namespace onecard::testing {
namespace {

using engine::DType;

struct Shape {
  int32_t tokens;
  int32_t heads;
  int32_t kv_heads;
  int32_t head_dim;
  bool llama3;
  bool bias;
};

std::string Name(const ::testing::TestParamInfo<Shape>& info) {
  const Shape& s = info.param;
  return "t" + std::to_string(s.tokens) + "_h" + std::to_string(s.heads) + "_kv" +
         std::to_string(s.kv_heads) + "_d" + std::to_string(s.head_dim) +
         (s.llama3 ? "_llama3" : "") + (s.bias ? "_bias" : "");
}

const Shape kShapes[] = {{1, 32, 8, 128, true, false},
                         {7, 9, 3, 64, false, true},
                         {33, 4, 1, 24, false, true},
                         {7, 4, 2, 16, true, false},
                         {33, 64, 8, 128, true, true}};

engine::RopeScaling Scaling(bool llama3) {
  if (!llama3) return {};
  return {.enabled = true,
          .factor = 8.0f,
          .low_freq_factor = 1.0f,
          .high_freq_factor = 4.0f,
          .original_max_position_embeddings = 8192};
}

std::vector<int32_t> Positions(int32_t n, std::mt19937& rng) {
  std::vector<int32_t> p(n);
  for (auto& v : p) v = static_cast<int32_t>(rng() % 8192);
  return p;
}

// Distinct slots in a pool of num_blocks x block_size, a few skipped (-1).
std::vector<int32_t> Slots(int32_t n, int32_t num_slots, std::mt19937& rng) {
  std::vector<int32_t> all(num_slots);
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), rng);
  std::vector<int32_t> s(all.begin(), all.begin() + n);
  if (n > 2) s[n / 2] = -1;
  return s;
}

class RopeKvTest : public ::testing::TestWithParam<Shape> {};

TEST_P(RopeKvTest, RopeMatchesReferenceBf16) {
  const Shape s = GetParam();
  std::mt19937 rng = SeededRng(s.tokens * 7 + s.head_dim, 11);
  const int64_t stride = (s.heads + 2 * s.kv_heads) * s.head_dim;  // a packed qkv row
  std::vector<uint16_t> qkv = RandomBf16(s.tokens * stride, rng, -3.0f, 3.0f);
  const std::vector<int32_t> pos = Positions(s.tokens, rng);
  const std::vector<float> inv_freq = engine::RopeInvFreq(s.head_dim, 500000.0f, Scaling(s.llama3));
  DeviceBuf<uint16_t> d_qkv(qkv);
  DeviceBuf<int32_t> d_pos(pos);
  DeviceBuf<float> d_freq(inv_freq);
  engine::RopeParams p{.dtype = DType::kBF16,
                       .q = qkv.data(),
                       .k = qkv.data() + s.heads * s.head_dim,
                       .q_token_stride = stride,
                       .k_token_stride = stride,
                       .positions = pos.data(),
                       .inv_freq = inv_freq.data(),
                       .num_tokens = s.tokens,
                       .num_heads = s.heads,
                       .num_kv_heads = s.kv_heads,
                       .head_dim = s.head_dim};
  ASSERT_TRUE(engine::RopeRef(p).ok());
  p.q = d_qkv.get();
  p.k = d_qkv.get() + s.heads * s.head_dim;
  p.positions = d_pos.get();
  p.inv_freq = d_freq.get();
  ASSERT_TRUE(engine::Rope(p, nullptr).ok());
  EXPECT_ALL_CLOSE(ToFloats(d_qkv.Download()), ToFloats(qkv), Tolerance::For(DType::kBF16));
}

TEST_P(RopeKvTest, RopeMatchesReferenceF32) {
  const Shape s = GetParam();
  std::mt19937 rng = SeededRng(s.tokens * 7 + s.head_dim, 12);
  const int64_t q_stride = s.heads * s.head_dim + 8, k_stride = s.kv_heads * s.head_dim;
  std::vector<float> q = RandomF32(s.tokens * q_stride, rng),
                     k = RandomF32(s.tokens * k_stride, rng);
  const std::vector<int32_t> pos = Positions(s.tokens, rng);
  const std::vector<float> inv_freq = engine::RopeInvFreq(s.head_dim, 10000.0f, Scaling(s.llama3));
  DeviceBuf<float> dq(q), dk(k), d_freq(inv_freq);
  DeviceBuf<int32_t> d_pos(pos);
  engine::RopeParams p{.dtype = DType::kF32,
                       .q = q.data(),
                       .k = k.data(),
                       .q_token_stride = q_stride,
                       .k_token_stride = k_stride,
                       .positions = pos.data(),
                       .inv_freq = inv_freq.data(),
                       .num_tokens = s.tokens,
                       .num_heads = s.heads,
                       .num_kv_heads = s.kv_heads,
                       .head_dim = s.head_dim};
  ASSERT_TRUE(engine::RopeRef(p).ok());
  p.q = dq.get();
  p.k = dk.get();
  p.positions = d_pos.get();
  p.inv_freq = d_freq.get();
  ASSERT_TRUE(engine::Rope(p, nullptr).ok());
  // sincosf vs std::sin/cos of the same fp32 angle: a few ulp.
  const Tolerance tol{2e-5, 2e-4, 1e-9};
  EXPECT_ALL_CLOSE(dq.Download(), q, tol);
  EXPECT_ALL_CLOSE(dk.Download(), k, tol);
}

TEST_P(RopeKvTest, KvCacheWriteMatchesReference) {
  const Shape s = GetParam();
  std::mt19937 rng = SeededRng(s.tokens * 7 + s.head_dim, 13);
  const engine::KvLayout layout{
      .num_blocks = 11, .block_size = 16, .num_kv_heads = s.kv_heads, .head_dim = s.head_dim};
  const int64_t stride = (s.heads + 2 * s.kv_heads) * s.head_dim;
  std::vector<uint16_t> qkv = RandomBf16(s.tokens * stride, rng);
  std::vector<uint16_t> k_cache = RandomBf16(layout.PoolElements(), rng);
  std::vector<uint16_t> v_cache = RandomBf16(layout.PoolElements(), rng);
  const std::vector<int32_t> slots = Slots(s.tokens, 11 * 16, rng);
  DeviceBuf<uint16_t> d_qkv(qkv), dk(k_cache), dv(v_cache);
  DeviceBuf<int32_t> d_slots(slots);
  const int64_t k_off = s.heads * s.head_dim, v_off = k_off + s.kv_heads * s.head_dim;
  engine::KvCacheWriteParams p{.dtype = DType::kBF16,
                               .k = qkv.data() + k_off,
                               .v = qkv.data() + v_off,
                               .k_token_stride = stride,
                               .v_token_stride = stride,
                               .k_cache = k_cache.data(),
                               .v_cache = v_cache.data(),
                               .layout = layout,
                               .slot_mapping = slots.data(),
                               .num_tokens = s.tokens};
  ASSERT_TRUE(engine::KvCacheWriteRef(p).ok());
  p.k = d_qkv.get() + k_off;
  p.v = d_qkv.get() + v_off;
  p.k_cache = dk.get();
  p.v_cache = dv.get();
  p.slot_mapping = d_slots.get();
  ASSERT_TRUE(engine::KvCacheWrite(p, nullptr).ok());
  EXPECT_ALL_CLOSE(ToFloats(dk.Download()), ToFloats(k_cache), (Tolerance{0, 0, 0}));
  EXPECT_ALL_CLOSE(ToFloats(dv.Download()), ToFloats(v_cache), (Tolerance{0, 0, 0}));
}

TEST_P(RopeKvTest, RopeKvWriteMatchesReference) {
  const Shape s = GetParam();
  std::mt19937 rng = SeededRng(s.tokens * 7 + s.head_dim, 14);
  const engine::KvLayout layout{
      .num_blocks = 13, .block_size = 16, .num_kv_heads = s.kv_heads, .head_dim = s.head_dim};
  const int64_t stride = (s.heads + 2 * s.kv_heads) * s.head_dim;
  std::vector<uint16_t> qkv = RandomBf16(s.tokens * stride, rng, -3.0f, 3.0f);
  std::vector<uint16_t> bias = RandomBf16(stride, rng, -0.5f, 0.5f);
  std::vector<uint16_t> k_cache = RandomBf16(layout.PoolElements(), rng);
  std::vector<uint16_t> v_cache = RandomBf16(layout.PoolElements(), rng);
  const std::vector<int32_t> pos = Positions(s.tokens, rng);
  const std::vector<int32_t> slots = Slots(s.tokens, 13 * 16, rng);
  const std::vector<float> inv_freq = engine::RopeInvFreq(s.head_dim, 500000.0f, Scaling(s.llama3));
  DeviceBuf<uint16_t> d_qkv(qkv), d_bias(bias), dk(k_cache), dv(v_cache);
  DeviceBuf<int32_t> d_pos(pos), d_slots(slots);
  DeviceBuf<float> d_freq(inv_freq);
  engine::RopeKvWriteParams p{.dtype = DType::kBF16,
                              .qkv = qkv.data(),
                              .bias = s.bias ? bias.data() : nullptr,
                              .k_cache = k_cache.data(),
                              .v_cache = v_cache.data(),
                              .layout = layout,
                              .num_heads = s.heads,
                              .positions = pos.data(),
                              .slot_mapping = slots.data(),
                              .inv_freq = inv_freq.data(),
                              .num_tokens = s.tokens};
  ASSERT_TRUE(engine::RopeKvWriteRef(p).ok());
  p.qkv = d_qkv.get();
  p.bias = s.bias ? d_bias.get() : nullptr;
  p.k_cache = dk.get();
  p.v_cache = dv.get();
  p.positions = d_pos.get();
  p.slot_mapping = d_slots.get();
  p.inv_freq = d_freq.get();
  ASSERT_TRUE(engine::RopeKvWrite(p, nullptr).ok());
  const Tolerance tol = Tolerance::For(DType::kBF16);
  EXPECT_ALL_CLOSE(ToFloats(d_qkv.Download()), ToFloats(qkv), tol);
  EXPECT_ALL_CLOSE(ToFloats(dk.Download()), ToFloats(k_cache), tol);
  EXPECT_ALL_CLOSE(ToFloats(dv.Download()), ToFloats(v_cache), tol);
}

INSTANTIATE_TEST_SUITE_P(Shapes, RopeKvTest, ::testing::ValuesIn(kShapes), Name);

}  // namespace
}  // namespace onecard::testing
