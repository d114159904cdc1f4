// Tests of the cpu backend's KV swap (engine/runtime/cpu/cpu_kv_swap.cc and
// the runner's AllocateSwapSpace / SwapOut / SwapIn) on a tiny random
// Llama-like model:
// - blocks swapped out, overwritten on the device, and swapped into other
//   blocks give the very logits of the uninterrupted sequence;
// - the swap space's size and its refusals (no block, more than the host);
// - the engine over the cpu runner under KV pressure: greedy tokens equal
//   each request's solo run with swap (traffic counted) and with a swap
//   space too small (every preemption recomputed, no request lost).
#include "engine/runtime/cpu/cpu_kv_swap.h"

#include <random>

#include "absl/strings/str_cat.h"
#include "engine/common/host_info.h"
#include "engine/runtime/cpu/cpu_model_runner.h"
#include "engine/runtime/engine_impl.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/runtime/cpu/tiny_model.h"
#include "tests/engine/runtime/engine_test_util.h"
#include "tests/engine/runtime/fake_tokenizer.h"

namespace onecard::engine {
namespace {

using ::testing::HasSubstr;

constexpr int32_t kBlockSize = 4;

// The tiny Llama with FakeTokenizer's vocabulary (so the engine can
// detokenize what it samples).
ModelConfig Config() {
  ModelConfig config = testing::TinyConfig(Architecture::kLlama);
  config.vocab_size = testing::FakeTokenizer::kVocabSize;
  return config;
}

std::unique_ptr<ModelRunner> MakeRunner(int64_t num_blocks) {
  const ModelConfig config = Config();
  CpuRunnerOptions options;
  options.num_threads = 2;
  options.kv_block_size = kBlockSize;
  options.num_kv_blocks = num_blocks;
  auto runner =
      CreateCpuModelRunnerFromWeights(config, testing::RandomWeights(config, 11), options);
  EXPECT_TRUE(runner.ok()) << runner.status();
  return std::move(runner).value();
}

// Bytes of one block: every layer's K and V of kBlockSize tokens in fp32.
int64_t BlockBytes() {
  const ModelConfig c = Config();
  return 2 * c.num_layers * kBlockSize * c.num_kv_heads * c.head_dim * 4;
}

std::vector<float> OneChunk(ModelRunner& runner, std::span<const int32_t> tokens, int32_t start,
                            std::span<const int32_t> table) {
  BatchInput batch;
  batch.chunks.push_back({1, tokens, start, table});
  std::vector<float> logits;
  EXPECT_TRUE(runner.Forward(batch, &logits).ok());
  return logits;
}

TEST(CpuKvSwapTest, SwappedBlocksResumeWithTheSameLogits) {
  std::mt19937 rng(5);
  std::vector<int32_t> tokens(11);
  for (int32_t& t : tokens) t = static_cast<int32_t>(rng() % 64);
  const std::span<const int32_t> all(tokens);
  // Uninterrupted: 10 tokens prefilled in blocks {3, 5, 6}, then a decode.
  auto whole = MakeRunner(16);
  const std::vector<int32_t> table = {3, 5, 6};
  OneChunk(*whole, all.first(10), 0, table);
  const std::vector<float> expected = OneChunk(*whole, all.subspan(10, 1), 10, table);

  auto runner = MakeRunner(16);
  absl::StatusOr<KvSwapSpace> space = runner->AllocateSwapSpace(5 * BlockBytes() + 7);
  ASSERT_TRUE(space.ok()) << space.status();
  EXPECT_EQ(space->num_blocks, 5);
  EXPECT_EQ(space->block_bytes, BlockBytes());
  OneChunk(*runner, all.first(10), 0, table);
  const std::vector<KvBlockCopy> out = {{3, 2}, {5, 3}, {6, 4}};
  ASSERT_TRUE(runner->SwapOut(out).ok());
  // Another sequence overwrites the three device blocks.
  const std::vector<int32_t> other(12, 9);
  OneChunk(*runner, other, 0, table);
  const std::vector<int32_t> resumed = {0, 12, 1};
  const std::vector<KvBlockCopy> in = {{0, 2}, {12, 3}, {1, 4}};
  ASSERT_TRUE(runner->SwapIn(in).ok());
  EXPECT_EQ(OneChunk(*runner, all.subspan(10, 1), 10, resumed), expected);
}

TEST(CpuKvSwapTest, RefusesWhatItCannotHold) {
  auto runner = MakeRunner(8);
  const absl::StatusOr<KvSwapSpace> tiny = runner->AllocateSwapSpace(BlockBytes() - 1);
  EXPECT_EQ(tiny.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(tiny.status().message()), HasSubstr("hold no KV block"));
  const int64_t available = HostAvailableMemoryBytes();
  if (available > 0) {
    const absl::StatusOr<KvSwapSpace> huge = runner->AllocateSwapSpace(available + BlockBytes());
    EXPECT_EQ(huge.status().code(), absl::StatusCode::kResourceExhausted);
    EXPECT_THAT(std::string(huge.status().message()), HasSubstr("more than the host has"));
  }
  EXPECT_EQ(runner->SwapIn(std::vector<KvBlockCopy>{{0, 0}}).code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(runner->AllocateSwapSpace(2 * BlockBytes()).ok());
  EXPECT_EQ(runner->SwapOut(std::vector<KvBlockCopy>{{0, 2}}).code(),
            absl::StatusCode::kInvalidArgument);  // host block 2 of 2
  EXPECT_EQ(runner->AllocateSwapSpace(2 * BlockBytes()).status().code(),
            absl::StatusCode::kFailedPrecondition);  // once
}

// Greedy requests through an engine over the cpu runner with a pool of
// `num_blocks` and a swap space of `swap_blocks`; returns each request's
// tokens and the engine's stats at the end.
struct EngineRun {
  std::vector<std::vector<int32_t>> tokens;
  EngineStats stats;
};
EngineRun RunEngine(const std::vector<std::vector<int32_t>>& prompts, int64_t num_blocks,
                    int32_t swap_blocks) {
  EngineParts parts{.runner = MakeRunner(num_blocks),
                    .tokenizer = std::make_unique<testing::FakeTokenizer>()};
  FakeClock clock;
  auto engine = CreateEngine(std::move(parts), {.max_num_seqs = 8,
                                                .max_batched_tokens = 32,
                                                .swap_space_bytes = swap_blocks * BlockBytes(),
                                                .start_thread = false,
                                                .clock = &clock});
  EXPECT_TRUE(engine.ok()) << engine.status();
  if (!engine.ok()) return {};
  testing::Recorder rec;
  for (size_t i = 0; i < prompts.size(); ++i) {
    GenerationRequest r = testing::Request(prompts[i], 12);
    r.priority = static_cast<int32_t>(i % 2);
    r.on_output = rec.Callback(absl::StrCat(i));
    EXPECT_TRUE((*engine)->Submit(std::move(r)).ok());
  }
  testing::RunUntilIdle(**engine);
  EngineRun run;
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(rec.Final(absl::StrCat(i)).finish_reason, FinishReason::kLength) << i;
    run.tokens.push_back(rec.Tokens(absl::StrCat(i)));
  }
  run.stats = (*engine)->Stats();
  return run;
}

TEST(CpuKvSwapTest, EngineUnderKvPressureSwapsOrRecomputesWithTheSameTokens) {
  std::mt19937 rng(9);
  std::vector<std::vector<int32_t>> prompts(6);
  for (auto& p : prompts) {
    p.resize(5 + rng() % 6);
    for (int32_t& t : p) t = static_cast<int32_t>(rng() % 26);
  }
  // Uninterrupted: a pool that holds every request at once.
  const EngineRun solo = RunEngine(prompts, 64, 0);
  EXPECT_EQ(solo.stats.num_preemptions, 0);
  // 10 blocks of 4: each request fits alone (at most 22 tokens, 6 blocks),
  // six do not.
  const EngineRun swapped = RunEngine(prompts, 10, 24);
  EXPECT_EQ(swapped.tokens, solo.tokens);
  EXPECT_GT(swapped.stats.num_swap_preemptions, 0);
  EXPECT_GT(swapped.stats.kv_swapped_in_blocks_total, 0);
  EXPECT_EQ(swapped.stats.kv_swap_in_bytes_total,
            swapped.stats.kv_swapped_in_blocks_total * BlockBytes());
  EXPECT_EQ(swapped.stats.kv_swap_blocks_used, 0);
  // One host block: no victim fits, every preemption recomputes.
  const EngineRun recomputed = RunEngine(prompts, 10, 1);
  EXPECT_EQ(recomputed.tokens, solo.tokens);
  EXPECT_GT(recomputed.stats.num_preemptions, 0);
  EXPECT_EQ(recomputed.stats.num_swap_preemptions, 0);
}

}  // namespace
}  // namespace onecard::engine
