// Tests of PagedAttentionRef (engine/kernels/paged_attention_ref.cc) against
// dense causal attention in double over each sequence's K/V, gathered here
// before they are scattered into the poisoned pools through random
// non-contiguous block tables. A batch mixes decode tokens, whole prompts and
// chunks that continue a cached prefix, with contexts ending mid-block, GQA,
// q read with a packed-qkv token stride; BF16 against the same math.
#include "engine/kernels/paged_attention.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "gtest/gtest.h"
#include "tests/engine/kernels/kernel_test_util.h"
#include "tests/testing/all_close.h"

namespace onecard::engine {
namespace {

using onecard::testing::Tolerance;
using testing::RandomFloats;
using testing::RandomInts;

struct Shape {
  int32_t num_seqs, head_dim, num_heads, num_kv_heads, block_size;
};

// A batch of chunks, their dense K/V, and the same K/V scattered in pools.
struct Batch {
  KvLayout layout;
  std::vector<int32_t> cu_query_lens, start_pos, block_tables;
  int32_t max_blocks_per_seq = 0;
  std::vector<std::vector<float>> k, v;  // per seq: [context, num_kv_heads, head_dim]
  std::vector<float> k_cache, v_cache;   // pools, NaN where nothing was written
};

Batch MakeBatch(const Shape& s, uint32_t seed) {
  Batch b;
  const std::vector<int32_t> lens = RandomInts(s.num_seqs, seed, 1, 40);
  const std::vector<int32_t> starts = RandomInts(s.num_seqs, seed + 1, 1, 70);
  b.cu_query_lens = {0};
  int32_t total_blocks = 0;
  std::vector<int32_t> contexts;
  for (int32_t i = 0; i < s.num_seqs; ++i) {
    // Cycle through a decode token, a whole prompt, and a continuing chunk.
    const int32_t len = i % 3 == 0 ? 1 : lens[i];
    b.start_pos.push_back(i % 3 == 1 ? 0 : starts[i]);
    b.cu_query_lens.push_back(b.cu_query_lens.back() + len);
    contexts.push_back(b.start_pos.back() + len);
    const int32_t blocks = (contexts.back() + s.block_size - 1) / s.block_size;
    b.max_blocks_per_seq = std::max(b.max_blocks_per_seq, blocks + 1);
    total_blocks += blocks;
  }
  b.layout = KvLayout{total_blocks + 3, s.block_size, s.num_kv_heads, s.head_dim};
  const std::vector<int32_t> ids = testing::Shuffled(b.layout.num_blocks, seed + 2);
  b.block_tables.assign(s.num_seqs * b.max_blocks_per_seq, -1);  // unused entries: -1
  b.k_cache = testing::Poisoned(b.layout.PoolElements());
  b.v_cache = testing::Poisoned(b.layout.PoolElements());
  const int64_t token = int64_t(s.num_kv_heads) * s.head_dim;
  for (int32_t i = 0, next = 0; i < s.num_seqs; ++i) {
    int32_t* table = &b.block_tables[i * b.max_blocks_per_seq];
    for (int32_t j = 0; j * s.block_size < contexts[i]; ++j) table[j] = ids[next++];
    b.k.push_back(RandomFloats(contexts[i] * token, seed + 10 + 2 * i));
    b.v.push_back(RandomFloats(contexts[i] * token, seed + 11 + 2 * i));
    for (int32_t p = 0; p < contexts[i]; ++p) {  // scatter by the layout's formula
      const int64_t at = (int64_t(table[p / s.block_size]) * s.block_size + p % s.block_size) * token;
      std::copy_n(&b.k[i][p * token], token, &b.k_cache[at]);
      std::copy_n(&b.v[i][p * token], token, &b.v_cache[at]);
    }
  }
  return b;
}

// Dense causal attention in double: out [num_tokens, num_heads, head_dim].
std::vector<float> DenseAttention(const Shape& s, const Batch& b, const std::vector<float>& q,
                                  int64_t q_stride) {
  const int32_t hd = s.head_dim, group = s.num_heads / s.num_kv_heads;
  std::vector<float> out(int64_t(b.cu_query_lens.back()) * s.num_heads * hd);
  for (int32_t i = 0; i < s.num_seqs; ++i) {
    for (int32_t t = b.cu_query_lens[i]; t < b.cu_query_lens[i + 1]; ++t) {
      const int32_t pos = b.start_pos[i] + t - b.cu_query_lens[i];
      for (int32_t h = 0; h < s.num_heads; ++h) {
        const float* qh = &q[t * q_stride + h * hd];
        const int64_t kv_off = int64_t(h / group) * hd;
        const int64_t kv_token = int64_t(s.num_kv_heads) * hd;
        std::vector<double> w(pos + 1);
        for (int32_t j = 0; j <= pos; ++j) {
          for (int32_t d = 0; d < hd; ++d) w[j] += double(qh[d]) * b.k[i][j * kv_token + kv_off + d];
          w[j] /= std::sqrt(double(hd));
        }
        const double max_w = *std::max_element(w.begin(), w.end());
        double sum = 0;
        for (double& x : w) sum += (x = std::exp(x - max_w));
        for (int32_t d = 0; d < hd; ++d) {
          double acc = 0;
          for (int32_t j = 0; j <= pos; ++j) acc += w[j] / sum * b.v[i][j * kv_token + kv_off + d];
          out[(int64_t(t) * s.num_heads + h) * hd + d] = static_cast<float>(acc);
        }
      }
    }
  }
  return out;
}

PagedAttentionParams MakeParams(const Shape& s, const Batch& b, DType dtype, const void* q,
                                int64_t q_stride, const void* k_cache, const void* v_cache,
                                void* out) {
  PagedAttentionParams p;
  p.dtype = dtype;
  p.q = q;
  p.q_token_stride = q_stride;
  p.k_cache = k_cache;
  p.v_cache = v_cache;
  p.out = out;
  p.layout = b.layout;
  p.num_heads = s.num_heads;
  p.num_tokens = b.cu_query_lens.back();
  p.num_seqs = s.num_seqs;
  p.cu_query_lens = b.cu_query_lens.data();
  p.start_pos = b.start_pos.data();
  p.block_tables = b.block_tables.data();
  p.max_blocks_per_seq = b.max_blocks_per_seq;
  p.scale = 1.0f / std::sqrt(float(s.head_dim));
  return p;
}

class PagedAttentionRefTest : public ::testing::TestWithParam<Shape> {};

TEST_P(PagedAttentionRefTest, MatchesDenseAttention) {
  const Shape s = GetParam();
  const Batch b = MakeBatch(s, 61);
  // q inside packed qkv rows: stride (num_heads + 2 * num_kv_heads) * head_dim.
  const int64_t q_stride = int64_t(s.num_heads + 2 * s.num_kv_heads) * s.head_dim;
  const std::vector<float> q = RandomFloats(b.cu_query_lens.back() * q_stride, 62, -2.0f, 2.0f);
  std::vector<float> out = testing::Poisoned(int64_t(b.cu_query_lens.back()) * s.num_heads * s.head_dim);
  const PagedAttentionParams p = MakeParams(s, b, DType::kF32, q.data(), q_stride,
                                            b.k_cache.data(), b.v_cache.data(), out.data());
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
  const std::vector<float> q = testing::RoundToBf16(RandomFloats(b.cu_query_lens.back() * q_stride, 64));
  const std::vector<uint16_t> q16 = testing::ToBf16(q), k16 = testing::ToBf16(b.k_cache),
                              v16 = testing::ToBf16(b.v_cache);
  std::vector<uint16_t> out16(b.cu_query_lens.back() * q_stride, 0xffff);
  const PagedAttentionParams p = MakeParams(s, b, DType::kBF16, q16.data(), q_stride, k16.data(),
                                            v16.data(), out16.data());
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
