// The cpu backend's native weights (CpuWeightFormat::kNative) against its
// fp32 oracle (kF32) on tiny GGUF files whose linears are blocks of every
// type the cpu kernels multiply (tiny_model.h's WriteBlockGguf: Q8_0, Q4_0,
// Q4_1, Q4_K, Q5_K, Q6_K, an F16 projection; llama with llama.cpp's Q/K row
// order and an untied output, qwen2 with q/k/v biases and a tied one):
// - LoadCpuWeights keeps each block tensor's blocks (the fused q/k/v holding
//   three runs of three types), reads F16 as fp32, and every row of every
//   linear dequantizes to the kF32 weights' row exactly (the same blocks in
//   the same HF row order);
// - the runners' logits over a 40-token prefill and two decode steps differ
//   by at most 5e-2 of the largest |logit| and 4e-2 in relative RMS: the
//   error of quantizing each linear's input to 8 bits a block (32 columns,
//   256 for the K-quants; up to 0.4 % of a block's largest value), carried
//   through two layers.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <span>
#include <vector>

#include "engine/model/checkpoint.h"
#include "engine/runtime/cpu/cpu_model_runner.h"
#include "engine/runtime/cpu/cpu_weights.h"
#include "gtest/gtest.h"
#include "tests/engine/model/model_test_util.h"
#include "tests/engine/runtime/cpu/tiny_model.h"

namespace onecard::engine {
namespace {

using ::onecard::testing::ScratchDir;

// Each row of w in fp32 (RowF32).
std::vector<float> Values(const CpuLinear& w) {
  std::vector<float> out(w.out_features() * w.in_features());
  for (int64_t r = 0; r < w.out_features(); ++r) w.RowF32(r, &out[r * w.in_features()]);
  return out;
}

std::vector<DType> RunTypes(const CpuLinear& w) {
  std::vector<DType> types;
  for (const CpuWeightRows& run : w.runs()) types.push_back(run.dtype);
  return types;
}

class CpuModelRunnerNativeTest : public ::testing::TestWithParam<Architecture> {
 protected:
  void SetUp() override {
    absl::StatusOr<Checkpoint> c = OpenCheckpoint(testing::WriteBlockGguf(GetParam(), dir_));
    ASSERT_TRUE(c.ok()) << c.status();
    checkpoint_ = std::move(*c);
  }

  ScratchDir dir_;
  Checkpoint checkpoint_;
};

TEST_P(CpuModelRunnerNativeTest, NativeWeightsKeepTheBlocksOfTheF32Values) {
  absl::StatusOr<CpuWeights> native = LoadCpuWeights(checkpoint_, CpuWeightFormat::kNative);
  ASSERT_TRUE(native.ok()) << native.status();
  absl::StatusOr<CpuWeights> f32 = LoadCpuWeights(checkpoint_, CpuWeightFormat::kF32);
  ASSERT_TRUE(f32.ok()) << f32.status();
  EXPECT_EQ(native->format, CpuWeightFormat::kNative);
  EXPECT_EQ(f32->format, CpuWeightFormat::kF32);
  const CpuLayerWeights& l0 = native->layers[0];
  EXPECT_EQ(RunTypes(l0.wqkv), (std::vector<DType>{DType::kQ4_K, DType::kQ4_0, DType::kQ6_K}));
  EXPECT_EQ(RunTypes(l0.wo), std::vector<DType>{DType::kQ4_1});
  EXPECT_EQ(RunTypes(native->layers[1].wo), std::vector<DType>{DType::kF32});  // F16 in the file
  EXPECT_EQ(RunTypes(l0.w_gate_up), (std::vector<DType>{DType::kQ5_K, DType::kQ8_0}));
  EXPECT_EQ(RunTypes(l0.w_down), std::vector<DType>{DType::kQ4_K});
  EXPECT_EQ(RunTypes(native->embedding), std::vector<DType>{DType::kQ8_0});
  EXPECT_EQ(native->lm_head.empty(), GetParam() == Architecture::kQwen2);
  if (!native->lm_head.empty()) {
    EXPECT_EQ(RunTypes(native->lm_head), std::vector<DType>{DType::kQ6_K});
  }
  EXPECT_EQ(l0.bqkv.empty(), GetParam() == Architecture::kLlama);
  EXPECT_LT(native->bytes() * 3, f32->bytes());
  for (size_t i = 0; i < native->layers.size(); ++i) {
    SCOPED_TRACE(i);
    const CpuLayerWeights& n = native->layers[i];
    const CpuLayerWeights& f = f32->layers[i];
    for (const CpuLinear* w : {&f.wqkv, &f.wo, &f.w_gate_up, &f.w_down}) {
      EXPECT_FALSE(w->quantized());
    }
    EXPECT_EQ(Values(n.wqkv), Values(f.wqkv));
    EXPECT_EQ(Values(n.wo), Values(f.wo));
    EXPECT_EQ(Values(n.w_gate_up), Values(f.w_gate_up));
    EXPECT_EQ(Values(n.w_down), Values(f.w_down));
    EXPECT_EQ(n.attn_norm, f.attn_norm);
    EXPECT_EQ(n.ffn_norm, f.ffn_norm);
    EXPECT_EQ(n.bqkv, f.bqkv);
  }
  EXPECT_EQ(Values(native->output_weight()), Values(f32->output_weight()));
  EXPECT_EQ(native->final_norm, f32->final_norm);
}

// Each linear's 8-bit activations move its output by about 0.55 % (relative
// RMS, Gaussian inputs, every block type of WriteBlockGguf: measured against
// the same CpuLinear's fp32 product, the kernels being within 1e-7 of
// CpuLinearRef); through each layer's four products, attention and silu,
// the random tiny models' logits move by about 2 % (measured: relative RMS
// 2.2e-2 for both; largest difference 2.7e-2 (llama) and 2.0e-2 (qwen2) of
// the largest |logit|). A wrong block layout, row order or run would move them
// by tens of percent.
constexpr double kMaxDiffOfMaxLogit = 5e-2;
constexpr double kRelativeRms = 4e-2;

// Logits of a 40-token prefill (every row) and two decode steps.
std::vector<float> PrefillAndDecode(ModelRunner& runner) {
  std::vector<int32_t> tokens(42);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>((i * 37 + 5) % 96);
  const std::vector<int32_t> table = {3, 0, 2};  // 48 tokens of 16
  std::vector<float> all, logits;
  BatchInput prefill;
  prefill.all_logits = true;
  prefill.chunks.push_back({1, std::span(tokens).first(40), 0, table});
  EXPECT_TRUE(runner.Forward(prefill, &logits).ok());
  all = logits;
  for (int32_t pos = 40; pos < 42; ++pos) {
    BatchInput step;
    step.chunks.push_back({1, std::span(tokens).subspan(pos, 1), pos, table});
    EXPECT_TRUE(runner.Forward(step, &logits).ok());
    all.insert(all.end(), logits.begin(), logits.end());
  }
  return all;
}

TEST_P(CpuModelRunnerNativeTest, LogitsAreTheF32RunnersWithinActivationQuantization) {
  CpuRunnerOptions options;
  options.num_threads = 2;
  options.num_kv_blocks = 4;
  auto native = CreateCpuModelRunner(checkpoint_, options);
  ASSERT_TRUE(native.ok()) << native.status();
  options.weight_format = CpuWeightFormat::kF32;
  auto f32 = CreateCpuModelRunner(checkpoint_, options);
  ASSERT_TRUE(f32.ok()) << f32.status();
  const std::vector<float> got = PrefillAndDecode(**native), want = PrefillAndDecode(**f32);
  ASSERT_EQ(got.size(), 42u * 96);
  ASSERT_EQ(want.size(), got.size());
  double max_logit = 0, max_diff = 0, sum_sq_diff = 0, sum_sq = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(std::isfinite(got[i])) << i;
    const double diff = static_cast<double>(got[i]) - want[i];
    max_logit = std::max(max_logit, std::fabs(static_cast<double>(want[i])));
    max_diff = std::max(max_diff, std::fabs(diff));
    sum_sq_diff += diff * diff;
    sum_sq += static_cast<double>(want[i]) * want[i];
  }
  const double relative_rms = std::sqrt(sum_sq_diff / sum_sq);
  std::printf(
      "native vs f32: max |logit diff| %.3g of max |logit| %.3g (%.2e), relative RMS %.2e\n",
      max_diff, max_logit, max_diff / max_logit, relative_rms);
  EXPECT_GT(max_diff, 0.0) << "the native runner quantizes its activations: some logit moves";
  EXPECT_LE(max_diff, kMaxDiffOfMaxLogit * max_logit);
  EXPECT_LE(relative_rms, kRelativeRms);
}

INSTANTIATE_TEST_SUITE_P(Archs, CpuModelRunnerNativeTest,
                         ::testing::Values(Architecture::kLlama, Architecture::kQwen2),
                         [](const auto& info) {
                           return std::string(info.param == Architecture::kLlama ? "llama"
                                                                                 : "qwen2");
                         });

}  // namespace
}  // namespace onecard::engine
