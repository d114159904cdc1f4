// Golden test of the cpu backend (CreateCpuModelRunner, engine/runtime/cpu/,
// with CpuWeightFormat::kF32) against Hugging Face transformers
// (tests/golden/README.md): SmolLM2-135M (the Q4_1 GGUF, dequantized to fp32)
// on 5 prompts, and the seeded tiny
// Llama (llama3 rope scaling, GQA, untied) and Qwen2 (q/k/v bias, tied,
// sharded safetensors) checkpoints. For every prompt:
// - one-chunk prefill: the logits at every position (64 sampled ids and the
//   HF top 5) and the full last row within kTolerance, and the same top-1
//   token as HF at every position;
// - the same prompt prefilled in odd-sized chunks gives bitwise the same
//   logits (the backend's sums do not depend on how tokens are batched);
// - greedy decoding through the paged cache, one token per Forward, gives HF's
//   32-token continuation exactly, each step's top-2 logits within kTolerance.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/model/checkpoint.h"
#include "engine/runtime/cpu/cpu_model_runner.h"
#include "gtest/gtest.h"
#include "tests/engine/runtime/cpu/golden_logits.h"
#include "tests/testing/all_close.h"

namespace onecard::engine {
namespace {

using onecard::testing::SourcePath;
using onecard::testing::Tolerance;

// Both sides are fp32 forward passes over the same fp32 weights (HF
// dequantizes the GGUF with the gguf package's formulas, as our loader does);
// they differ only in the order of fp32 summations (blocked dot products here,
// BLAS and SDPA kernels in torch) and in libm's exp/sin/cos. A reordered sum of
// n products carries ~sqrt(n) * 2^-24 relative error (~1e-6 for n = 576..1536);
// through SmolLM2's 30 layers that stays ~1e-5 relative on logits of
// magnitude 10-35. Measured (2026-11-29): max abs error 9.5e-5 and NMSE
// 2e-10 on SmolLM2 (580-token prompt included), 4e-6 on the tiny models. The
// tolerance allows ~5x that and is still far below what a real bug moves (a
// wrong rope frequency or a masked token shifts logits by 1e-3 .. 1).
constexpr Tolerance kTolerance{5e-4, 1e-5, 1e-8};

struct ModelCase {
  const char* name;
  const char* checkpoint;  // relative to the source root
  const char* golden_dir;
};

class CpuModelRunnerGoldenTest : public ::testing::TestWithParam<ModelCase> {};

TEST_P(CpuModelRunnerGoldenTest, MatchesHuggingFace) {
  const ModelCase& c = GetParam();
  Golden golden;
  ASSERT_TRUE(LoadGolden(c.golden_dir, &golden));
  auto checkpoint = OpenCheckpoint(SourcePath(c.checkpoint));
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status()
                               << " (the SmolLM2 file comes from scripts/fetch-model.sh)";
  CpuRunnerOptions options;
  options.num_kv_blocks = 256;  // 4096 tokens of 16: room for three 612-token sequences
  options.weight_format = CpuWeightFormat::kF32;  // fp32 weights, as HF runs them
  auto runner = CreateCpuModelRunner(*checkpoint, options);
  ASSERT_TRUE(runner.ok()) << runner.status();
  const int64_t vocab = (*runner)->config().vocab_size;
  int64_t seq_id = 0;
  for (const GoldenPrompt& p : golden.prompts) {
    SCOPED_TRACE(absl::StrCat(c.name, " prompt ", p.name));
    const int32_t context = static_cast<int32_t>(p.input_ids.size() + p.greedy_ids.size());
    const auto [table, split_table] = TwoBlockTables(256, (context + 15) / 16, seq_id);
    const int64_t whole_id = ++seq_id, split_id = ++seq_id;
    const std::vector<float> whole = Prefill(**runner, whole_id, p.input_ids, table, {});
    ExpectPrefillMatches(golden, p, whole, vocab, kTolerance);
    EXPECT_TRUE(Prefill(**runner, split_id, p.input_ids, split_table, {3, 1, 7, 5, 13}) == whole)
        << "prefill in chunks of 3, 1, 7, 5, 13, rest differs from one chunk";
    ExpectGreedyMatches(**runner, whole_id, p, whole, table, kTolerance);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Models, CpuModelRunnerGoldenTest,
    ::testing::Values(
        ModelCase{"smollm2", "models/SmolLM2-135M-Instruct.Q4_1.gguf", "tests/golden/smollm2"},
        ModelCase{"tiny_llama", "tests/golden/tiny_llama", "tests/golden/tiny_llama"},
        ModelCase{"tiny_qwen2", "tests/golden/tiny_qwen2", "tests/golden/tiny_qwen2"}),
    [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace onecard::engine
