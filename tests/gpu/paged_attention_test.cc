// MatchesReference for PagedAttention / PagedAttentionSplit: decode batches of
// 1 / 7 / 33 / 200 sequences and prefill / chunked-prefill / mixed batches; head_dim
// 16 / 24 / 64 / 128; GQA groups 1 to 16; contexts ending mid-block; KV
// blocks of 16, 24, 5 and 4 tokens; a zero-length chunk; block
// tables drawn from a shuffled pool (non-contiguous); split-K 1 to 8 (with
// splits left empty by short contexts); the flash kernels (decode, and both
// prefill kernels: wgmma and mma.sync) and the general kernel on the same
// shapes; and the decode batches
// again with the step's RoPE and cache write fused in (FusedRopeMatchesReference);
// an L2 prefetch alongside changes no bit (MatchesReference's second run).
// Tolerance: the output is BF16 (2^-9 relative rounding) and the flash kernel
// rounds P to BF16 before P V (each weight off by <= 2^-9 relative), so the
// error is a few 1e-3 of max|V| = 1 at worst: atol 3e-3, rtol 2e-2, NMSE 1e-4.
#include "engine/kernels/paged_attention.h"

#include <algorithm>
#include <numeric>
#include <string>
#include <string_view>
#include <utility>

#include "engine/kernels/paged_attention_split.h"
#include "engine/kernels/rope.h"
#include "engine/kernels/rope_kv_write.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/paged_attention_test_util.h"
#include "tests/testing/all_close.h"

namespace onecard::testing {
namespace {

using engine::DType;

class PagedAttentionTest : public ::testing::TestWithParam<AttnCase> {};

TEST_P(PagedAttentionTest, MatchesReference) {
  const AttnCase& c = GetParam();
  std::mt19937 rng = SeededRng(std::hash<std::string>()(c.name) & 0xffff, 21);
  Batch b(c, rng);
  std::vector<uint16_t> want(b.tokens * c.heads * c.head_dim);
  engine::PagedAttentionParams p = b.Params(c, want.data());
  ASSERT_TRUE(engine::PagedAttentionRef(p).ok());
  DeviceBatch d(b, c);
  d.Point(&p);
  // The second run also asks the L2 cache for memory of no concern to it
  // (3 MiB and a ragged 40 bytes past it; the flash decode kernel's hint):
  // the same output, bit for bit.
  DeviceBuf<uint8_t> other((3 << 20) + 40);
  std::vector<uint16_t> first;
  for (int run = 0; run < 2; ++run) {  // twice on one workspace: no state carries over
    d.out.Poison();
    engine::L2Prefetch prefetch;
    if (run == 1) prefetch.range[1] = {other.get(), static_cast<int64_t>(other.size())};
    const absl::Status st = engine::PagedAttentionSplit(p,
                                                        {.num_splits = c.splits,
                                                         .workspace = d.ws.get(),
                                                         .workspace_bytes = d.ws_bytes,
                                                         .kernel = c.kernel,
                                                         .prefetch = prefetch},
                                                        nullptr);
    ASSERT_TRUE(st.ok()) << st;
    ASSERT_CUDA_OK(cudaDeviceSynchronize());
    const std::vector<uint16_t> out = d.out.Download();
    EXPECT_ALL_CLOSE(ToFloats(out), ToFloats(want), (Tolerance{3e-3, 2e-2, 1e-4})) << "run " << run;
    if (run == 0) first = out;
    if (run == 1) EXPECT_EQ(out, first) << "with a prefetch";
  }
}

// The step's RoPE and cache write fused into decode attention
// (PagedAttentionSplitOptions::rope) against RopeKvWriteRef then
// PagedAttentionRef: the output and both pools. Raw q/k/v with a bias on
// every other case and llama3 scaling on the others; one token's slot is -1
// (its key not written: it reads what the pool holds, as after
// RopeKvWrite). The flash decode cases take the fused kernel; the general
// kernel and the other head_dims run RopeKvWrite first.
TEST_P(PagedAttentionTest, FusedRopeMatchesReference) {
  const AttnCase& c = GetParam();
  if (!OneTokenChunks(c)) GTEST_SKIP() << "RoPE fuses into decode batches of one-token chunks";
  const uint32_t seed = std::hash<std::string>()(c.name) & 0xffff;
  std::mt19937 rng = SeededRng(seed, 22);
  Batch b(c, rng);
  const bool bias = seed % 2 == 0;
  const std::vector<uint16_t> bias_host =
      bias ? RandomBf16(b.q_stride, rng, -0.5f, 0.5f) : std::vector<uint16_t>{};
  const std::vector<int32_t> slots = DecodeSlots(c, b);
  const engine::RopeScaling scaling =
      bias ? engine::RopeScaling{}
           : engine::RopeScaling{.enabled = true,
                                 .factor = 8.0f,
                                 .low_freq_factor = 1.0f,
                                 .high_freq_factor = 4.0f,
                                 .original_max_position_embeddings = 8192};
  const std::vector<float> inv_freq = engine::RopeInvFreq(c.head_dim, 500000.0f, scaling);
  std::vector<uint16_t> qkv = b.qkv, k = b.k, v = b.v;  // the reference's, rotated / written
  engine::RopeKvWriteParams rope{.dtype = DType::kBF16,
                                 .qkv = qkv.data(),
                                 .bias = bias ? bias_host.data() : nullptr,
                                 .k_cache = k.data(),
                                 .v_cache = v.data(),
                                 .layout = b.layout,
                                 .num_heads = c.heads,
                                 .positions = b.start.data(),
                                 .slot_mapping = slots.data(),
                                 .inv_freq = inv_freq.data(),
                                 .num_tokens = b.tokens};
  ASSERT_TRUE(engine::RopeKvWriteRef(rope).ok());
  std::vector<uint16_t> want(b.tokens * c.heads * c.head_dim);
  engine::PagedAttentionParams p = b.Params(c, want.data());
  p.q = qkv.data();
  p.k_cache = k.data();
  p.v_cache = v.data();
  ASSERT_TRUE(engine::PagedAttentionRef(p).ok());

  DeviceBatch d(b, c);
  d.Point(&p);
  DeviceBuf<uint16_t> dbias(bias ? bias_host : std::vector<uint16_t>(1));
  DeviceBuf<int32_t> dslots(slots);
  DeviceBuf<float> dfreq(inv_freq);
  rope.qkv = d.qkv.get();
  rope.bias = bias ? dbias.get() : nullptr;
  rope.k_cache = d.k.get();
  rope.v_cache = d.v.get();
  rope.positions = d.start.get();
  rope.slot_mapping = dslots.get();
  rope.inv_freq = dfreq.get();
  d.out.Poison();
  const absl::Status st = engine::PagedAttentionSplit(p,
                                                      {.num_splits = c.splits,
                                                       .workspace = d.ws.get(),
                                                       .workspace_bytes = d.ws_bytes,
                                                       .kernel = c.kernel,
                                                       .rope = &rope},
                                                      nullptr);
  ASSERT_TRUE(st.ok()) << st;
  ASSERT_CUDA_OK(cudaDeviceSynchronize());
  EXPECT_ALL_CLOSE(ToFloats(d.out.Download()), ToFloats(want), (Tolerance{3e-3, 2e-2, 1e-4}));
  const Tolerance pool_tol = Tolerance::For(DType::kBF16);
  EXPECT_ALL_CLOSE(ToFloats(d.k.Download()), ToFloats(k), pool_tol) << "k pool";
  EXPECT_ALL_CLOSE(ToFloats(d.v.Download()), ToFloats(v), pool_tol) << "v pool";
}

TEST(PagedAttentionTest, FusedRopeNamesTheMismatchedField) {
  std::vector<uint16_t> buf(64);
  engine::PagedAttentionParams p;
  p.dtype = DType::kBF16;
  p.q = buf.data();
  p.layout = {.num_blocks = 1, .block_size = 16, .num_kv_heads = 1, .head_dim = 64};
  p.num_heads = 1;
  p.num_seqs = 1;
  p.num_tokens = 1;
  p.q_token_stride = 3 * 64;
  engine::RopeKvWriteParams rope{.dtype = DType::kBF16, .qkv = buf.data() + 1};
  rope.layout = p.layout;
  rope.num_heads = 1;
  rope.num_tokens = 1;
  const absl::Status st = engine::PagedAttentionSplit(p, {.rope = &rope}, nullptr);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_NE(st.message().find("rope.qkv (must be q)"), std::string_view::npos) << st;
}

INSTANTIATE_TEST_SUITE_P(Cases, PagedAttentionTest, ::testing::ValuesIn(PagedAttentionCases()),
                         [](const auto& info) { return info.param.name; });

TEST(PagedAttentionTest, UnsupportedHeadDimIsUnimplemented) {
  engine::PagedAttentionParams p;
  p.dtype = DType::kBF16;
  p.layout = {.num_blocks = 1, .block_size = 16, .num_kv_heads = 1, .head_dim = 80};
  p.num_heads = 1;
  p.num_seqs = 1;
  p.q_token_stride = 80;
  const absl::Status st = engine::PagedAttention(p, nullptr);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnimplemented) << st;
}

TEST(PagedAttentionTest, KvBlocksOver2GiBAreRefusedNamingTheBlockSize) {
  engine::PagedAttentionParams p;
  p.dtype = DType::kBF16;
  p.layout = {.num_blocks = 1, .block_size = 1 << 20, .num_kv_heads = 8, .head_dim = 128};
  p.num_heads = 8;
  p.num_seqs = 1;
  p.q_token_stride = 8 * 128;
  const absl::Status st = engine::PagedAttention(p, nullptr);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnimplemented) << st;
  EXPECT_NE(st.message().find("layout.block_size 1048576"), std::string_view::npos) << st;
}

}  // namespace
}  // namespace onecard::testing
