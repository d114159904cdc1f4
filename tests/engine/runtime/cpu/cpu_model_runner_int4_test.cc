// The cpu backend on the HF 4-bit checkpoints of tests/golden/hf_int4/
// (GPTQ v1 with act order, GPTQ v2 sym, AWQ, compressed-tensors): the runner
// CreateCpuModelRunner makes from the file (kF32: ReadTensorF32 dequantizing
// the projections from their codes) against the same model run from weights
// in which every projection is the upstream dequantization of the same codes
// (dequantized.safetensors, made by make_hf_int4_goldens.py as GPTQModel,
// AutoAWQ and compressed-tensors compute it, in fp16), the other weights as
// the file holds them.
#include <string>
#include <vector>

#include "engine/model/checkpoint.h"
#include "engine/model/layer_tensors.h"
#include "engine/model/model_weights.h"
#include "engine/model/safetensors.h"
#include "engine/runtime/cpu/cpu_model_runner.h"
#include "gtest/gtest.h"
#include "tests/testing/all_close.h"

namespace onecard::engine {
namespace {

using ::onecard::testing::SourcePath;

// The two runs differ only in upstream's fp16 rounding of each weight
// s (q - z): at most half an fp16 ulp (2^-11 relative), independent between
// weights. Measured (2026-12-03): max abs error 5.3e-3 on logits of magnitude
// up to ~46 (tied N(0, 1) embeddings), NMSE 2.2e-8. The tolerance allows ~4x
// (10x in NMSE); a wrong code, zero point, scale or column order moves one
// weight by a whole scale step (~1/15 of its group's range) and the logits
// by 1e-1 .. 10.
constexpr testing::Tolerance kTolerance{2e-2, 2e-3, 2e-7};

constexpr TensorPart kProjections[] = {TensorPart::kQ,   TensorPart::kK,    TensorPart::kV,
                                       TensorPart::kO,   TensorPart::kGate, TensorPart::kUp,
                                       TensorPart::kDown};

// The file's weights with every projection replaced by its golden.
ModelWeightsF32 UpstreamWeights(const Checkpoint& ckpt, const std::string& golden_path) {
  auto weights = LoadWeightsF32(ckpt);
  EXPECT_TRUE(weights.ok()) << weights.status();
  auto golden = SafetensorsSource::OpenFile(golden_path);
  EXPECT_TRUE(golden.ok()) << golden.status();
  for (TensorPart part : kProjections) {
    auto t = ResolveTensor(ckpt, part, 0);
    const TensorView* g = (*golden)->Find(t->name);
    EXPECT_NE(g, nullptr) << t->name;
    auto values = DequantizeToF32(*g);
    EXPECT_TRUE(values.ok()) << values.status();
    std::vector<float>* dest = PartWeights(*weights, part, 0);
    EXPECT_EQ(values->size(), dest->size()) << t->name;
    EXPECT_NE(*values, *dest) << t->name << ": the upstream rounding should show";
    *dest = std::move(*values);
  }
  return std::move(*weights);
}

std::vector<float> AllLogits(ModelRunner& runner, const std::vector<int32_t>& tokens) {
  const std::vector<int32_t> table = {0, 1};
  BatchInput batch;
  batch.all_logits = true;
  batch.chunks.push_back({1, tokens, 0, table});
  std::vector<float> logits;
  EXPECT_TRUE(runner.Forward(batch, &logits).ok());
  return logits;
}

class CpuModelRunnerInt4Test : public ::testing::TestWithParam<const char*> {};

TEST_P(CpuModelRunnerInt4Test, MatchesTheUpstreamDequantizedModel) {
  const std::string dir = SourcePath(std::string("tests/golden/hf_int4/") + GetParam());
  auto ckpt = OpenCheckpoint(dir);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  CpuRunnerOptions options;
  options.num_threads = 2;
  options.num_kv_blocks = 4;
  options.weight_format = CpuWeightFormat::kF32;
  auto runner = CreateCpuModelRunner(*ckpt, options);
  ASSERT_TRUE(runner.ok()) << runner.status();
  auto reference = CreateCpuModelRunnerFromWeights(
      ckpt->config, UpstreamWeights(*ckpt, dir + "/dequantized.safetensors"), options);
  ASSERT_TRUE(reference.ok()) << reference.status();
  const std::vector<int32_t> tokens = {1, 7, 30, 12, 3, 3, 25, 0, 18, 9, 31, 4, 22};
  const std::vector<float> got = AllLogits(**runner, tokens);
  const std::vector<float> want = AllLogits(**reference, tokens);
  ASSERT_EQ(got.size(), tokens.size() * ckpt->config.vocab_size);
  EXPECT_ALL_CLOSE(got, want, kTolerance);
}

INSTANTIATE_TEST_SUITE_P(Checkpoints, CpuModelRunnerInt4Test,
                         ::testing::Values("gptq_v1_act", "gptq_v2_sym", "awq", "compressed"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param);
                         });

}  // namespace
}  // namespace onecard::engine
