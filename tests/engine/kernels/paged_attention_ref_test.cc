// Tests of PagedAttentionRef (engine/kernels/paged_attention_ref.cc) against
// dense causal attention in double over each sequence's K/V, gathered here
// before they are scattered into the poisoned pools through random
// non-contiguous block tables. A batch mixes decode tokens, whole prompts and
// chunks that continue a cached prefix, with contexts ending mid-block, GQA,
// q read with a packed-qkv token stride; BF16 against the same math.
#include <cmath>

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

}  // namespace
}  // namespace onecard::engine
