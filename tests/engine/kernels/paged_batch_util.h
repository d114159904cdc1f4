// A paged-attention test batch, shared by the reference test and the cpu
// backend's attention test: chunks that mix decode tokens, whole prompts and
// chunks continuing a cached prefix (contexts ending mid-block), their dense
// K/V, the same K/V scattered into NaN-poisoned pools through shuffled
// (non-contiguous) block tables, and dense causal attention in double as the
// independent expectation. Header-only.
#ifndef ONECARD_TESTS_ENGINE_KERNELS_PAGED_BATCH_UTIL_H_
#define ONECARD_TESTS_ENGINE_KERNELS_PAGED_BATCH_UTIL_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "engine/kernels/paged_attention.h"
#include "tests/engine/kernels/kernel_test_util.h"

namespace onecard::engine::testing {

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

inline Batch MakeBatch(const Shape& s, uint32_t seed) {
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
      const int64_t at =
          (int64_t(table[p / s.block_size]) * s.block_size + p % s.block_size) * token;
      std::copy_n(&b.k[i][p * token], token, &b.k_cache[at]);
      std::copy_n(&b.v[i][p * token], token, &b.v_cache[at]);
    }
  }
  return b;
}

// Dense causal attention in double: out [num_tokens, num_heads, head_dim].
inline std::vector<float> DenseAttention(const Shape& s, const Batch& b,
                                         const std::vector<float>& q, int64_t q_stride) {
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
          for (int32_t d = 0; d < hd; ++d)
            w[j] += double(qh[d]) * b.k[i][j * kv_token + kv_off + d];
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

inline PagedAttentionParams MakeParams(const Shape& s, const Batch& b, DType dtype, const void* q,
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

}  // namespace onecard::engine::testing

#endif  // ONECARD_TESTS_ENGINE_KERNELS_PAGED_BATCH_UTIL_H_
