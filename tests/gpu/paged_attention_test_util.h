// The batches of the PagedAttention GPU tests (paged_attention_test.cc,
// paged_attention_fp8_test.cc): a case (heads, chunks, splits, kernel), its
// host buffers with block tables drawn from a shuffled pool, and their copies
// on the device.
#ifndef ONECARD_TESTS_GPU_PAGED_ATTENTION_TEST_UTIL_H_
#define ONECARD_TESTS_GPU_PAGED_ATTENTION_TEST_UTIL_H_

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "engine/kernels/paged_attention.h"
#include "engine/kernels/paged_attention_split.h"
#include "tests/gpu/gpu_test_util.h"

namespace onecard::testing {

struct AttnCase {
  std::string name;
  int32_t head_dim;
  int32_t heads;
  int32_t kv_heads;
  std::vector<std::pair<int32_t, int32_t>> chunks;  // (start_pos, length)
  int32_t splits;
  engine::AttentionKernel kernel;
  int32_t block_size = 16;  // tokens per KV block
};

inline std::vector<std::pair<int32_t, int32_t>> DecodeChunks(int32_t n, int32_t max_ctx,
                                                             uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::pair<int32_t, int32_t>> out;
  for (int32_t i = 0; i < n; ++i) out.push_back({static_cast<int32_t>(rng() % max_ctx), 1});
  return out;
}

// A case's batch on the host: chunk bounds, block tables drawn from a
// shuffled pool, random q (inside packed qkv rows) and pools.
struct Batch {
  engine::KvLayout layout;
  std::vector<int32_t> cu{0}, start, tables;
  int32_t num_seqs = 0, tokens = 0, max_blocks = 0;
  int64_t q_stride = 0;
  std::vector<uint16_t> qkv, k, v;

  Batch(const AttnCase& c, std::mt19937& rng) {
    const int32_t block_size = c.block_size;
    num_seqs = static_cast<int32_t>(c.chunks.size());
    int32_t total_blocks = 0;
    for (const auto& [s, n] : c.chunks) {
      cu.push_back(cu.back() + n);
      start.push_back(s);
      const int32_t blocks = (s + n + block_size - 1) / block_size;
      max_blocks = std::max(max_blocks, blocks);
      total_blocks += blocks;
    }
    tokens = cu.back();
    layout = {.num_blocks = total_blocks + 7,
              .block_size = block_size,
              .num_kv_heads = c.kv_heads,
              .head_dim = c.head_dim};
    std::vector<int32_t> pool(layout.num_blocks);
    std::iota(pool.begin(), pool.end(), 0);
    std::shuffle(pool.begin(), pool.end(), rng);
    tables.assign(num_seqs * max_blocks, 0);
    int32_t next = 0;
    for (int32_t s = 0; s < num_seqs; ++s) {
      const int32_t blocks = (start[s] + c.chunks[s].second + block_size - 1) / block_size;
      for (int32_t b = 0; b < blocks; ++b) tables[s * max_blocks + b] = pool[next++];
    }
    q_stride = (c.heads + 2 * c.kv_heads) * c.head_dim;
    qkv = RandomBf16(tokens * q_stride, rng, -4.0f, 4.0f);
    k = RandomBf16(layout.PoolElements(), rng, -1.0f, 1.0f);
    v = RandomBf16(layout.PoolElements(), rng, -1.0f, 1.0f);
  }

  // Attention over host buffers (pointers swapped for device ones to run).
  engine::PagedAttentionParams Params(const AttnCase& c, uint16_t* out) {
    return {.dtype = engine::DType::kBF16,
            .q = qkv.data(),
            .q_token_stride = q_stride,
            .k_cache = k.data(),
            .v_cache = v.data(),
            .out = out,
            .layout = layout,
            .num_heads = c.heads,
            .num_tokens = tokens,
            .num_seqs = num_seqs,
            .cu_query_lens = cu.data(),
            .start_pos = start.data(),
            .block_tables = tables.data(),
            .max_blocks_per_seq = max_blocks,
            .scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim))};
  }
};

// A batch's buffers on the device (out poisoned per run), and a workspace for
// the case's splits.
struct DeviceBatch {
  DeviceBuf<uint16_t> qkv, k, v, out;
  DeviceBuf<int32_t> cu, start, tables;
  int64_t ws_bytes;
  DeviceBuf<uint8_t> ws;

  DeviceBatch(const Batch& b, const AttnCase& c)
      : qkv(b.qkv),
        k(b.k),
        v(b.v),
        out(static_cast<size_t>(b.tokens) * c.heads * c.head_dim),
        cu(b.cu),
        start(b.start),
        tables(b.tables),
        ws_bytes(engine::PagedAttentionWorkspaceBytes(b.tokens, c.heads, c.head_dim, c.splits)),
        ws(ws_bytes) {}

  // Points `p` (from Batch::Params) at these buffers.
  void Point(engine::PagedAttentionParams* p) {
    p->q = qkv.get();
    p->k_cache = k.get();
    p->v_cache = v.get();
    p->out = out.get();
    p->cu_query_lens = cu.get();
    p->start_pos = start.get();
    p->block_tables = tables.get();
  }
};

}  // namespace onecard::testing

#endif  // ONECARD_TESTS_GPU_PAGED_ATTENTION_TEST_UTIL_H_
