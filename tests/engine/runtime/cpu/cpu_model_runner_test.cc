// Tests of the cpu backend's ModelRunner (engine/runtime/cpu/cpu_runner.cc and
// cpu_forward.cc) on tiny random Llama-like and Qwen2-like models:
// - logits against DenseForward (tiny_model.h), an independent double-precision
//   forward pass with no paging;
// - bitwise identities the engine relies on: a sequence's logits are the same
//   alone or batched with others, prefilled in one chunk or in odd-sized
//   chunks, decoded token by token through the paged cache, and on 1 or 3
//   threads;
// - which rows come back (want_logits, all_logits) and the InvalidArgument
//   errors of bad batches, options and weights.
#include "engine/runtime/cpu/cpu_model_runner.h"

#include <functional>
#include <limits>
#include <numeric>
#include <random>

#include "absl/strings/str_cat.h"
#include "engine/common/fp8.h"
#include "engine/kernels/bf16.h"
#include "engine/model/checkpoint.h"
#include "engine/runtime/kv_scales.h"
#include "gtest/gtest.h"
#include "tests/engine/model/tiny_model.h"
#include "tests/engine/runtime/cpu/tiny_model.h"
#include "tests/testing/all_close.h"

namespace onecard::engine {
namespace {

using onecard::testing::Tolerance;

std::unique_ptr<ModelRunner> MakeRunner(Architecture arch, int threads = 2,
                                        int32_t block_size = 4) {
  const ModelConfig config = testing::TinyConfig(arch);
  CpuRunnerOptions options;
  options.num_threads = threads;
  options.kv_block_size = block_size;
  options.num_kv_blocks = 256;
  auto runner = CreateCpuModelRunnerFromWeights(config, testing::RandomWeights(config, 7), options);
  EXPECT_TRUE(runner.ok()) << runner.status();
  return std::move(runner).value();
}

std::vector<int32_t> Tokens(int n, uint32_t seed, int32_t vocab) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(n);
  for (int32_t& x : t) x = static_cast<int32_t>(rng() % vocab);
  return t;
}

// A block table of `n` distinct blocks taken from `first`, every third id
// (non-contiguous; disjoint between sequences that use different `first`).
std::vector<int32_t> Blocks(int32_t first, int32_t n) {
  std::vector<int32_t> b(n);
  for (int32_t i = 0; i < n; ++i) b[i] = first + 3 * i;
  return b;
}

// Logits of every token of `tokens`, prefilled in chunks of the given sizes.
std::vector<float> Prefill(ModelRunner& runner, const std::vector<int32_t>& tokens,
                           const std::vector<int32_t>& table, std::vector<int> chunk_sizes) {
  std::vector<float> all, logits;
  int32_t start = 0;
  for (int size : chunk_sizes) {
    BatchInput batch;
    batch.all_logits = true;
    batch.chunks.push_back({1, std::span(tokens).subspan(start, size), start, table});
    EXPECT_TRUE(runner.Forward(batch, &logits).ok());
    all.insert(all.end(), logits.begin(), logits.end());
    start += size;
  }
  return all;
}

CpuRunnerOptions KvOptions(KvCacheDtype dtype) {
  CpuRunnerOptions options;
  options.num_threads = 2;
  options.kv_block_size = 4;
  options.num_kv_blocks = 256;
  options.kv_cache_dtype = dtype;
  return options;
}

class CpuModelRunnerTest : public ::testing::TestWithParam<Architecture> {};

TEST_P(CpuModelRunnerTest, MatchesDenseForward) {
  const ModelConfig config = testing::TinyConfig(GetParam());
  auto runner = MakeRunner(GetParam());
  const std::vector<int32_t> tokens = Tokens(45, 1, config.vocab_size);
  const std::vector<float> got = Prefill(*runner, tokens, Blocks(0, 12), {45});
  const std::vector<float> want =
      testing::DenseForward(config, testing::RandomWeights(config, 7), tokens);
  // fp32 against double through a few layers of O(1) activations.
  EXPECT_ALL_CLOSE(got, want, (Tolerance{1e-4, 1e-3, 1e-9}));
}

// A KV cache in BF16, or FP8 E4M3 with the runner's calibrated scales a
// layer and kv head: the runner against DenseForward with K and V rounded
// the same way (fp8.h is checked against ml_dtypes by fp8_test). The FP8
// runner must also move away from the exact forward by more than the
// tolerance: the rounding is applied, to K and V.
TEST_P(CpuModelRunnerTest, KvCacheDtypesMatchDenseForwardWithRoundedKv) {
  const ModelConfig config = testing::TinyConfig(GetParam());
  const std::vector<int32_t> tokens = Tokens(45, 4, config.vocab_size);
  const Tolerance tol{1e-4, 1e-3, 1e-9};
  const std::vector<float> exact =
      testing::DenseForward(config, testing::RandomWeights(config, 7), tokens);
  for (const KvCacheDtype dtype : {KvCacheDtype::kBf16, KvCacheDtype::kFp8E4m3}) {
    SCOPED_TRACE(KvCacheDtypeName(dtype));
    auto runner = CreateCpuModelRunnerFromWeights(config, testing::RandomWeights(config, 7),
                                                  KvOptions(dtype));
    ASSERT_TRUE(runner.ok()) << runner.status();
    const KvScales* scales = (*runner)->kv_scales();
    ASSERT_EQ(scales != nullptr, dtype == KvCacheDtype::kFp8E4m3);
    const testing::KvRound round = [&](int64_t layer, int64_t kv_head, bool is_v, float x) {
      if (scales == nullptr) return Bf16ToFloat(FloatToBf16(x));
      const int64_t at = layer * config.num_kv_heads + kv_head;
      return RoundThroughE4m3(x, is_v ? scales->v[at] : scales->k[at]);
    };
    const std::vector<float> got = Prefill(**runner, tokens, Blocks(0, 12), {45});
    EXPECT_ALL_CLOSE(
        got, testing::DenseForward(config, testing::RandomWeights(config, 7), tokens, round), tol);
    if (dtype == KvCacheDtype::kFp8E4m3) {
      EXPECT_FALSE(::onecard::testing::AllClose(got, exact, tol));
    }
  }
}

// The calibration pass (the one Forward of an fp8 runner's creation, all
// of KvCalibrationPrompts' seeded prompts at positions from 0, the model's
// context raised to hold them whole) seen through the observer: each
// layer's scales are KvScaleFromAmax of the largest |K| (after RoPE) and |V|
// a kv head that DenseKv computes here, in double, from that layer's
// observed attention input. Layers after the first see inputs already
// shaped by the earlier layers' FP8 rounding: the observer shows the pass
// as it ran.
TEST_P(CpuModelRunnerTest, Fp8ScalesAreCalibratedFromEachLayersAmax) {
  ModelConfig config = testing::TinyConfig(GetParam());
  config.max_position_embeddings = kKvCalibrationTokens;
  std::vector<std::vector<float>> qkv_inputs(config.num_layers);  // the first pass's
  CpuRunnerOptions options = KvOptions(KvCacheDtype::kFp8E4m3);
  options.num_kv_blocks = kKvCalibrationTokens / options.kv_block_size + 4;
  options.linear_input_observer = [&](int64_t layer, LinearInput input, std::span<const float> x,
                                      int32_t) {
    if (input == LinearInput::kQkv && qkv_inputs[layer].empty()) {
      qkv_inputs[layer].assign(x.begin(), x.end());
    }
  };
  auto runner = CreateCpuModelRunnerFromWeights(config, testing::RandomWeights(config, 7), options);
  ASSERT_TRUE(runner.ok()) << runner.status();
  const KvScales* scales = (*runner)->kv_scales();
  ASSERT_NE(scales, nullptr);
  EXPECT_EQ(scales->source, absl::StrCat("calibrated on ", kKvCalibrationTokens, " tokens"));
  const auto prompts = KvCalibrationPrompts(nullptr, config);
  ASSERT_TRUE(prompts.ok()) << prompts.status();
  std::vector<int32_t> positions;
  for (const auto& prompt : *prompts) {
    for (size_t p = 0; p < prompt.size(); ++p) positions.push_back(static_cast<int32_t>(p));
  }
  ASSERT_EQ(positions.size(), size_t{kKvCalibrationTokens});
  const ModelWeightsF32 weights = testing::RandomWeights(config, 7);
  const int64_t heads = config.num_kv_heads, head_dim = config.head_dim;
  for (int64_t layer = 0; layer < config.num_layers; ++layer) {
    ASSERT_EQ(qkv_inputs[layer].size(), positions.size() * config.hidden_size) << layer;
    std::vector<double> k, v;
    testing::DenseKv(config, weights, layer, qkv_inputs[layer], positions, &k, &v);
    std::vector<double> k_amax(heads, 0.0), v_amax(heads, 0.0);
    for (size_t i = 0; i < k.size(); ++i) {
      const int64_t h = static_cast<int64_t>(i) / head_dim % heads;
      k_amax[h] = std::max(k_amax[h], std::abs(k[i]));
      v_amax[h] = std::max(v_amax[h], std::abs(v[i]));
    }
    for (int64_t h = 0; h < heads; ++h) {
      SCOPED_TRACE(absl::StrCat("layer ", layer, " kv head ", h));
      const float k_want = KvScaleFromAmax(static_cast<float>(k_amax[h]));
      const float v_want = KvScaleFromAmax(static_cast<float>(v_amax[h]));
      EXPECT_NEAR(scales->k[layer * heads + h], k_want, 1e-5 * k_want);  // fp32 against double
      EXPECT_NEAR(scales->v[layer * heads + h], v_want, 1e-5 * v_want);
      EXPECT_NE(k_want, 1.0f);  // calibrated, not the fallback
    }
  }
}

// A checkpoint's k_scale / v_scale tensors (per head, and [1]) are the fp8
// runner's scales as they are, with no calibration pass (the observer sees
// none at creation); a layer without them is refused naming the tensor; a
// checkpoint with none and no tokenizer cannot calibrate, and says so. Other
// KV dtypes have no scales.
TEST(CpuModelRunnerKvScalesTest, TheCheckpointsScalesWhenPresent) {
  using onecard::testing::F32Tensor;
  onecard::testing::TinyModel model = onecard::testing::MakeTinyModel({.kv_heads = 2});
  const auto name = [](int64_t layer, const char* field) {
    return absl::StrCat("model.layers.", layer, ".self_attn.", field);
  };
  for (int64_t l = 0; l < model.spec.layers; ++l) {
    model.hf[name(l, "k_scale")] = F32Tensor{name(l, "k_scale"), {2}, {0.5f + l, 0.25f + l}};
    model.hf[name(l, "v_scale")] = F32Tensor{name(l, "v_scale"), {1}, {0.125f * (l + 1)}};
  }
  const onecard::testing::ScratchDir dir;
  const auto create = [&](const std::string& folder, KvCacheDtype dtype, int* passes) {
    const auto checkpoint = OpenCheckpoint(onecard::testing::WriteTinyHfFolder(model, dir, folder));
    EXPECT_TRUE(checkpoint.ok()) << checkpoint.status();
    CpuRunnerOptions options = KvOptions(dtype);
    options.linear_input_observer = [passes](int64_t, LinearInput, std::span<const float>,
                                             int32_t) { ++*passes; };
    return CreateCpuModelRunner(*checkpoint, options);
  };
  int passes = 0;
  const auto runner = create("scales", KvCacheDtype::kFp8E4m3, &passes);
  ASSERT_TRUE(runner.ok()) << runner.status();
  EXPECT_EQ(passes, 0);
  const KvScales* scales = (*runner)->kv_scales();
  ASSERT_NE(scales, nullptr);
  EXPECT_EQ(scales->source, "checkpoint");
  EXPECT_EQ(scales->k, (std::vector<float>{0.5f, 0.25f, 1.5f, 1.25f}));
  EXPECT_EQ(scales->v, (std::vector<float>{0.125f, 0.125f, 0.25f, 0.25f}));
  const auto bf16 = create("scales_bf16", KvCacheDtype::kBf16, &passes);
  ASSERT_TRUE(bf16.ok()) << bf16.status();
  EXPECT_EQ((*bf16)->kv_scales(), nullptr);

  model.hf.erase(name(1, "k_scale"));
  model.hf.erase(name(1, "v_scale"));
  const absl::Status missing = create("layer_1_without", KvCacheDtype::kFp8E4m3, &passes).status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(missing.message().find("'model.layers.1.self_attn.k_scale'"), std::string::npos)
      << missing;
  model.hf.erase(name(0, "k_scale"));
  model.hf.erase(name(0, "v_scale"));
  const absl::Status none = create("none", KvCacheDtype::kFp8E4m3, &passes).status();
  EXPECT_FALSE(none.ok());
  EXPECT_NE(none.message().find("KV cache calibration"), std::string::npos) << none;
}

TEST(KvCacheDtypeTest, ParsesTheNamesAndNamesTheField) {
  EXPECT_EQ(*ParseKvCacheDtype("fp8", "f"), KvCacheDtype::kFp8E4m3);
  EXPECT_EQ(*ParseKvCacheDtype("bf16", "f"), KvCacheDtype::kBf16);
  EXPECT_EQ(*ParseKvCacheDtype("auto", "f"), KvCacheDtype::kAuto);
  const absl::Status bad = ParseKvCacheDtype("fp4", "--kv-cache-dtype").status();
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("--kv-cache-dtype"), std::string::npos) << bad;
  EXPECT_NE(bad.message().find("fp4"), std::string::npos) << bad;
}

TEST(CpuWeightFormatTest, ParsesTheNamesAndNamesTheField) {
  EXPECT_EQ(*ParseCpuWeightFormat("native", "f"), CpuWeightFormat::kNative);
  EXPECT_EQ(*ParseCpuWeightFormat("f32", "f"), CpuWeightFormat::kF32);
  EXPECT_STREQ(CpuWeightFormatName(CpuWeightFormat::kNative), "native");
  EXPECT_STREQ(CpuWeightFormatName(CpuWeightFormat::kF32), "f32");
  const absl::Status bad = ParseCpuWeightFormat("q4_0", "--cpu-weights").status();
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("--cpu-weights"), std::string::npos) << bad;
  EXPECT_NE(bad.message().find("q4_0"), std::string::npos) << bad;
}

TEST_P(CpuModelRunnerTest, ChunkedPrefillAndDecodeAreBitwiseEqual) {
  const ModelConfig config = testing::TinyConfig(GetParam());
  auto runner = MakeRunner(GetParam());
  const std::vector<int32_t> tokens = Tokens(45, 2, config.vocab_size);
  const std::vector<float> whole = Prefill(*runner, tokens, Blocks(0, 12), {45});
  EXPECT_EQ(Prefill(*runner, tokens, Blocks(1, 12), {7, 1, 13, 5, 19}), whole);
  std::vector<int> decode(45 - 10, 1);
  decode.insert(decode.begin(), 10);
  EXPECT_EQ(Prefill(*runner, tokens, Blocks(2, 12), decode), whole);
}

TEST_P(CpuModelRunnerTest, LogitsDoNotDependOnTheRestOfTheBatch) {
  const ModelConfig config = testing::TinyConfig(GetParam());
  auto runner = MakeRunner(GetParam());
  const std::vector<int32_t> a = Tokens(30, 3, config.vocab_size);
  const std::vector<float> alone = Prefill(*runner, a, Blocks(0, 8), {23, 7});
  // The same sequence among others: a whole prompt, a decode token of a
  // sequence with 17 cached tokens, and a's own 7 last tokens in the middle.
  const std::vector<int32_t> b = Tokens(19, 4, config.vocab_size),
                             c = Tokens(18, 5, config.vocab_size);
  const std::vector<int32_t> ta = Blocks(1, 8), tb = Blocks(2, 5), tc = Blocks(100, 5);
  std::vector<float> logits;
  BatchInput first;
  first.chunks = {{1, std::span(a).first(23), 0, ta, false}, {3, std::span(c).first(17), 0, tc}};
  ASSERT_TRUE(runner->Forward(first, &logits).ok());
  BatchInput mixed;
  mixed.all_logits = true;
  mixed.chunks = {
      {2, b, 0, tb}, {1, std::span(a).subspan(23), 23, ta}, {3, std::span(c).subspan(17), 17, tc}};
  ASSERT_TRUE(runner->Forward(mixed, &logits).ok());
  const int64_t vocab = config.vocab_size;
  const std::vector<float> a_in_batch(logits.begin() + 19 * vocab, logits.begin() + 26 * vocab);
  EXPECT_EQ(a_in_batch, std::vector<float>(alone.begin() + 23 * vocab, alone.end()));
}

TEST_P(CpuModelRunnerTest, ThreadCountDoesNotChangeLogits) {
  const ModelConfig config = testing::TinyConfig(GetParam());
  const std::vector<int32_t> tokens = Tokens(33, 6, config.vocab_size);
  auto one = MakeRunner(GetParam(), 1, 16);
  auto three = MakeRunner(GetParam(), 3, 16);
  EXPECT_EQ(Prefill(*one, tokens, Blocks(0, 3), {33}), Prefill(*three, tokens, Blocks(0, 3), {33}));
}

TEST_P(CpuModelRunnerTest, ReturnsTheWantedRows) {
  const ModelConfig config = testing::TinyConfig(GetParam());
  auto runner = MakeRunner(GetParam());
  const std::vector<int32_t> a = Tokens(9, 8, config.vocab_size),
                             b = Tokens(5, 9, config.vocab_size);
  const std::vector<float> a_all = Prefill(*runner, a, Blocks(0, 3), {9});
  const std::vector<float> b_all = Prefill(*runner, b, Blocks(1, 3), {5});
  const int64_t vocab = config.vocab_size;
  const std::vector<int32_t> ta = Blocks(2, 3), tb = Blocks(50, 2);
  BatchInput batch;
  batch.chunks = {{1, a, 0, ta, true}, {2, b, 0, tb, false}};
  std::vector<float> logits(3, 1.0f);
  ASSERT_TRUE(runner->Forward(batch, &logits).ok());
  EXPECT_EQ(logits, std::vector<float>(a_all.end() - vocab, a_all.end()));  // a's last row only
  batch.chunks[1].want_logits = true;
  batch.chunks[0].want_logits = false;
  ASSERT_TRUE(runner->Forward(batch, &logits).ok());
  EXPECT_EQ(logits, std::vector<float>(b_all.end() - vocab, b_all.end()));
  ASSERT_TRUE(runner->Forward(BatchInput{}, &logits).ok());
  EXPECT_TRUE(logits.empty());
}

INSTANTIATE_TEST_SUITE_P(Architectures, CpuModelRunnerTest,
                         ::testing::Values(Architecture::kLlama, Architecture::kQwen2));

// Forward's error on a one-chunk batch, with a message that must contain `needle`.
void ExpectBatchError(ModelRunner& runner, const SequenceChunk& chunk, const std::string& needle) {
  BatchInput batch;
  batch.chunks = {chunk};
  std::vector<float> logits;
  const absl::Status status = runner.Forward(batch, &logits);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find(needle), std::string::npos) << status;
}

TEST(CpuModelRunnerErrorsTest, BadBatches) {
  auto runner = MakeRunner(Architecture::kLlama);  // vocab 101, context 256, blocks of 4
  const std::vector<int32_t> ok = {1, 2, 3}, bad_id = {1, 101, 3}, negative = {-1};
  const std::vector<int32_t> table = {0, 1}, short_table = {0}, outside = {0, 256};
  const std::vector<int32_t> long_table = Blocks(0, 64);  // spans do not own: keep it alive
  ExpectBatchError(*runner, {1, bad_id, 0, table}, "token_ids[1] = 101");
  ExpectBatchError(*runner, {1, negative, 0, table}, "token_ids[0] = -1");
  ExpectBatchError(*runner, {1, ok, 254, long_table}, "context length 256");
  ExpectBatchError(*runner, {1, ok, 3, short_table}, "block_table has 1 blocks");
  ExpectBatchError(*runner, {1, ok, 4, outside}, "block_table[1] = 256");
  ExpectBatchError(*runner, {1, {}, 0, table}, "no tokens");
  ExpectBatchError(*runner, {1, ok, -2, table}, "start_pos -2");
  BatchInput twice;
  twice.chunks = {{5, ok, 0, table}, {5, ok, 3, table}};
  std::vector<float> logits;
  EXPECT_EQ(runner->Forward(twice, &logits).code(), absl::StatusCode::kInvalidArgument);
  // The last position of the context is fine.
  BatchInput last;
  last.chunks = {{1, std::span(ok).first(1), 255, long_table}};
  EXPECT_TRUE(runner->Forward(last, &logits).ok());
}

TEST(CpuModelRunnerErrorsTest, BadOptionsConfigAndWeights) {
  const ModelConfig config = testing::TinyConfig(Architecture::kLlama);
  CpuRunnerOptions options;
  options.kv_cache_bytes = 100;  // less than one block
  auto runner = CreateCpuModelRunnerFromWeights(config, testing::RandomWeights(config, 1), options);
  EXPECT_EQ(runner.status().code(), absl::StatusCode::kInvalidArgument);
  options = CpuRunnerOptions{};
  options.kv_block_size = 0;
  runner = CreateCpuModelRunnerFromWeights(config, testing::RandomWeights(config, 1), options);
  EXPECT_EQ(runner.status().code(), absl::StatusCode::kInvalidArgument);

  ModelConfig bad = config;
  bad.num_kv_heads = 3;
  runner = CreateCpuModelRunnerFromWeights(bad, testing::RandomWeights(config, 1), {});
  EXPECT_EQ(runner.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(runner.status().message().find("num_heads"), std::string::npos) << runner.status();

  ModelWeightsF32 weights = testing::RandomWeights(config, 1);
  weights.layers[1].w_up.pop_back();
  runner = CreateCpuModelRunnerFromWeights(config, std::move(weights), {});
  EXPECT_EQ(runner.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(runner.status().message().find("layer 1 w_up"), std::string::npos) << runner.status();
}

// Issue 22: kv_cache.cache_bytes: 1e15 ended the worker with std::bad_alloc.
TEST(CpuModelRunnerErrorsTest, PoolLargerThanTheHostIsRefused) {
  const ModelConfig config = testing::TinyConfig(Architecture::kLlama);
  CpuRunnerOptions options;
  options.kv_cache_bytes = 1000000000000000;  // 1e15
  auto runner = CreateCpuModelRunnerFromWeights(config, testing::RandomWeights(config, 1), options);
  EXPECT_EQ(runner.status().code(), absl::StatusCode::kResourceExhausted) << runner.status();
  EXPECT_NE(runner.status().message().find("host's memory"), std::string::npos) << runner.status();
  options = CpuRunnerOptions{};
  options.num_kv_blocks = std::numeric_limits<int32_t>::max();
  runner = CreateCpuModelRunnerFromWeights(config, testing::RandomWeights(config, 1), options);
  EXPECT_EQ(runner.status().code(), absl::StatusCode::kResourceExhausted) << runner.status();
}

TEST(CpuModelRunnerTest, PoolSizeFromBytes) {
  const ModelConfig config = testing::TinyConfig(Architecture::kLlama);
  CpuRunnerOptions options;
  options.kv_block_size = 16;
  // One block: 2 (K, V) * 2 layers * 16 tokens * 2 kv heads * 16 dims * 4 bytes.
  options.kv_cache_bytes = 10 * 2 * 2 * 16 * 2 * 16 * 4 + 5;
  auto runner = CreateCpuModelRunnerFromWeights(config, testing::RandomWeights(config, 1), options);
  ASSERT_TRUE(runner.ok()) << runner.status();
  EXPECT_EQ((*runner)->kv_layout().num_blocks, 10);
  EXPECT_EQ((*runner)->kv_layout().block_size, 16);
  EXPECT_EQ((*runner)->name(), "cpu");
}

}  // namespace
}  // namespace onecard::engine
