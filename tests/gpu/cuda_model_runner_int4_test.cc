// The CUDA runner with 4-bit projections against the CPU runner given the
// same weights' fp32 values (the 4-bit values exactly: codes times fp16
// scales plus offsets; the CPU runs them in fp32):
// - the golden checkpoints quantized to 4 bits by round-to-nearest
//   (QuantizeInt4Rtn, GPTQ's formulas, groups of 32): every projection whose
//   shape the 4-bit kernels take (tiny_llama: qkv, o, gate_up with zero
//   points; tiny_qwen2: down, symmetric), the rest BF16, so one model mixes
//   formats; the golden prompts' logits and 16 greedy tokens
//   (CompareRunners), and eight sequences decoding five steps
//   (DecodeStepsMatch: Int4Gemm at 8 rows);
//   the prompts' prefill (15-28 rows) takes Int4Gemm's tiled kernel (groups
//   of 32 leave kWgmma out), the greedy steps RmsNorm then Int4Gemm;
// - the HF 4-bit checkpoints of tests/golden/hf_int4/ as the files hold
//   them (GPTQ v2 sym, AWQ, compressed-tensors, and the act-order GPTQ v1
//   one: 4-bit projections with the files' codes, scales and zero points;
//   its o and down in act order, its q/k/v and gate/up BF16: their parts'
//   orders differ), their formats in the memory plan, and eight sequences
//   decoding five steps (DecodeStepsMatch);
// - SmolLM2 as a GPTQ act-order file and an AutoAWQ file (group 64), made on
//   the GPU machine by tests/golden/make_smollm2_int4_goldens.py into
//   models/ (not in git: ~110 MB each): every projection 4-bit, against
//   Hugging Face's logits and greedy tokens of the same values
//   (MatchesHfGolden);
// - a 2-layer model of llama3-8b's widths from seeded random weights, every
//   projection 4-bit (g128), decoding with the cluster split
//   (LaunchSettings::int4_cluster_split_k) on its o and down products
//   (DecodeStepsMatch);
// - SmolLM2's own Q4_1 tensors, repacked without re-rounding, is
//   cuda_model_runner_test.cc's MatchesCpuOnSmolLm2 (a GGUF's 4-bit tensors
//   stay 4-bit by default); here the same file with keep_quantized = false
//   (every projection expanded to BF16) must still match too.
// Tolerance: LogitTolerance, as for BF16 weights; in these tests' steps of up
// to 64 rows the 4-bit weights are exact, only activations round to BF16
// (steps of more than 256 rows, SmolLM2's 580-token prompt, take the weights
// rounded to BF16; kWgmma's 128-row tiles, 65-256 rows, within 2^-8).
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/kernels/int4_gemm.h"
#include "engine/kernels/int4_matrix.h"
#include "engine/kernels/launch_settings.h"
#include "engine/model/model_weights.h"
#include "engine/runtime/cpu/cpu_model_runner.h"
#include "engine/runtime/cuda/cuda_model_runner.h"
#include "gtest/gtest.h"
#include "tests/gpu/runner_test_util.h"
#include "tests/testing/all_close.h"

namespace onecard::engine {
namespace {

using onecard::testing::SourcePath;

// The launch settings in force with `change` applied, for one scope: the
// ones before come back at its end, whatever assertion leaves it early.
class ScopedLaunchSettings {
 public:
  explicit ScopedLaunchSettings(const std::function<void(LaunchSettings&)>& change)
      : saved_(GetLaunchSettings()) {
    LaunchSettings s = saved_;
    change(s);
    ok_ = SetLaunchSettings(s).ok();
  }
  ~ScopedLaunchSettings() { (void)SetLaunchSettings(saved_); }
  ScopedLaunchSettings(const ScopedLaunchSettings&) = delete;
  ScopedLaunchSettings& operator=(const ScopedLaunchSettings&) = delete;
  bool ok() const { return ok_; }

 private:
  LaunchSettings saved_;
  bool ok_ = false;
};

struct Quantized {
  ModelConfig config;
  ModelWeightsSpec spec;
  std::unique_ptr<ModelRunner> cpu;
  std::unique_ptr<CudaModelRunner> gpu;
};

// The projections of model c (weights w) that 4-bit weights can take,
// quantized (groups of `group`, `offsets`); the CPU runner gets their values,
// the CUDA runner (made under the launch settings in force) their codes.
void QuantizeWeights(const ModelConfig& c, absl::StatusOr<ModelWeightsF32> w, int32_t group,
                     Int4Offsets offsets, const std::string& label, Quantized* out) {
  ASSERT_TRUE(w.ok()) << w.status();
  out->config = c;
  out->spec = ModelWeightsSpec::Uniform(c, {});
  Int4Parts int4;
  int quantized = 0;
  for (int64_t layer = 0; layer < c.num_layers; ++layer) {
    for (int p = 0; p < kNumProjections; ++p) {
      if (!CheckInt4Shape(c, static_cast<Projection>(p), group).ok()) continue;
      out->spec.layers[layer][p] = {
          .format = WeightFormat::kInt4, .group = group, .offsets = offsets};
      ++quantized;
      for (TensorPart part : ProjectionParts(static_cast<Projection>(p))) {
        std::vector<float>& v = *PartWeights(*w, part, layer);
        const int64_t k = ProjectionShape(c, static_cast<Projection>(p))[1];
        const int64_t n = static_cast<int64_t>(v.size()) / k;
        absl::StatusOr<Int4Matrix> m = QuantizeInt4Rtn(v, n, k, group, offsets);
        ASSERT_TRUE(m.ok()) << m.status();
        for (int64_t r = 0; r < n; ++r) {
          for (int64_t col = 0; col < k; ++col) v[r * k + col] = m->Value(r, col);
        }
        int4[{part, layer}] = *std::move(m);
      }
    }
  }
  ASSERT_GT(quantized, 0) << label << ": no projection took 4-bit weights";
  absl::StatusOr<std::unique_ptr<ModelRunner>> cpu =
      CreateCpuModelRunnerFromWeights(c, *w, CpuRunnerOptions{});
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  out->cpu = *std::move(cpu);
  QuantizedSource source(*std::move(w), std::move(int4));
  absl::StatusOr<std::unique_ptr<CudaModelRunner>> gpu =
      CreateCudaModelRunnerFromSource(c, out->spec, source, TestOptions());
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  out->gpu = *std::move(gpu);
}

// The golden checkpoint at `path`, its projections quantized in groups of 32.
void Quantize(const std::string& path, Int4Offsets offsets, Quantized* out) {
  absl::StatusOr<Checkpoint> ckpt = OpenCheckpoint(SourcePath(path));
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  QuantizeWeights(ckpt->config, LoadWeightsF32(*ckpt), 32, offsets, path, out);
}

// Seeded random fp32 weights of model c (no biases, an untied head):
// projections uniform in +-1 / sqrt(k), norms in [0.8, 1.2], embeddings in
// +-1.
ModelWeightsF32 RandomWeights(const ModelConfig& c, uint32_t seed) {
  std::mt19937 rng(seed);
  const auto fill = [&](int64_t n, float lo, float hi) {
    std::uniform_real_distribution<float> u(lo, hi);
    std::vector<float> v(n);
    for (float& x : v) x = u(rng);
    return v;
  };
  const int64_t h = c.hidden_size, q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim;
  const int64_t f = c.intermediate_size;
  const float ah = 1.0f / std::sqrt(static_cast<float>(h)),
              aq = 1.0f / std::sqrt(static_cast<float>(q));
  const float af = 1.0f / std::sqrt(static_cast<float>(f));
  ModelWeightsF32 w;
  w.embedding = fill(c.vocab_size * h, -1.0f, 1.0f);
  w.final_norm = fill(h, 0.8f, 1.2f);
  w.lm_head = fill(c.vocab_size * h, -ah, ah);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    LayerWeightsF32 lw;
    lw.attn_norm = fill(h, 0.8f, 1.2f);
    lw.wq = fill(q * h, -ah, ah);
    lw.wk = fill(kv * h, -ah, ah);
    lw.wv = fill(kv * h, -ah, ah);
    lw.wo = fill(h * q, -aq, aq);
    lw.ffn_norm = fill(h, 0.8f, 1.2f);
    lw.w_gate = fill(f * h, -ah, ah);
    lw.w_up = fill(f * h, -ah, ah);
    lw.w_down = fill(h * f, -af, af);
    w.layers.push_back(std::move(lw));
  }
  return w;
}

TEST(CudaModelRunnerInt4Test, QuantizedTinyCheckpointsMatchCpu) {
  const std::pair<const char*, Int4Offsets> cases[] = {
      {"tests/golden/tiny_llama", Int4Offsets::kZero},
      {"tests/golden/tiny_qwen2", Int4Offsets::kSymmetric}};
  for (const auto& [path, offsets] : cases) {
    SCOPED_TRACE(path);
    Quantized q;
    Quantize(path, offsets, &q);
    if (HasFatalFailure()) return;
    const std::string label = std::string(path) + " int4";
    CompareRunners(*q.cpu, *q.gpu, q.config, path, label);
    DecodeStepsMatch(*q.cpu, *q.gpu, q.config, label);
  }
}

// The comparison arm LaunchSettings::int4_norm_in_gemm_max_rows: the greedy
// steps' q/k/v and gate/up products (one row) take the RMSNorm in Int4Gemm's
// prologue instead of an RmsNorm launch, on kStream (int4_gemv_max_rows = 0)
// and on kGemv (4, as served), against the same CPU runner.
TEST(CudaModelRunnerInt4Test, NormInTheProductMatchesCpu) {
  const char* path = "tests/golden/tiny_llama";  // its q/k/v and gate/up are 4-bit
  for (const int32_t gemv_max_rows : {0, 4}) {
    const std::string label = absl::StrCat("tiny_llama int4, norm in the product, ",
                                           gemv_max_rows == 0 ? "kStream" : "kGemv");
    SCOPED_TRACE(label);
    const ScopedLaunchSettings arm([&](LaunchSettings& s) {
      s.int4_norm_in_gemm_max_rows = kInt4GemmMaxNormRows;
      s.int4_gemv_max_rows = gemv_max_rows;
    });
    ASSERT_TRUE(arm.ok());
    Quantized q;
    Quantize(path, Int4Offsets::kZero, &q);
    if (!HasFatalFailure()) {
      CompareRunners(*q.cpu, *q.gpu, q.config, path, label);
    }
    if (HasFatalFailure()) return;
  }
}

// The comparison arms LaunchSettings::int4_stream_blocks_per_sm = 1 (room an
// SM for the next projection's block), early_dependents = false (each
// kernel lets the next launch only after its own wait) and
// int4_gemv_max_rows = 8 (Int4Gemm's kGemv kernel for the decode steps): the
// prompt and the greedy steps still match the same CPU runner.
TEST(CudaModelRunnerInt4Test, LaunchArmsMatchCpu) {
  const struct {
    int32_t blocks_per_sm;
    bool early;
    int32_t gemv_max_rows;
    const char* label;
  } kArms[] = {{1, true, 0, "tiny_llama int4, one block an SM"},
               {0, false, 0, "tiny_llama int4, dependents after the wait"},
               {0, true, 8, "tiny_llama int4, kGemv up to 8 rows"}};
  const char* path = "tests/golden/tiny_llama";
  for (const auto& arm : kArms) {
    SCOPED_TRACE(arm.label);
    const ScopedLaunchSettings settings([&](LaunchSettings& s) {
      s.int4_stream_blocks_per_sm = arm.blocks_per_sm;
      s.early_dependents = arm.early;
      s.int4_gemv_max_rows = arm.gemv_max_rows;
    });
    ASSERT_TRUE(settings.ok());
    Quantized q;
    Quantize(path, Int4Offsets::kZero, &q);
    if (!HasFatalFailure()) {
      CompareRunners(*q.cpu, *q.gpu, q.config, path, arm.label);
      DecodeStepsMatch(*q.cpu, *q.gpu, q.config, arm.label);
    }
    if (HasFatalFailure()) return;
  }
}

// A 2-layer model with llama3-8b's widths (hidden 4096, 32 heads of 128, 8
// KV heads, intermediate 14336).
ModelConfig Llama3_8bWidths(const std::string& name) {
  ModelConfig c = SmallLlamaConfig(name, 2);
  c.hidden_size = 4096;
  c.intermediate_size = 14336;
  c.num_heads = 32;
  c.num_kv_heads = 8;
  c.head_dim = 128;
  return c;
}

// kGemv in the runner (LaunchSettings::int4_gemv_max_rows = 8):
// Llama3_8bWidths' model, every projection 4-bit in groups of 128,
// symmetric, from seeded random weights, eight sequences decoding five steps
// against the CPU runner given the same values: at 8 rows qkv, o and gate_up
// (4096 columns) take kGemv and down (14336: x's 8 rows do not fit its
// shared memory) kStream.
TEST(CudaModelRunnerInt4Test, GemvMatchesCpu) {
  const ModelConfig c = Llama3_8bWidths("gemv-2l");
  const ScopedLaunchSettings arm([](LaunchSettings& s) { s.int4_gemv_max_rows = 8; });
  ASSERT_TRUE(arm.ok());
  Quantized q;
  QuantizeWeights(c, RandomWeights(c, 41), 128, Int4Offsets::kSymmetric, "random llama3-8b widths",
                  &q);
  if (!HasFatalFailure()) DecodeStepsMatch(*q.cpu, *q.gpu, q.config, "kGemv, 8 rows");
}

// The cluster split (LaunchSettings::int4_cluster_split_k) in the runner:
// Llama3_8bWidths' model, every projection 4-bit in groups of 128,
// symmetric, from seeded random weights; its o and down products at up to 8
// rows take clusters of 8 (32 row groups: Int4GemmTest's cluster_o8b_add_r1
// checks the split is taken on the card), against the CPU runner given the
// same values: eight sequences decoding five steps (8 rows; DecodeStepsMatch).
TEST(CudaModelRunnerInt4Test, ClusterSplitMatchesCpu) {
  const ModelConfig c = Llama3_8bWidths("cluster-split-2l");
  const ScopedLaunchSettings arm([](LaunchSettings& s) { s.int4_cluster_split_k = true; });
  ASSERT_TRUE(arm.ok());
  Quantized q;
  QuantizeWeights(c, RandomWeights(c, 37), 128, Int4Offsets::kSymmetric, "random llama3-8b widths",
                  &q);
  if (!HasFatalFailure()) {
    for (int p = 0; p < kNumProjections; ++p) {
      EXPECT_EQ(q.spec.layers[0][p].format, WeightFormat::kInt4) << "projection " << p;
    }
    DecodeStepsMatch(*q.cpu, *q.gpu, q.config, "cluster split, 8 rows");
  }
}

// LaunchSettings::int4_fold_norm: a layer's two RMSNorms folded into its
// 4-bit products (Int4NormFold) at up to 16 rows. The 2-layer model of
// llama3-8b's widths above decoding eight sequences (8 rows: the second
// layer's qkv takes the first one's down output folded, each gate_up its
// o's), and SmolLM2's Q4_1 file (30 layers, every projection 4-bit with
// mins) where it is here: its golden prompts' greedy steps at one row,
// against the CPU runner.
TEST(CudaModelRunnerInt4Test, FoldedNormsMatchCpu) {
  const ModelConfig c = Llama3_8bWidths("fold-norm-2l");
  const ScopedLaunchSettings arm([](LaunchSettings& s) { s.int4_fold_norm = true; });
  ASSERT_TRUE(arm.ok());
  {
    Quantized q;
    QuantizeWeights(c, RandomWeights(c, 41), 128, Int4Offsets::kZero, "random llama3-8b widths",
                    &q);
    if (!HasFatalFailure()) DecodeStepsMatch(*q.cpu, *q.gpu, q.config, "folded norms, 8 rows");
  }
  const std::string model = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
  if (!HasFatalFailure() && std::ifstream(SourcePath(model)).good()) {
    absl::StatusOr<Reference> ref = OpenReference(model);
    ASSERT_TRUE(ref.ok()) << ref.status();
    auto gpu = CreateCudaModelRunner(*ref->ckpt, TestOptions());
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    CompareRunners(*ref->cpu, **gpu, ref->ckpt->config, "tests/golden/smollm2",
                   "smollm2 int4, folded norms");
  } else {
    std::printf("%s is not here: the folded norms only on the random model\n", model.c_str());
  }
}

TEST(CudaModelRunnerInt4Test, HfCheckpointsMatchCpu) {
  const std::pair<const char*, std::set<std::string>> cases[] = {
      {"gptq_v1_act", {"bf16", "int4 g32 zero act-order"}},
      {"gptq_v2_sym", {"bf16", "int4 g64"}},
      {"awq", {"bf16", "int4 g64 zero"}},
      {"compressed", {"bf16", "int4 g32 zero", "int4 g64"}}};  // attention / MLP
  for (const auto& [name, formats] : cases) {
    const std::string path = std::string("tests/golden/hf_int4/") + name;
    SCOPED_TRACE(path);
    absl::StatusOr<Reference> ref = OpenReference(path);
    ASSERT_TRUE(ref.ok()) << ref.status();
    auto gpu = CreateCudaModelRunner(*ref->ckpt, TestOptions());
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    std::set<std::string> got;
    for (const auto& [format, bytes] : (*gpu)->memory_plan().weights.by_format) got.insert(format);
    EXPECT_EQ(got, formats);
    DecodeStepsMatch(*ref->cpu, **gpu, ref->ckpt->config, path);
  }
}

TEST(CudaModelRunnerInt4Test, SmolLm2GptqActOrderAndAwqFilesMatchHuggingFace) {
  // The folders make_smollm2_int4_goldens.py writes with --out-models models,
  // the goldens it writes beside the others, and the one 4-bit format each
  // file's 210 projections take (q/k/v and gate/up share their act order).
  const struct {
    const char* model;
    const char* golden;
    const char* format;  // its name in the plan, and as ParseProjectionSpec reads it
    const char* spec;
  } kFiles[] = {
      {"models/smollm2-gptq-act", "tests/golden/smollm2_gptq_act", "int4 g64 zero act-order",
       "int4-g64-zero-act"},
      {"models/smollm2-awq", "tests/golden/smollm2_awq", "int4 g64 zero", "int4-g64-zero"}};
  int ran = 0;
  for (const auto& f : kFiles) {
    SCOPED_TRACE(f.model);
    if (!std::ifstream(SourcePath(std::string(f.model) + "/model.safetensors")).good()) {
      std::printf(
          "%s is not here (tests/golden/make_smollm2_int4_goldens.py --out-models "
          "models --models-only makes it)\n",
          f.model);
      continue;
    }
    ASSERT_TRUE(std::ifstream(SourcePath(std::string(f.golden) + "/logits.json")).good())
        << f.golden << "/logits.json is missing";
    absl::StatusOr<Checkpoint> ckpt = OpenCheckpoint(SourcePath(f.model));
    ASSERT_TRUE(ckpt.ok()) << ckpt.status();
    auto gpu = CreateCudaModelRunner(*ckpt, TestOptions());
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    const WeightBytes& w = (*gpu)->memory_plan().weights;
    ASSERT_EQ(w.by_format.size(), 2u) << w.ToString();
    const ModelConfig& c = ckpt->config;
    int64_t want = 0;
    for (int p = 0; p < kNumProjections; ++p) {
      const auto [n, k] = ProjectionShape(c, static_cast<Projection>(p));
      want += ProjectionBytes(*ParseProjectionSpec(f.spec), n, k);
    }
    EXPECT_EQ(w.by_format.count(f.format), 1u) << w.ToString();
    EXPECT_EQ(w.by_format.count(f.format) ? w.by_format.at(f.format) : 0, want * c.num_layers);
    MatchesHfGolden(**gpu, c, f.golden, f.model);
    ++ran;
  }
  if (ran == 0) GTEST_SKIP() << "no SmolLM2 4-bit file in models/";
}

TEST(CudaModelRunnerInt4Test, SmolLm2ExpandedToBf16MatchesCpu) {
  const std::string model = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
  if (!std::ifstream(SourcePath(model)).good()) {
    GTEST_SKIP() << model << " is not here (scripts/fetch-model.sh)";
  }
  absl::StatusOr<Reference> ref = OpenReference(model);
  ASSERT_TRUE(ref.ok()) << ref.status();
  CudaRunnerOptions o = TestOptions();
  o.keep_quantized = false;
  auto gpu = CreateCudaModelRunner(*ref->ckpt, o);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  EXPECT_EQ((*gpu)->memory_plan().weights.by_format.count("int4 g32 min"), 0u);
  CompareRunners(*ref->cpu, **gpu, ref->ckpt->config, "tests/golden/smollm2", "smollm2 bf16");
}

TEST(CudaModelRunnerInt4Test, SmolLm2KeepsItsQ41TensorsAs4Bit) {
  const std::string model = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
  if (!std::ifstream(SourcePath(model)).good()) {
    GTEST_SKIP() << model << " is not here (scripts/fetch-model.sh)";
  }
  absl::StatusOr<Checkpoint> ckpt = OpenCheckpoint(SourcePath(model));
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  auto gpu = CreateCudaModelRunner(*ckpt, TestOptions());
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  const WeightBytes& w = (*gpu)->memory_plan().weights;
  // Every linear tensor of the file is Q4_1: the 30 layers' projections are
  // 4-bit with mins (codes n k / 2 + scales and mins 4 bytes a group of 32).
  ASSERT_EQ(w.by_format.count("int4 g32 min"), 1u) << w.ToString();
  const ModelConfig& c = ckpt->config;
  int64_t want = 0;
  for (int p = 0; p < kNumProjections; ++p) {
    const auto [n, k] = ProjectionShape(c, static_cast<Projection>(p));
    want += ProjectionBytes(
        {.format = WeightFormat::kInt4, .group = 32, .offsets = Int4Offsets::kFloat}, n, k);
  }
  EXPECT_EQ(w.by_format.at("int4 g32 min"), want * c.num_layers);
}

}  // namespace
}  // namespace onecard::engine
