// MatchesReference for the FP8 E4M3 KV cache (KvFp8Scales: kv_layout.h,
// kv_fp8.cuh) in the CUDA kernels that read and write it:
// - PagedAttentionSplit over FP8 pools (the flash decode and prefill kernels
//   and the general one) against PagedAttentionRef in fp32 over the pools'
//   values (code * scale of the kv head), on the BF16 suite's shapes whose
//   head_dim is a multiple of 16. The kv heads' value ranges cycle through
//   1, 0.02 and 8 (K) and 0.02, 8, 1 (V), so the scales differ 400x between
//   neighbouring heads and a scale applied to the wrong head shows.
// - the decode kernel with the step's RoPE and cache write fused in, and
//   RopeKvWrite and KvCacheWrite alone: the codes they write against
//   E4m3CodeOf(value, scale) of the BF16 reference's values (engine/common/
//   fp8.h, itself tested against ml_dtypes), with values past +-448 * scale
//   (saturated, never NaN).
// Tolerance of the output: BF16 rounding of the output (2^-9 relative) and P
// rounded to f16 (2^-11 relative a weight) over values up to 8: atol 1e-2,
// rtol 2e-2, NMSE 1e-4.
#include <algorithm>
#include <cmath>
#include <string>
#include <string_view>
#include <vector>

#include "engine/common/fp8.h"
#include "engine/kernels/bf16.h"
#include "engine/kernels/kv_cache_write.h"
#include "engine/kernels/paged_attention.h"
#include "engine/kernels/paged_attention_split.h"
#include "engine/kernels/rope.h"
#include "engine/kernels/rope_kv_write.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/paged_attention_test_util.h"
#include "tests/testing/all_close.h"

namespace onecard::testing {
namespace {

using engine::AttentionKernel;
using engine::DType;

constexpr float kRanges[] = {1.0f, 0.02f, 8.0f};

// The BF16 suite's cases whose head_dim is a multiple of 16 (FP8 rows are
// 16-byte chunks of codes), and head_dim 32 decode.
std::vector<AttnCase> Fp8Cases() {
  std::vector<AttnCase> out;
  for (AttnCase& c : PagedAttentionCases()) {
    if (c.head_dim % 16 == 0) out.push_back(std::move(c));
  }
  out.push_back({"decode_b7_d32_g4", 32, 8, 2, DecodeChunks(7, 300, 4), 1, AttentionKernel::kAuto});
  return out;
}

// FP8 pools for a batch: codes of values uniform in +-range of their kv head,
// scale range / 448; and the values the codes stand for.
struct Fp8Pools {
  std::vector<float> k_scale, v_scale;  // [kv_heads]
  std::vector<uint8_t> k, v;            // codes
  std::vector<float> k_values, v_values;

  Fp8Pools(const engine::KvLayout& layout, std::mt19937& rng) {
    const int32_t heads = layout.num_kv_heads;
    for (int32_t h = 0; h < heads; ++h) {
      k_scale.push_back(kRanges[h % 3] / engine::kE4m3Max);
      v_scale.push_back(kRanges[(h + 1) % 3] / engine::kE4m3Max);
    }
    const int64_t n = layout.PoolElements();
    std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
    for (auto [codes, values, scales] :
         {std::tuple{&k, &k_values, &k_scale}, std::tuple{&v, &v_values, &v_scale}}) {
      codes->resize(n);
      values->resize(n);
      for (int64_t i = 0; i < n; ++i) {
        const float scale = (*scales)[(i / layout.head_dim) % heads];
        (*codes)[i] = engine::FloatToE4m3(unit(rng) * engine::kE4m3Max);
        (*values)[i] = engine::E4m3ToFloat((*codes)[i]) * scale;
      }
    }
  }

  // Re-derives a pool's values after its codes changed.
  void Refresh(const engine::KvLayout& layout) {
    for (int64_t i = 0; i < static_cast<int64_t>(k.size()); ++i) {
      const int64_t h = (i / layout.head_dim) % layout.num_kv_heads;
      k_values[i] = engine::E4m3ToFloat(k[i]) * k_scale[h];
      v_values[i] = engine::E4m3ToFloat(v[i]) * v_scale[h];
    }
  }
};

// The reference output in fp32: q (BF16 values) against the pools' values.
std::vector<float> ReferenceOut(const AttnCase& c, Batch& b, const std::vector<uint16_t>& qkv,
                                const Fp8Pools& pools) {
  const std::vector<float> q = ToFloats(qkv);
  std::vector<float> want(static_cast<size_t>(b.tokens) * c.heads * c.head_dim);
  engine::PagedAttentionParams p = b.Params(c, nullptr);
  p.dtype = DType::kF32;
  p.q = q.data();
  p.k_cache = pools.k_values.data();
  p.v_cache = pools.v_values.data();
  p.out = want.data();
  const absl::Status st = engine::PagedAttentionRef(p);
  EXPECT_TRUE(st.ok()) << st;
  return want;
}

const Tolerance kOutTol{1e-2, 2e-2, 1e-4};

class PagedAttentionFp8Test : public ::testing::TestWithParam<AttnCase> {};

TEST_P(PagedAttentionFp8Test, MatchesReference) {
  const AttnCase& c = GetParam();
  std::mt19937 rng = SeededRng(std::hash<std::string>()(c.name) & 0xffff, 31);
  Batch b(c, rng);
  const Fp8Pools pools(b.layout, rng);
  const std::vector<float> want = ReferenceOut(c, b, b.qkv, pools);
  DeviceBatch d(b, c);
  DeviceBuf<uint8_t> k(pools.k), v(pools.v);
  DeviceBuf<float> k_scale(pools.k_scale), v_scale(pools.v_scale);
  engine::PagedAttentionParams p = b.Params(c, nullptr);
  d.Point(&p);
  p.k_cache = k.get();
  p.v_cache = v.get();
  p.kv_fp8 = {k_scale.get(), v_scale.get()};
  for (int run = 0; run < 2; ++run) {
    d.out.Poison();
    const absl::Status st = engine::PagedAttentionSplit(p,
                                                        {.num_splits = c.splits,
                                                         .workspace = d.ws.get(),
                                                         .workspace_bytes = d.ws_bytes,
                                                         .kernel = c.kernel},
                                                        nullptr);
    ASSERT_TRUE(st.ok()) << st;
    ASSERT_CUDA_OK(cudaDeviceSynchronize());
    EXPECT_ALL_CLOSE(ToFloats(d.out.Download()), want, kOutTol) << "run " << run;
  }
}

// What RopeKvWriteRef (BF16) leaves for the tokens' new keys, encoded as the
// FP8 cache stores them: codes[slot] = E4m3CodeOf(value, scale).
void EncodeWritten(const engine::KvLayout& layout, const std::vector<int32_t>& slots,
                   const std::vector<float>& k_written, const std::vector<float>& v_written,
                   Fp8Pools* pools) {
  const int64_t row = static_cast<int64_t>(layout.num_kv_heads) * layout.head_dim;
  for (int32_t slot : slots) {
    if (slot < 0) continue;
    for (int64_t i = 0; i < row; ++i) {
      const int64_t at = slot * row + i;
      const int64_t h = i / layout.head_dim;
      pools->k[at] = engine::E4m3CodeOf(k_written[at], pools->k_scale[h]);
      pools->v[at] = engine::E4m3CodeOf(v_written[at], pools->v_scale[h]);
    }
  }
  pools->Refresh(layout);
}

// Codes written by a kernel against the expected ones, as values: the
// kernel's RoPE may round a value to the neighbouring BF16 (sincosf), which
// can move its code one step (2^-3 relative; 2^-9 * scale below 2^-6 * scale).
void ExpectSameValues(const std::vector<uint8_t>& got, const std::vector<uint8_t>& want,
                      const std::vector<float>& scales, int32_t head_dim, const char* what) {
  std::vector<float> g(got.size()), w(want.size());
  float max_scale = 0.0f;
  for (float s : scales) max_scale = std::max(max_scale, s);
  int64_t nan = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const float scale = scales[(i / head_dim) % scales.size()];
    g[i] = engine::E4m3ToFloat(got[i]) * scale;
    w[i] = engine::E4m3ToFloat(want[i]) * scale;
    nan += std::isnan(g[i]) ? 1 : 0;
  }
  EXPECT_EQ(nan, 0) << what << ": NaN codes";
  EXPECT_ALL_CLOSE(g, w, (Tolerance{max_scale / 512.0f, 0.13, 1e-4})) << what;
}

// The step's RoPE and cache write fused into decode attention over FP8
// pools (or RopeKvWrite first, for the general kernel's head_dims).
TEST_P(PagedAttentionFp8Test, FusedRopeMatchesReference) {
  const AttnCase& c = GetParam();
  if (!OneTokenChunks(c)) GTEST_SKIP() << "RoPE fuses into decode batches of one-token chunks";
  const uint32_t seed = std::hash<std::string>()(c.name) & 0xffff;
  std::mt19937 rng = SeededRng(seed, 32);
  Batch b(c, rng);
  Fp8Pools pools(b.layout, rng);
  const bool bias = seed % 2 == 0;
  const std::vector<uint16_t> bias_host =
      bias ? RandomBf16(b.q_stride, rng, -0.5f, 0.5f) : std::vector<uint16_t>{};
  const std::vector<int32_t> slots = DecodeSlots(c, b);
  const std::vector<float> inv_freq = engine::RopeInvFreq(c.head_dim, 500000.0f, {});
  // The reference: RopeKvWriteRef in BF16 into scratch pools, then encoded.
  std::vector<uint16_t> qkv = b.qkv;
  std::vector<uint16_t> k16(b.k.size()), v16(b.v.size());
  engine::RopeKvWriteParams rope{.dtype = DType::kBF16,
                                 .qkv = qkv.data(),
                                 .bias = bias ? bias_host.data() : nullptr,
                                 .k_cache = k16.data(),
                                 .v_cache = v16.data(),
                                 .layout = b.layout,
                                 .num_heads = c.heads,
                                 .positions = b.start.data(),
                                 .slot_mapping = slots.data(),
                                 .inv_freq = inv_freq.data(),
                                 .num_tokens = b.tokens};
  ASSERT_TRUE(engine::RopeKvWriteRef(rope).ok());
  const std::vector<uint8_t> k_before = pools.k, v_before = pools.v;
  Fp8Pools want_pools = pools;
  EncodeWritten(b.layout, slots, ToFloats(k16), ToFloats(v16), &want_pools);
  const std::vector<float> want = ReferenceOut(c, b, qkv, want_pools);

  DeviceBatch d(b, c);
  DeviceBuf<uint8_t> k(k_before), v(v_before);
  DeviceBuf<float> k_scale(pools.k_scale), v_scale(pools.v_scale);
  DeviceBuf<uint16_t> dbias(bias ? bias_host : std::vector<uint16_t>(1));
  DeviceBuf<int32_t> dslots(slots);
  DeviceBuf<float> dfreq(inv_freq);
  engine::PagedAttentionParams p = b.Params(c, nullptr);
  d.Point(&p);
  p.k_cache = k.get();
  p.v_cache = v.get();
  p.kv_fp8 = {k_scale.get(), v_scale.get()};
  rope.qkv = d.qkv.get();
  rope.bias = bias ? dbias.get() : nullptr;
  rope.k_cache = k.get();
  rope.v_cache = v.get();
  rope.positions = d.start.get();
  rope.slot_mapping = dslots.get();
  rope.inv_freq = dfreq.get();
  rope.fp8 = p.kv_fp8;
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
  EXPECT_ALL_CLOSE(ToFloats(d.out.Download()), want, kOutTol);
  ExpectSameValues(k.Download(), want_pools.k, pools.k_scale, c.head_dim, "k pool");
  ExpectSameValues(v.Download(), want_pools.v, pools.v_scale, c.head_dim, "v pool");
}

INSTANTIATE_TEST_SUITE_P(Cases, PagedAttentionFp8Test, ::testing::ValuesIn(Fp8Cases()),
                         [](const auto& info) { return info.param.name; });

// RopeKvWrite alone into FP8 pools: the vectorized BF16 kernel (head_dim 128,
// 64), the general one (BF16 head_dim 24, F32), with inputs past +-448 * scale.
TEST(KvFp8WriteTest, RopeKvWriteMatchesReferenceCodes) {
  struct Shape {
    DType dtype;
    int32_t head_dim, heads, kv_heads, tokens;
  };
  for (const Shape& s : {Shape{DType::kBF16, 128, 8, 2, 5}, Shape{DType::kBF16, 64, 9, 3, 17},
                         Shape{DType::kBF16, 24, 4, 2, 3}, Shape{DType::kF32, 64, 4, 2, 6}}) {
    SCOPED_TRACE(::testing::Message() << "head_dim " << s.head_dim << " tokens " << s.tokens);
    std::mt19937 rng = SeededRng(s.head_dim + s.tokens, 33);
    const engine::KvLayout layout{
        .num_blocks = 4, .block_size = 8, .num_kv_heads = s.kv_heads, .head_dim = s.head_dim};
    const int64_t row = static_cast<int64_t>(s.heads + 2 * s.kv_heads) * s.head_dim;
    // Values up to 40: past 448 * scale for the heads of range 0.02 and 1.
    std::vector<float> qkv_f = RandomF32(s.tokens * row, rng, -40.0f, 40.0f);
    std::vector<int32_t> positions(s.tokens), slots(s.tokens);
    for (int32_t t = 0; t < s.tokens; ++t) {
      positions[t] = 3 * t + 1;
      slots[t] = t == 1 ? -1 : (t * 5) % (layout.num_blocks * layout.block_size);
    }
    const std::vector<float> inv_freq = engine::RopeInvFreq(s.head_dim, 10000.0f, {});
    Fp8Pools pools(layout, rng);
    const std::vector<uint8_t> k_before = pools.k, v_before = pools.v;
    const size_t pool_n = layout.PoolElements();
    engine::RopeKvWriteParams p{.dtype = s.dtype,
                                .layout = layout,
                                .num_heads = s.heads,
                                .positions = positions.data(),
                                .slot_mapping = slots.data(),
                                .inv_freq = inv_freq.data(),
                                .num_tokens = s.tokens};
    std::vector<float> k_written(pool_n), v_written(pool_n);
    std::vector<uint16_t> qkv16;
    std::vector<float> qkv32;
    if (s.dtype == DType::kBF16) {
      qkv16.resize(qkv_f.size());
      for (size_t i = 0; i < qkv_f.size(); ++i) qkv16[i] = engine::FloatToBf16(qkv_f[i]);
      std::vector<uint16_t> q = qkv16, k16(pool_n), v16(pool_n);
      p.qkv = q.data();
      p.k_cache = k16.data();
      p.v_cache = v16.data();
      ASSERT_TRUE(engine::RopeKvWriteRef(p).ok());
      k_written = ToFloats(k16);
      v_written = ToFloats(v16);
    } else {
      qkv32 = qkv_f;
      std::vector<float> q = qkv32;
      p.qkv = q.data();
      p.k_cache = k_written.data();
      p.v_cache = v_written.data();
      ASSERT_TRUE(engine::RopeKvWriteRef(p).ok());
    }
    Fp8Pools want = pools;
    EncodeWritten(layout, slots, k_written, v_written, &want);

    DeviceBuf<uint16_t> dq16(s.dtype == DType::kBF16 ? qkv16 : std::vector<uint16_t>(1));
    DeviceBuf<float> dq32(s.dtype == DType::kF32 ? qkv32 : std::vector<float>(1));
    DeviceBuf<uint8_t> k(k_before), v(v_before);
    DeviceBuf<float> k_scale(pools.k_scale), v_scale(pools.v_scale);
    DeviceBuf<int32_t> dpos(positions), dslots(slots);
    DeviceBuf<float> dfreq(inv_freq);
    p.qkv = s.dtype == DType::kBF16 ? static_cast<void*>(dq16.get()) : dq32.get();
    p.k_cache = k.get();
    p.v_cache = v.get();
    p.positions = dpos.get();
    p.slot_mapping = dslots.get();
    p.inv_freq = dfreq.get();
    p.fp8 = {k_scale.get(), v_scale.get()};
    const absl::Status st = engine::RopeKvWrite(p, nullptr);
    ASSERT_TRUE(st.ok()) << st;
    ASSERT_CUDA_OK(cudaDeviceSynchronize());
    ExpectSameValues(k.Download(), want.k, pools.k_scale, s.head_dim, "k pool");
    ExpectSameValues(v.Download(), want.v, pools.v_scale, s.head_dim, "v pool");
  }
}

// KvCacheWrite into FP8 pools: no RoPE, so the codes are exactly
// E4m3CodeOf(x, scale), including inputs past +-448 * scale (+-448).
TEST(KvFp8WriteTest, KvCacheWriteWritesExactCodes) {
  const engine::KvLayout layout{
      .num_blocks = 3, .block_size = 4, .num_kv_heads = 3, .head_dim = 32};
  const int32_t tokens = 7;
  const int64_t row = layout.num_kv_heads * layout.head_dim;
  std::mt19937 rng = SeededRng(1, 34);
  std::vector<uint16_t> k = RandomBf16(tokens * 2 * row, rng, -30.0f, 30.0f);
  std::vector<uint16_t> v = RandomBf16(tokens * 2 * row, rng, -30.0f, 30.0f);
  k[5] = engine::FloatToBf16(3.0e38f);  // far past 448 * scale: saturates, no NaN
  v[7] = engine::FloatToBf16(-3.0e38f);
  const std::vector<int32_t> slots = {0, 5, -1, 11, 2, 7, 9};
  Fp8Pools pools(layout, rng);
  std::vector<uint8_t> want_k = pools.k, want_v = pools.v;
  for (int32_t t = 0; t < tokens; ++t) {
    if (slots[t] < 0) continue;
    for (int64_t i = 0; i < row; ++i) {
      const int64_t h = i / layout.head_dim;
      want_k[slots[t] * row + i] =
          engine::E4m3CodeOf(engine::Bf16ToFloat(k[t * 2 * row + i]), pools.k_scale[h]);
      want_v[slots[t] * row + i] =
          engine::E4m3CodeOf(engine::Bf16ToFloat(v[t * 2 * row + i]), pools.v_scale[h]);
    }
  }
  DeviceBuf<uint16_t> dk(k), dv(v);
  DeviceBuf<uint8_t> k_pool(pools.k), v_pool(pools.v);
  DeviceBuf<float> k_scale(pools.k_scale), v_scale(pools.v_scale);
  DeviceBuf<int32_t> dslots(slots);
  const absl::Status st = engine::KvCacheWrite({.dtype = DType::kBF16,
                                                .k = dk.get(),
                                                .v = dv.get(),
                                                .k_token_stride = 2 * row,
                                                .v_token_stride = 2 * row,
                                                .k_cache = k_pool.get(),
                                                .v_cache = v_pool.get(),
                                                .layout = layout,
                                                .slot_mapping = dslots.get(),
                                                .num_tokens = tokens,
                                                .fp8 = {k_scale.get(), v_scale.get()}},
                                               nullptr);
  ASSERT_TRUE(st.ok()) << st;
  ASSERT_CUDA_OK(cudaDeviceSynchronize());
  EXPECT_EQ(k_pool.Download(), want_k);
  EXPECT_EQ(v_pool.Download(), want_v);
  EXPECT_EQ(want_k[slots[0] * row + 5], 0x7e) << "saturated at +448";
}

TEST(KvFp8WriteTest, Fp8NeedsHeadDimMultipleOf16AndBothScales) {
  std::vector<float> scale(1, 1.0f);
  engine::PagedAttentionParams p;
  p.dtype = DType::kBF16;
  p.layout = {.num_blocks = 1, .block_size = 16, .num_kv_heads = 1, .head_dim = 24};
  p.num_heads = 1;
  p.num_seqs = 1;
  p.q_token_stride = 24;
  p.kv_fp8 = {scale.data(), scale.data()};
  absl::Status st = engine::PagedAttention(p, nullptr);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnimplemented) << st;
  EXPECT_NE(st.message().find("multiple of 16"), std::string_view::npos) << st;
  p.layout.head_dim = 32;
  p.q_token_stride = 32;
  p.kv_fp8.v = nullptr;
  st = engine::PagedAttention(p, nullptr);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
  EXPECT_NE(st.message().find("kv_fp8.v"), std::string_view::npos) << st;
}

}  // namespace
}  // namespace onecard::testing
