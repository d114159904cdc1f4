// The CUDA runner with an FP8 E4M3 KV cache (kv_cache_dtype fp8) against the
// CPU runner with the same cache format:
// - tiny_llama (head_dim 16: the general attention kernel) and SmolLM2-135M
//   (head_dim 64: the flash kernels; when models/ holds it): the CPU runner
//   calibrates its scales on the checkpoint's calibration prompts; the CUDA
//   runner is given the same scales (CudaRunnerOptions::kv_scales), reports
//   them as its own, and matches the CPU's logits on the golden prompts and
//   eight sequences decoding five steps. Tolerance: kFp8KvNmseScale times
//   the BF16 one. The CUDA side rounds K and V to BF16 before encoding, the
//   CPU side encodes fp32 values, so about one code in 32 lands on the
//   neighbouring E4M3 value (2^-3 relative): K and V noise ~1% against
//   BF16's 0.2%, the logits' NMSE up to ~25x BF16's.
// - the CUDA runner calibrating its own scales: each within 10% of the CPU
//   runner's (a layer's largest |K| and |V| over the same ~1,000 tokens,
//   with BF16 against fp32 activations), source "calibrated on N tokens".
// - a layer kept in BF16 (KvScales::bf16_layers, as calibration marks a
//   layer whose K FP8 would round too coarsely): tiny_llama with layer 0
//   kept, both runners given the same scales, matches the CPU runner, and
//   its pools hold the blocks the mixed bytes allow; every layer kept gives
//   the BF16 cache's logits bit for bit.
// - SmolLM2 over its own FP8 cache against the CUDA runner over a BF16 one
//   (greedy tokens on the golden prompts, issue 18's report).
// - the memory plan of a budget holds twice the tokens with fp8, and a model
//   whose head_dim is not a multiple of 16 (tiny_qwen2, 24) is refused at
//   creation naming kv_cache_dtype.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>

#include "engine/common/status_macros.h"
#include "engine/model/checkpoint.h"
#include "engine/runtime/cpu/cpu_model_runner.h"
#include "engine/runtime/cuda/cuda_model_runner.h"
#include "engine/runtime/kv_scales.h"
#include "gtest/gtest.h"
#include "tests/gpu/runner_test_util.h"
#include "tests/testing/all_close.h"

namespace onecard::engine {
namespace {

using onecard::testing::SourcePath;

constexpr double kFp8KvNmseScale = 25.0;
constexpr char kSmolModel[] = "models/SmolLM2-135M-Instruct.Q4_1.gguf";

bool SmolPresent() { return std::ifstream(SourcePath(kSmolModel)).good(); }

struct Fp8KvPair {
  std::unique_ptr<Checkpoint> ckpt;
  std::unique_ptr<ModelRunner> cpu;
};

// The checkpoint and its CPU runner (fp32 weights) with an FP8 KV cache.
absl::StatusOr<Fp8KvPair> OpenFp8Kv(const std::string& path) {
  Fp8KvPair p;
  ASSIGN_OR_RETURN(Checkpoint ckpt, OpenCheckpoint(path));
  p.ckpt = std::make_unique<Checkpoint>(std::move(ckpt));
  ASSIGN_OR_RETURN(p.cpu,
                   CreateCpuModelRunner(*p.ckpt, CpuRunnerOptions{
                                                     .kv_cache_dtype = KvCacheDtype::kFp8E4m3,
                                                     .weight_format = CpuWeightFormat::kF32,
                                                 }));
  return p;
}

void CheckAgainstCpu(const std::string& path, const std::string& golden_dir,
                     const std::string& label) {
  absl::StatusOr<Fp8KvPair> p = OpenFp8Kv(path);
  ASSERT_TRUE(p.ok()) << p.status();
  const KvScales* scales = p->cpu->kv_scales();
  ASSERT_NE(scales, nullptr);
  CudaRunnerOptions o = TestOptions();
  o.kv_cache_dtype = KvCacheDtype::kFp8E4m3;
  o.kv_scales = *scales;
  auto gpu = CreateCudaModelRunner(*p->ckpt, o);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  ASSERT_NE((*gpu)->kv_scales(), nullptr);
  EXPECT_EQ((*gpu)->kv_scales()->k, scales->k);
  EXPECT_EQ((*gpu)->kv_scales()->v, scales->v);
  EXPECT_EQ((*gpu)->memory_plan().kv_cache_dtype, KvCacheDtype::kFp8E4m3);
  std::printf("[%s] %s\n", label.c_str(), scales->Describe().c_str());
  CompareRunners(*p->cpu, **gpu, p->ckpt->config, golden_dir, label, kFp8KvNmseScale);
  DecodeStepsMatch(*p->cpu, **gpu, p->ckpt->config, label, kFp8KvNmseScale);
}

TEST(CudaModelRunnerFp8KvTest, TinyLlamaMatchesCpuWithTheSameScales) {
  CheckAgainstCpu(SourcePath("tests/golden/tiny_llama"), SourcePath("tests/golden/tiny_llama"),
                  "tiny_llama fp8 kv");
}

TEST(CudaModelRunnerFp8KvTest, SmolLm2MatchesCpuWithTheSameScales) {
  if (!SmolPresent()) GTEST_SKIP() << kSmolModel << " is not here (scripts/fetch-model.sh)";
  CheckAgainstCpu(SourcePath(kSmolModel), SourcePath("tests/golden/smollm2"), "smollm2 fp8 kv");
}

// Issue 18's report of greedy tokens against the BF16 path: SmolLM2's golden
// prompts on the CUDA runner over its own calibrated FP8 cache against the
// CUDA runner over a BF16 cache (the reference side of CompareRunners):
// logits within kFp8KvNmseScale x the BF16 tolerance, 16 greedy tokens
// identical or parting only at a near tie of the BF16 runner (printed).
TEST(CudaModelRunnerFp8KvTest, SmolLm2GreedyAgainstTheBf16Cache) {
  if (!SmolPresent()) GTEST_SKIP() << kSmolModel << " is not here (scripts/fetch-model.sh)";
  auto ckpt = OpenCheckpoint(SourcePath(kSmolModel));
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  CudaRunnerOptions o = TestOptions();
  auto bf16 = CreateCudaModelRunner(*ckpt, o);
  o.kv_cache_dtype = KvCacheDtype::kFp8E4m3;
  auto fp8 = CreateCudaModelRunner(*ckpt, o);
  ASSERT_TRUE(bf16.ok() && fp8.ok()) << bf16.status() << fp8.status();
  ASSERT_NE((*fp8)->kv_scales(), nullptr);
  std::printf("[smollm2 fp8 kv vs bf16 kv] %s\n", (*fp8)->kv_scales()->Describe().c_str());
  CompareRunners(**bf16, **fp8, ckpt->config, SourcePath("tests/golden/smollm2"),
                 "smollm2 fp8 kv vs bf16 kv", kFp8KvNmseScale);
}

TEST(CudaModelRunnerFp8KvTest, CalibratedScalesMatchTheCpuRunners) {
  for (const std::string name : {std::string("tests/golden/tiny_llama"), std::string(kSmolModel)}) {
    if (name == kSmolModel && !SmolPresent()) continue;
    SCOPED_TRACE(name);
    absl::StatusOr<Fp8KvPair> p = OpenFp8Kv(SourcePath(name));
    ASSERT_TRUE(p.ok()) << p.status();
    CudaRunnerOptions o = TestOptions();
    o.kv_cache_dtype = KvCacheDtype::kFp8E4m3;
    auto gpu = CreateCudaModelRunner(*p->ckpt, o);
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    const KvScales* want = p->cpu->kv_scales();
    const KvScales* got = (*gpu)->kv_scales();
    ASSERT_NE(want, nullptr);
    ASSERT_NE(got, nullptr);
    std::printf("[%s] cpu %s\n[%s] cuda %s\n", name.c_str(), want->Describe().c_str(), name.c_str(),
                got->Describe().c_str());
    EXPECT_NE(got->source.find("calibrated on "), std::string::npos) << got->source;
    ASSERT_EQ(got->k.size(), want->k.size());
    ASSERT_EQ(got->v.size(), want->v.size());
    for (size_t i = 0; i < want->k.size(); ++i) {
      EXPECT_NEAR(got->k[i], want->k[i], 0.1 * want->k[i]) << "k scale " << i;
      EXPECT_NEAR(got->v[i], want->v[i], 0.1 * want->v[i]) << "v scale " << i;
    }
  }
}

TEST(CudaModelRunnerFp8KvTest, LayersKeptInBf16MatchTheCpuAndShrinkThePool) {
  const std::string path = SourcePath("tests/golden/tiny_llama");
  absl::StatusOr<Fp8KvPair> p = OpenFp8Kv(path);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_NE(p->cpu->kv_scales(), nullptr);
  KvScales scales = *p->cpu->kv_scales();
  const int64_t layers = scales.num_layers;
  ASSERT_GE(layers, 2);
  scales.bf16_layers.assign(layers, 0);
  scales.bf16_layers[0] = 1;
  auto cpu = CreateCpuModelRunner(*p->ckpt, {.kv_cache_dtype = KvCacheDtype::kFp8E4m3,
                                             .kv_scales = scales,
                                             .weight_format = CpuWeightFormat::kF32});
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  CudaRunnerOptions o = TestOptions();
  o.max_context = 256;
  o.kv_cache_dtype = KvCacheDtype::kFp8E4m3;
  o.kv_scales = *p->cpu->kv_scales();
  auto all_fp8 = CreateCudaModelRunner(*p->ckpt, o);
  o.kv_scales = scales;
  auto mixed = CreateCudaModelRunner(*p->ckpt, o);
  ASSERT_TRUE(all_fp8.ok() && mixed.ok()) << all_fp8.status() << mixed.status();
  ASSERT_NE((*mixed)->kv_scales(), nullptr);
  EXPECT_TRUE((*mixed)->kv_scales()->LayerBf16(0));
  // Bytes a block: 2 (K, V) x elements x (1 a layer in FP8, 2 in BF16).
  const int64_t fp8_blocks = (*all_fp8)->kv_layout().num_blocks;
  const int64_t mixed_blocks = (*mixed)->kv_layout().num_blocks;
  const double want = static_cast<double>(fp8_blocks) * layers / (layers + 1);
  std::printf("tiny_llama: %lld KV blocks all fp8, %lld with layer 0 in bf16 (%.1f expected)\n",
              static_cast<long long>(fp8_blocks), static_cast<long long>(mixed_blocks), want);
  EXPECT_NEAR(static_cast<double>(mixed_blocks), want, 2.0);
  EXPECT_EQ((*mixed)->memory_plan().num_kv_blocks, mixed_blocks);
  CompareRunners(**cpu, **mixed, p->ckpt->config, path, "tiny_llama fp8 kv, layer 0 bf16",
                 kFp8KvNmseScale);
  DecodeStepsMatch(**cpu, **mixed, p->ckpt->config, "tiny_llama fp8 kv, layer 0 bf16",
                   kFp8KvNmseScale);

  // Every layer kept in BF16: the BF16 cache's arithmetic, so its logits.
  scales.bf16_layers.assign(layers, 1);
  o.kv_scales = scales;
  auto all_bf16 = CreateCudaModelRunner(*p->ckpt, o);
  CudaRunnerOptions b = TestOptions();
  b.max_context = 256;
  auto bf16 = CreateCudaModelRunner(*p->ckpt, b);
  ASSERT_TRUE(all_bf16.ok() && bf16.ok()) << all_bf16.status() << bf16.status();
  const std::vector<int32_t> tokens = {5, 17, 42, 7, 99, 3}, table = {0};
  ASSERT_LT(99, p->ckpt->config.vocab_size);
  const BatchInput batch = {.chunks = {{.token_ids = tokens, .start_pos = 0, .block_table = table}},
                            .all_logits = true};
  std::vector<float> got, want_logits;
  ASSERT_TRUE((*all_bf16)->Forward(batch, &got).ok());
  ASSERT_TRUE((*bf16)->Forward(batch, &want_logits).ok());
  EXPECT_EQ(got, want_logits);
}

TEST(CudaModelRunnerFp8KvTest, PlanHoldsTwiceTheTokensAndOddHeadDimIsRefused) {
  auto ckpt = OpenCheckpoint(SourcePath("tests/golden/tiny_llama"));
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  CudaRunnerOptions o = TestOptions();
  o.max_context = 256;
  auto bf16 = CreateCudaModelRunner(*ckpt, o);
  o.kv_cache_dtype = KvCacheDtype::kFp8E4m3;
  auto fp8 = CreateCudaModelRunner(*ckpt, o);
  ASSERT_TRUE(bf16.ok() && fp8.ok()) << bf16.status() << fp8.status();
  const int64_t bf16_blocks = (*bf16)->memory_plan().num_kv_blocks;
  const int64_t fp8_blocks = (*fp8)->memory_plan().num_kv_blocks;
  std::printf("tiny_llama in 3 GiB: %lld KV blocks bf16, %lld fp8\n",
              static_cast<long long>(bf16_blocks), static_cast<long long>(fp8_blocks));
  EXPECT_GE(fp8_blocks, 2 * bf16_blocks - 2);
  EXPECT_EQ((*bf16)->kv_scales(), nullptr);

  auto qwen = OpenCheckpoint(SourcePath("tests/golden/tiny_qwen2"));
  ASSERT_TRUE(qwen.ok()) << qwen.status();
  auto refused = CreateCudaModelRunner(*qwen, o);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnimplemented) << refused.status();
  EXPECT_NE(refused.status().message().find("kv_cache_dtype"), std::string::npos)
      << refused.status();
}

}  // namespace
}  // namespace onecard::engine
