// Tests of PagedAttentionRef (engine/kernels/paged_attention_ref.cc) against
// dense causal attention in double over each sequence's K/V, gathered here
// before they are scattered into the poisoned pools through random
// non-contiguous block tables. A batch mixes decode tokens, whole prompts and
// chunks that continue a cached prefix, with contexts ending mid-block, GQA,
// q read with a packed-qkv token stride; BF16 against the same math. FP8
// pools (per-kv-head scales with outliers): the same outputs, bit for bit,
// as F32 pools holding E4m3ToFloat(code) * scale, and dense attention over
// K/V rounded through E4M3 here; the scales' errors.
#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/common/fp8.h"
#include "engine/kernels/paged_attention.h"
#include "gtest/gtest.h"
#include "tests/engine/kernels/kernel_test_util.h"
#include "tests/engine/kernels/paged_batch_util.h"
#include "tests/testing/all_close.h"

namespace onecard::engine {
namespace {

using onecard::testing::Tolerance;
using testing::Batch;
using testing::DenseAttention;
using testing::MakeBatch;
using testing::MakeParams;
using testing::RandomFloats;
using testing::Shape;

class PagedAttentionRefTest : public ::testing::TestWithParam<Shape> {};

TEST_P(PagedAttentionRefTest, MatchesDenseAttention) {
  const Shape s = GetParam();
  const Batch b = MakeBatch(s, 61);
  // q inside packed qkv rows: stride (num_heads + 2 * num_kv_heads) * head_dim.
  const int64_t q_stride = int64_t(s.num_heads + 2 * s.num_kv_heads) * s.head_dim;
  const std::vector<float> q = RandomFloats(b.cu_query_lens.back() * q_stride, 62, -2.0f, 2.0f);
  std::vector<float> out =
      testing::Poisoned(int64_t(b.cu_query_lens.back()) * s.num_heads * s.head_dim);
  const PagedAttentionParams p = MakeParams(s, b, DType::kF32, q.data(), q_stride, b.k_cache.data(),
                                            b.v_cache.data(), out.data());
  ASSERT_TRUE(PagedAttentionRef(p).ok());
  EXPECT_ALL_CLOSE(out, DenseAttention(s, b, q, q_stride), (Tolerance{2e-5, 1e-4, 1e-9}));
}

TEST_P(PagedAttentionRefTest, Bf16MatchesDenseAttention) {
  const Shape s = GetParam();
  Batch b = MakeBatch(s, 63);
  for (auto* per_seq : {&b.k, &b.v}) {
    for (auto& x : *per_seq) x = testing::RoundToBf16(x);
  }
  const int64_t q_stride = int64_t(s.num_heads) * s.head_dim;
  const std::vector<float> q =
      testing::RoundToBf16(RandomFloats(b.cu_query_lens.back() * q_stride, 64));
  const std::vector<uint16_t> q16 = testing::ToBf16(q), k16 = testing::ToBf16(b.k_cache),
                              v16 = testing::ToBf16(b.v_cache);
  std::vector<uint16_t> out16(b.cu_query_lens.back() * q_stride, 0xffff);
  const PagedAttentionParams p =
      MakeParams(s, b, DType::kBF16, q16.data(), q_stride, k16.data(), v16.data(), out16.data());
  ASSERT_TRUE(PagedAttentionRef(p).ok());
  EXPECT_ALL_CLOSE(testing::FromBf16(out16), DenseAttention(s, b, q, q_stride),
                   Tolerance::For(DType::kBF16));
}

// A batch's pools as FP8 codes with per-kv-head scales (poison stays the
// NaN code 0x7f), and its dense K/V and F32 pools replaced by the values
// those codes read back as.
struct Fp8Pools {
  std::vector<float> k_scales, v_scales;  // [num_kv_heads]
  std::vector<uint8_t> k_codes, v_codes;  // [num_blocks, block_size, num_kv_heads, head_dim]
};

Fp8Pools RoundToFp8(Batch& b) {
  const int32_t heads = b.layout.num_kv_heads, head_dim = b.layout.head_dim;
  Fp8Pools f{testing::OutlierKvScales(heads), testing::OutlierKvScales(heads), {}, {}};
  std::reverse(f.v_scales.begin(), f.v_scales.end());
  const auto encode = [&](std::vector<float>& pool, const std::vector<float>& scales) {
    std::vector<uint8_t> codes(pool.size());
    for (size_t i = 0; i < pool.size(); ++i) {
      const float scale = scales[(i / head_dim) % heads];
      codes[i] = std::isnan(pool[i]) ? 0x7f : E4m3CodeOf(pool[i], scale);
      pool[i] = std::isnan(pool[i]) ? pool[i] : E4m3ToFloat(codes[i]) * scale;
    }
    return codes;
  };
  f.k_codes = encode(b.k_cache, f.k_scales);
  f.v_codes = encode(b.v_cache, f.v_scales);
  const auto round_dense = [&](std::vector<float>& x, const std::vector<float>& scales) {
    for (size_t i = 0; i < x.size(); ++i) {
      const float scale = scales[(i / head_dim) % heads];
      x[i] = RoundThroughE4m3(x[i], scale);
    }
  };
  for (auto& k : b.k) round_dense(k, f.k_scales);
  for (auto& v : b.v) round_dense(v, f.v_scales);
  return f;
}

TEST_P(PagedAttentionRefTest, Fp8PoolsMatchF32PoolsOfTheirValues) {
  const Shape s = GetParam();
  Batch b = MakeBatch(s, 67);
  for (auto* per_seq : {&b.k, &b.v}) {  // magnitudes up to 8: some saturate at scale 1/64
    for (auto& x : *per_seq) {
      for (float& e : x) e *= 8.0f;
    }
  }
  for (auto* pool : {&b.k_cache, &b.v_cache}) {
    for (float& e : *pool) e *= 8.0f;
  }
  const Fp8Pools f = RoundToFp8(b);
  const int64_t q_stride = int64_t(s.num_heads) * s.head_dim;
  const std::vector<float> q = RandomFloats(b.cu_query_lens.back() * q_stride, 68, -2.0f, 2.0f);
  std::vector<float> out_fp8 = testing::Poisoned(b.cu_query_lens.back() * q_stride);
  std::vector<float> out_f32 = testing::Poisoned(out_fp8.size());
  PagedAttentionParams p = MakeParams(s, b, DType::kF32, q.data(), q_stride, f.k_codes.data(),
                                      f.v_codes.data(), out_fp8.data());
  p.kv_fp8 = {f.k_scales.data(), f.v_scales.data()};
  ASSERT_TRUE(PagedAttentionRef(p).ok());
  ASSERT_TRUE(PagedAttentionRef(MakeParams(s, b, DType::kF32, q.data(), q_stride, b.k_cache.data(),
                                           b.v_cache.data(), out_f32.data()))
                  .ok());
  for (size_t i = 0; i < out_fp8.size(); ++i) {
    ASSERT_FALSE(std::isnan(out_fp8[i])) << i;
    ASSERT_EQ(out_fp8[i], out_f32[i]) << i;
  }
  EXPECT_ALL_CLOSE(out_fp8, DenseAttention(s, b, q, q_stride), (Tolerance{2e-5, 1e-4, 1e-9}));
}

// BF16 q and out over FP8 pools: dense attention over the E4M3 values.
TEST_P(PagedAttentionRefTest, Bf16QueriesOverFp8Pools) {
  const Shape s = GetParam();
  Batch b = MakeBatch(s, 69);
  const Fp8Pools f = RoundToFp8(b);
  const int64_t q_stride = int64_t(s.num_heads) * s.head_dim;
  const std::vector<float> q =
      testing::RoundToBf16(RandomFloats(b.cu_query_lens.back() * q_stride, 70));
  const std::vector<uint16_t> q16 = testing::ToBf16(q);
  std::vector<uint16_t> out16(b.cu_query_lens.back() * q_stride, 0xffff);
  PagedAttentionParams p = MakeParams(s, b, DType::kBF16, q16.data(), q_stride, f.k_codes.data(),
                                      f.v_codes.data(), out16.data());
  p.kv_fp8 = {f.k_scales.data(), f.v_scales.data()};
  ASSERT_TRUE(PagedAttentionRef(p).ok());
  EXPECT_ALL_CLOSE(testing::FromBf16(out16), DenseAttention(s, b, q, q_stride),
                   Tolerance::For(DType::kBF16));
}

INSTANTIATE_TEST_SUITE_P(Shapes, PagedAttentionRefTest,
                         ::testing::Values(Shape{1, 64, 9, 3, 16}, Shape{7, 64, 9, 3, 16},
                                           Shape{33, 64, 9, 3, 16}, Shape{1, 128, 8, 2, 16},
                                           Shape{7, 128, 8, 2, 5}, Shape{33, 128, 4, 4, 16},
                                           Shape{7, 64, 8, 1, 1}));

class PagedAttentionRefErrorsTest : public ::testing::Test {
 protected:
  const Shape s{3, 64, 4, 2, 16};
  Batch b = MakeBatch(s, 65);
  std::vector<float> q = RandomFloats(b.cu_query_lens.back() * 4 * 64, 66);
  std::vector<float> out = std::vector<float>(q.size());
  PagedAttentionParams p = MakeParams(s, b, DType::kF32, q.data(), 4 * 64, b.k_cache.data(),
                                      b.v_cache.data(), out.data());
};

TEST_F(PagedAttentionRefErrorsTest, BlockOutsideThePoolNamesTheEntry) {
  ASSERT_TRUE(PagedAttentionRef(p).ok());
  b.block_tables[1 * b.max_blocks_per_seq] = b.layout.num_blocks;
  const absl::Status status = PagedAttentionRef(p);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("block_tables[1][0]"), std::string::npos) << status;
}

TEST_F(PagedAttentionRefErrorsTest, TableTooShort) {
  p.max_blocks_per_seq = 1;
  p.start_pos = nullptr;
  EXPECT_EQ(PagedAttentionRef(p).code(), absl::StatusCode::kInvalidArgument);
  p.start_pos = b.start_pos.data();
  EXPECT_EQ(PagedAttentionRef(p).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(PagedAttentionRefErrorsTest, BadShapes) {
  p.num_heads = 3;  // not a multiple of 2 kv heads
  EXPECT_EQ(PagedAttentionRef(p).code(), absl::StatusCode::kInvalidArgument);
  p.num_heads = 4;
  p.num_tokens += 1;  // disagrees with cu_query_lens
  EXPECT_EQ(PagedAttentionRef(p).code(), absl::StatusCode::kInvalidArgument);
  p.num_tokens -= 1;
  p.dtype = DType::kF16;
  EXPECT_EQ(PagedAttentionRef(p).code(), absl::StatusCode::kUnimplemented);
}

TEST_F(PagedAttentionRefErrorsTest, Fp8ScalesNameTheField) {
  std::vector<float> k_scales = {1.0f, 1.0f}, v_scales = {1.0f, 1.0f};
  const auto expect_error = [&](const std::string& field) {
    const absl::Status status = PagedAttentionRef(p);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << field;
    EXPECT_NE(status.message().find(field), std::string::npos) << status;
  };
  p.kv_fp8 = {k_scales.data(), nullptr};
  expect_error("kv_fp8.v is null");
  EXPECT_EQ(ValidatePagedAttention(p).code(), absl::StatusCode::kInvalidArgument);
  p.kv_fp8 = {nullptr, v_scales.data()};
  expect_error("kv_fp8.k is null");
  p.kv_fp8 = {k_scales.data(), v_scales.data()};
  k_scales[1] = 0.0f;
  expect_error("kv_fp8.k[1] = 0 ");
  EXPECT_TRUE(ValidatePagedAttention(p).ok());  // values are the implementation's to check
  k_scales[1] = 1.0f;
  for (const float bad :
       {-2.0f, std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::infinity()}) {
    v_scales[0] = bad;
    expect_error("kv_fp8.v[0] = ");
  }
}

}  // namespace
}  // namespace onecard::engine
