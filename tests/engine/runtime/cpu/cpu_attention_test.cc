// Tests of PagedAttentionCpu (engine/runtime/cpu/cpu_attention.cc): against
// PagedAttentionRef and dense attention in double on paged batches that mix
// decode tokens, whole prompts and continuing chunks (random non-contiguous
// block tables, contexts ending mid-block, GQA groups of 1 to 8, head_dim
// 64/128 and odd 24), with the code of every instruction set this processor
// runs, which all compute the same bits; each token's output is bitwise the
// same computed alone; errors match the reference's checks.
#include "engine/runtime/cpu/cpu_attention.h"

#include <cmath>
#include <cstring>

#include "gtest/gtest.h"
#include "tests/engine/kernels/kernel_test_util.h"
#include "tests/engine/kernels/paged_batch_util.h"
#include "tests/testing/all_close.h"

namespace onecard::engine {
namespace {

using onecard::testing::Tolerance;
using testing::Batch;
using testing::MakeBatch;
using testing::MakeParams;
using testing::Shape;

class PagedAttentionCpuTest : public ::testing::TestWithParam<Shape> {};

TEST_P(PagedAttentionCpuTest, MatchesReference) {
  const Shape s = GetParam();
  const Batch b = MakeBatch(s, 81);
  const int64_t q_stride = int64_t(s.num_heads + 2 * s.num_kv_heads) * s.head_dim;
  const int32_t n = b.cu_query_lens.back();
  const std::vector<float> q = testing::RandomFloats(n * q_stride, 82, -2.0f, 2.0f);
  std::vector<float> want = testing::Poisoned(int64_t(n) * s.num_heads * s.head_dim);
  ASSERT_TRUE(PagedAttentionRef(MakeParams(s, b, DType::kF32, q.data(), q_stride, b.k_cache.data(),
                                           b.v_cache.data(), want.data()))
                  .ok());
  const std::vector<float> dense = testing::DenseAttention(s, b, q, q_stride);
  ThreadPool pool(3);
  std::vector<float> portable;
  for (CpuIsa isa : SupportedCpuIsas()) {  // kGeneric first
    SCOPED_TRACE(CpuIsaName(isa));
    std::vector<float> got = testing::Poisoned(int64_t(n) * s.num_heads * s.head_dim);
    ASSERT_TRUE(PagedAttentionCpu(pool,
                                  MakeParams(s, b, DType::kF32, q.data(), q_stride,
                                             b.k_cache.data(), b.v_cache.data(), got.data()),
                                  isa)
                    .ok());
    EXPECT_ALL_CLOSE(got, want, (Tolerance{2e-5, 1e-4, 1e-9}));
    EXPECT_ALL_CLOSE(got, dense, (Tolerance{2e-5, 1e-4, 1e-9}));
    // Every instruction set's code adds the same products in the same order.
    if (isa == CpuIsa::kGeneric) portable = got;
    EXPECT_EQ(std::memcmp(got.data(), portable.data(), got.size() * sizeof(float)), 0);
  }
}

TEST_P(PagedAttentionCpuTest, EachChunkAloneIsBitwiseEqual) {
  const Shape s = GetParam();
  const Batch b = MakeBatch(s, 83);
  const int64_t q_stride = int64_t(s.num_heads) * s.head_dim;
  const int32_t n = b.cu_query_lens.back();
  const std::vector<float> q = testing::RandomFloats(n * q_stride, 84);
  ThreadPool pool(2);
  for (CpuIsa isa : SupportedCpuIsas()) {
    SCOPED_TRACE(CpuIsaName(isa));
    std::vector<float> together(n * q_stride);
    PagedAttentionParams p = MakeParams(s, b, DType::kF32, q.data(), q_stride, b.k_cache.data(),
                                        b.v_cache.data(), together.data());
    ASSERT_TRUE(PagedAttentionCpu(pool, p, isa).ok());
    for (int32_t i = 0; i < s.num_seqs; ++i) {
      const int32_t first = b.cu_query_lens[i], len = b.cu_query_lens[i + 1] - first;
      const int32_t cu[2] = {0, len};
      std::vector<float> alone(len * q_stride);
      PagedAttentionParams one = p;
      one.q = q.data() + first * q_stride;
      one.out = alone.data();
      one.num_tokens = len;
      one.num_seqs = 1;
      one.cu_query_lens = cu;
      one.start_pos = &b.start_pos[i];
      one.block_tables = &b.block_tables[i * b.max_blocks_per_seq];
      ASSERT_TRUE(PagedAttentionCpu(pool, one, isa).ok());
      ASSERT_EQ(alone, std::vector<float>(together.begin() + first * q_stride,
                                          together.begin() + (first + len) * q_stride))
          << "chunk " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, PagedAttentionCpuTest,
                         ::testing::Values(Shape{1, 64, 9, 3, 16}, Shape{7, 64, 9, 3, 16},
                                           Shape{33, 64, 9, 3, 16}, Shape{7, 128, 8, 2, 5},
                                           Shape{33, 128, 4, 4, 16}, Shape{7, 24, 4, 1, 1},
                                           // groups past what one AVX-512 pass holds
                                           Shape{7, 64, 7, 1, 5}, Shape{7, 64, 16, 2, 16},
                                           Shape{7, 128, 12, 2, 16}, Shape{5, 128, 10, 2, 3}));

TEST(PagedAttentionCpuErrorsTest, SameChecksAsTheReference) {
  const Shape s{3, 64, 4, 2, 16};
  Batch b = MakeBatch(s, 85);
  std::vector<float> q(b.cu_query_lens.back() * 4 * 64), out(q.size());
  const PagedAttentionParams p = MakeParams(s, b, DType::kF32, q.data(), 4 * 64, b.k_cache.data(),
                                            b.v_cache.data(), out.data());
  ThreadPool pool(2);
  PagedAttentionParams bf16 = p;
  bf16.dtype = DType::kBF16;
  EXPECT_EQ(PagedAttentionCpu(pool, bf16).code(), absl::StatusCode::kUnimplemented);
  PagedAttentionParams fp8 = p;  // FP8 pools: the backend keeps their values in F32 ones
  const float scales[2] = {1.0f, 1.0f};
  fp8.kv_fp8 = {scales, scales};
  EXPECT_EQ(PagedAttentionCpu(pool, fp8).code(), absl::StatusCode::kUnimplemented);
  fp8.kv_fp8.v = nullptr;
  EXPECT_EQ(PagedAttentionCpu(pool, fp8).code(), absl::StatusCode::kInvalidArgument);
  b.block_tables[2 * b.max_blocks_per_seq] = -5;
  const absl::Status status = PagedAttentionCpu(pool, p);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("block_tables[2][0] = -5"), std::string::npos) << status;
}

}  // namespace
}  // namespace onecard::engine
