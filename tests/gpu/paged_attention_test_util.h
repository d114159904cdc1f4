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

// The MatchesReference cases of the BF16 suite (paged_attention_test.cc's
// header lists what they cover); the FP8 suite takes those whose head_dim is a
// multiple of 16.
inline std::vector<AttnCase> PagedAttentionCases() {
  const auto kAuto = engine::AttentionKernel::kAuto;
  const auto kGeneral = engine::AttentionKernel::kGeneral;
  const auto kFlashMma = engine::AttentionKernel::kFlashMma;
  return {
      {"decode_b1_d128_g4", 128, 32, 8, {{389, 1}}, 1, kAuto},
      // The token's own key in the second round of 64 keys (the FP8 decode
      // kernel issues two rounds' copies before its fused RoPE writes it).
      {"decode_b1_d128_g4_pos100", 128, 32, 8, {{100, 1}}, 1, kAuto},
      {"decode_b1_d64_g4_pos127", 64, 16, 4, {{127, 1}}, 1, kAuto},
      {"decode_b1_d128_g4_split8", 128, 32, 8, {{4000, 1}}, 8, kAuto},
      {"decode_b7_d128_g4_split4",
       128,
       32,
       8,
       {{5, 1}, {17, 1}, {100, 1}, {1023, 1}, {0, 1}, {64, 1}, {2047, 1}},
       4,
       kAuto},
      {"decode_b33_d64_g3", 64, 9, 3, DecodeChunks(33, 700, 1), 1, kAuto},
      {"decode_b33_d64_g3_split3", 64, 9, 3, DecodeChunks(33, 700, 2), 3, kAuto},
      {"decode_b7_d16_g2_split3", 16, 4, 2, DecodeChunks(7, 300, 3), 3, kAuto},
      {"decode_b7_d24_g4", 24, 4, 1, DecodeChunks(7, 300, 4), 1, kAuto},
      {"decode_b7_d128_g8_split2", 128, 64, 8, DecodeChunks(7, 1500, 5), 2, kAuto},
      {"decode_b7_d128_g12", 128, 96, 8, DecodeChunks(7, 600, 6), 1, kAuto},
      {"decode_b7_d128_g1", 128, 8, 8, DecodeChunks(7, 600, 7), 1, kAuto},
      {"decode_b7_d128_g4_split8_short", 128, 32, 8, DecodeChunks(7, 100, 8), 8, kAuto},
      // Block sizes that are not a power of two (the decode kernel divides),
      // and smaller than the 8 or 16 keys one pass of its loads covers.
      {"decode_b33_d128_g4_bs24", 128, 32, 8, DecodeChunks(33, 900, 11), 1, kAuto, 24},
      {"decode_b7_d64_g3_bs5_split3", 64, 9, 3, DecodeChunks(7, 400, 12), 3, kAuto, 5},
      {"decode_b7_d128_g4_bs4_split2", 128, 32, 8, DecodeChunks(7, 300, 13), 2, kAuto, 4},
      // The largest group (16 query heads a kv head): every mma row is live.
      {"decode_b7_d64_g16_split2", 64, 32, 2, DecodeChunks(7, 500, 14), 2, kAuto},
      // As many tokens as chunks but not one each: the decode kernel's
      // token -> sequence shortcut must not apply.
      {"decode_zero_length_chunk_d128_g4",
       128,
       32,
       8,
       {{5, 1}, {9, 0}, {17, 2}, {30, 1}},
       2,
       kAuto},
      // A batch that fills more than one wave of resident blocks.
      {"decode_b200_d128_g4", 128, 32, 8, DecodeChunks(200, 450, 15), 1, kAuto},
      {"decode_b33_d128_g4_split2_general", 128, 32, 8, DecodeChunks(33, 900, 9), 2, kGeneral},
      {"decode_b7_d64_g3_general", 64, 9, 3, DecodeChunks(7, 700, 10), 1, kGeneral},
      {"prefill_d128_g4_flash", 128, 32, 8, {{0, 200}}, 1, kAuto},
      {"prefill_d128_g4_general", 128, 32, 8, {{0, 200}}, 1, kGeneral},
      {"chunked_d64_g3_flash", 64, 9, 3, {{300, 77}, {0, 1}, {31, 130}}, 1, kAuto},
      {"chunked_d64_g3_general", 64, 9, 3, {{300, 77}, {0, 1}, {31, 130}}, 1, kGeneral},
      {"mixed_d128_g4_flash", 128, 32, 8, {{57, 1}, {0, 33}, {700, 1}, {129, 64}}, 1, kAuto},
      {"prefill_d24_g4", 24, 4, 1, {{0, 45}, {13, 20}}, 1, kAuto},
      {"prefill_d16_g2", 16, 4, 2, {{7, 33}, {0, 7}}, 1, kAuto},
      {"prefill_d128_g8_long", 128, 64, 8, {{0, 1100}}, 1, kAuto},
      // The prefill kernels (wgmma on sm_90a builds, kAuto; mma.sync,
      // kFlashMma) on awkward chunks: starts and ends off the 64-key tiles
      // and off the blocks, several chunks of one step (the heaviest query
      // tiles run first), blocks of 24 and 5 tokens, one-token chunks
      // among them, and a chunk of one tile exactly.
      {"prefill_d128_g4_mma", 128, 32, 8, {{0, 200}}, 1, kFlashMma},
      {"chunked_d64_g3_mma", 64, 9, 3, {{300, 77}, {0, 1}, {31, 130}}, 1, kFlashMma},
      {"chunked_d128_g4_bs24", 128, 32, 8, {{37, 300}, {0, 64}, {5, 1}, {130, 71}}, 1, kAuto, 24},
      {"chunked_d128_g4_bs24_mma",
       128,
       32,
       8,
       {{37, 300}, {0, 64}, {5, 1}, {130, 71}},
       1,
       kFlashMma,
       24},
      {"chunked_d64_g2_bs5", 64, 8, 4, {{61, 129}, {0, 3}, {2000, 65}}, 1, kAuto, 5},
      {"prefill_d128_g1_mid", 128, 8, 8, {{1000, 513}}, 1, kAuto},
      // Groups whose heads do not divide the 64 rows of the wgmma kernel's
      // GQA-packed tiles (12: 5 tokens x 12 heads), and the largest group.
      {"chunked_d128_g12", 128, 96, 8, {{3, 150}, {0, 7}}, 1, kAuto},
      {"prefill_d64_g16", 64, 32, 2, {{0, 90}}, 1, kAuto},
      {"prefill_d64_g1_one_tile", 64, 4, 4, {{0, 64}}, 1, kAuto},
      {"prefill_d64_g4_short", 64, 32, 8, {{0, 30}}, 1, kAuto},
      {"prefill_d64_g4", 64, 32, 8, {{0, 200}}, 1, kAuto},
      {"prefill_d64_g4_mid", 64, 32, 8, {{100, 200}}, 1, kAuto},
  };
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

// Whether every chunk of the case is one token (a decode batch).
inline bool OneTokenChunks(const AttnCase& c) {
  return std::all_of(c.chunks.begin(), c.chunks.end(),
                     [](const auto& chunk) { return chunk.second == 1; });
}

// A decode batch's cache slots: each token's own position in its block
// table, except the middle token's (-1: not written) when there are more
// than two.
inline std::vector<int32_t> DecodeSlots(const AttnCase& c, const Batch& b) {
  std::vector<int32_t> slots(b.tokens);
  for (int32_t t = 0; t < b.tokens; ++t) {
    const int32_t pos = b.start[t];
    slots[t] = b.tables[t * b.max_blocks + pos / c.block_size] * c.block_size + pos % c.block_size;
  }
  if (b.tokens > 2) slots[b.tokens / 2] = -1;
  return slots;
}

}  // namespace onecard::testing

#endif  // ONECARD_TESTS_GPU_PAGED_ATTENTION_TEST_UTIL_H_
