// The CUDA runner on Qwen2.5-Coder-1.5B-Instruct Q4_K_M (models/,
// `scripts/fetch-model.sh qwen`; skipped, saying so, when the file is absent),
// with its Q4_K projections on the 4-bit kernels, against Hugging Face
// transformers' fp32 run of the same file (tests/golden/qwen2_5_coder/, made
// by `tests/golden/make_goldens.py qwen2.5-coder`; missing: a failure):
// - the weight formats: a projection is `int4 g32 min` exactly where every
//   part of it is Q4_K in the file (read here from the tensors' dtypes), BF16
//   where one is Q6_K (attn_v and ffn_down of 14 layers), and the memory
//   plan's bytes per format are those of that spec;
// - for every golden prompt, a one-chunk prefill: HF's 64 sampled ids and top
//   5 at every position and the whole last row within LogitTolerance; then
//   HF's first 16 greedy tokens, the runner continuing with its own argmax;
//   where the two part, HF's own top-2 gap at that step must be below twice
//   the largest logit error measured on the prefill (a near tie; printed):
//   MatchesHfGolden (runner_test_util.h).
// Tolerance: LogitTolerance (runner_test_util.h), the BF16 bound the runner
// is held to against the CPU runner: activations round to BF16 (2^-9
// relative) every layer. The 4-bit weights add the fp16 rounding of Q4_K's
// per-32 scales and mins (2^-12 relative, a quarter of one BF16 rounding, and
// on the weights only); BF16 projections round their weights to BF16 as the
// CPU comparison's do. HF's fp32 logits stand where the CPU runner's do.
#include <cstdio>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "engine/model/checkpoint.h"
#include "engine/model/gguf.h"
#include "engine/runtime/cuda/cuda_model_runner.h"
#include "gtest/gtest.h"
#include "tests/gpu/runner_test_util.h"
#include "tests/testing/all_close.h"

namespace onecard::engine {
namespace {

using onecard::testing::SourcePath;

constexpr char kModel[] = "models/Qwen2.5-Coder-1.5B-Instruct.Q4_K_M.gguf";
constexpr char kGoldenDir[] = "tests/golden/qwen2_5_coder";

CudaRunnerOptions QwenOptions() {
  CudaRunnerOptions o = TestOptions();
  o.gpu_memory_budget = 8 * kGiB;  // ~1.9 GiB of weights, then KV
  return o;
}

class CudaModelRunnerQwenTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::ifstream(SourcePath(kModel)).good()) {
      GTEST_SKIP() << kModel << " is not here: scripts/fetch-model.sh qwen fetches it (1.1 GB)";
    }
    absl::StatusOr<Checkpoint> ckpt = OpenCheckpoint(SourcePath(kModel));
    ASSERT_TRUE(ckpt.ok()) << ckpt.status();
    checkpoint_ = std::make_unique<Checkpoint>(*std::move(ckpt));
  }

  // The file's dtype of layer `layer`'s tensor `name` ("attn_v.weight").
  DType FileDType(int64_t layer, const std::string& name) const {
    const TensorView* t = checkpoint_->weights->Find("blk." + std::to_string(layer) + "." + name);
    return t == nullptr ? DType::kU8 : t->dtype;
  }

  std::unique_ptr<Checkpoint> checkpoint_;
};

TEST_F(CudaModelRunnerQwenTest, Q4KProjectionsAre4BitAndQ6KOnesBf16) {
  const ModelConfig& c = checkpoint_->config;
  const std::vector<std::vector<std::string>> parts = {
      {"attn_q.weight", "attn_k.weight", "attn_v.weight"},
      {"attn_output.weight"},
      {"ffn_gate.weight", "ffn_up.weight"},
      {"ffn_down.weight"}};
  const ProjectionSpec int4{
      .format = WeightFormat::kInt4, .group = 32, .offsets = Int4Offsets::kFloat};
  ModelWeightsSpec want = ModelWeightsSpec::Uniform(c, {});
  int bf16_layers = 0;
  for (int64_t layer = 0; layer < c.num_layers; ++layer) {
    for (int p = 0; p < kNumProjections; ++p) {
      bool all_q4k = true;
      for (const std::string& name : parts[p]) all_q4k &= FileDType(layer, name) == DType::kQ4_K;
      if (all_q4k) want.layers[layer][p] = int4;
    }
    bf16_layers += want.layers[layer][0].format == WeightFormat::kBf16;
  }
  EXPECT_EQ(bf16_layers, 14) << "Q4_K_M: Q6_K attn_v in 14 of 28 layers";
  absl::StatusOr<ModelWeightsSpec> got = CheckpointWeightsSpec(*checkpoint_, false);
  ASSERT_TRUE(got.ok()) << got.status();
  for (int64_t layer = 0; layer < c.num_layers; ++layer) {
    for (int p = 0; p < kNumProjections; ++p) {
      EXPECT_EQ(got->layers[layer][p], want.layers[layer][p])
          << "layer " << layer << " projection " << p << ": " << got->layers[layer][p].Name();
    }
  }
  auto gpu = CreateCudaModelRunner(*checkpoint_, QwenOptions());
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  const WeightBytes& plan = (*gpu)->memory_plan().weights;
  absl::StatusOr<WeightBytes> want_bytes = CountWeightBytes(c, want);
  ASSERT_TRUE(want_bytes.ok()) << want_bytes.status();
  EXPECT_EQ(plan.by_format, want_bytes->by_format) << plan.ToString();
  std::printf("[qwen2.5-coder] weights on the device: %s\n", plan.ToString().c_str());
}

TEST_F(CudaModelRunnerQwenTest, MatchesHuggingFace) {
  auto gpu = CreateCudaModelRunner(*checkpoint_, QwenOptions());
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  MatchesHfGolden(**gpu, checkpoint_->config, kGoldenDir, "qwen2.5-coder");
}

}  // namespace
}  // namespace onecard::engine
