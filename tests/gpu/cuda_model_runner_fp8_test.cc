// The CUDA runner with FP8 E4M3 projections against the CPU runner given the
// same weights' fp32 values (code value times scale, exactly):
// - the golden checkpoints tiny_llama and tiny_qwen2 quantized here (a scale
//   a row, amax / 448; round to nearest even): qkv and gate_up with row
//   scales, o and down with 128 x 128 block scales (their parts' rows are
//   not whole blocks, so a fused projection cannot take them), so one model
//   mixes both kinds;
// - with fp8_compute kW8A16 (steps past the GEMV's rows dequantize the
//   weight to BF16 for cuBLAS): the golden prompts' logits and 16 greedy
//   tokens (CompareRunners) and eight sequences decoding five steps
//   (DecodeStepsMatch), within the BF16 weights' tolerance: the weights are
//   exact, only activations round to BF16; the greedy steps take the GEMV
//   with FP8 codes;
// - with kW8A8 (activations quantized per token to E4M3 for the FP8 tensor
//   cores; block-scaled o and down still W8A16): the prompts' last-position
//   logits within kW8A8RelativeError of the CPU's (relative RMS of the
//   difference), and the memory plan names both FP8 kinds; quantized again
//   with every projection row-scaled, a prefill of eight sequences and their
//   decode step in W8A8 (Fp8Gemm's scaled forms, the norms and SiLU·mul in
//   its activations' pass) within the same bound;
// - the HF FP8 checkpoints of tests/golden/hf_fp8/ as the files hold them
//   (compressed-tensors per channel with down left BF16, per tensor, fbgemm
//   per channel): their formats in the memory plan, and eight sequences
//   decoding five steps against the CPU runner on the same files
//   (DecodeStepsMatch with fp8_compute kW8A16); the block-scaled one (heads
//   68 wide, for 128 x 128 blocks over 136 columns) is refused at creation:
//   no CUDA attention kernel takes head_dim 68.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <span>
#include <string>
#include <utility>

#include "engine/common/fp8.h"
#include "engine/kernels/fp8_weight.h"
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

// E4M3's 3 mantissa bits on every activation of the quantized projections.
constexpr double kW8A8RelativeError = 0.1;

// v [n, k] to E4M3 with `kind` scales (amax / 448 of the row or block).
Fp8Matrix QuantizeFp8(const std::vector<float>& v, int64_t n, int64_t k, Fp8Scales kind) {
  Fp8Matrix m{.n = n, .k = k, .scales_kind = kind};
  m.scales.assign(Fp8ScaleCount(n, k, kind), 0.0f);
  const int64_t blocks = (k + kFp8Block - 1) / kFp8Block;
  auto scale_of = [&](int64_t r, int64_t c) -> float& {
    return kind == Fp8Scales::kRow ? m.scales[r]
                                   : m.scales[(r / kFp8Block) * blocks + c / kFp8Block];
  };
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t c = 0; c < k; ++c)
      scale_of(r, c) = std::max(scale_of(r, c), std::abs(v[r * k + c]));
  }
  for (float& s : m.scales) s = s > 0.0f ? s / kE4m3Max : 1.0f;
  m.codes.resize(n * k);
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t c = 0; c < k; ++c) m.codes[r * k + c] = FloatToE4m3(v[r * k + c] / scale_of(r, c));
  }
  return m;
}

struct Quantized {
  ModelConfig config;
  ModelWeightsSpec spec;
  std::unique_ptr<ModelRunner> cpu;
  std::unique_ptr<CudaModelRunner> w8a16;
  std::unique_ptr<CudaModelRunner> w8a8;
};

// all_rows: every projection row-scaled (else o and down block-scaled).
void Quantize(const std::string& path, Quantized* out, bool all_rows = false) {
  absl::StatusOr<Checkpoint> ckpt = OpenCheckpoint(SourcePath(path));
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  absl::StatusOr<ModelWeightsF32> w = LoadWeightsF32(*ckpt);
  ASSERT_TRUE(w.ok()) << w.status();
  const ModelConfig& c = ckpt->config;
  out->config = c;
  out->spec = ModelWeightsSpec::Uniform(c, {});
  Fp8Parts fp8;
  int blocked = 0;
  for (int64_t layer = 0; layer < c.num_layers; ++layer) {
    for (int p = 0; p < kNumProjections; ++p) {
      const Projection projection = static_cast<Projection>(p);
      const bool single =
          !all_rows && (projection == Projection::kO || projection == Projection::kDown);
      const Fp8Scales kind = single ? Fp8Scales::kBlock128 : Fp8Scales::kRow;
      ASSERT_TRUE(CheckFp8Shape(c, projection, kind).ok()) << path << " projection " << p;
      out->spec.layers[layer][p] = {.format = WeightFormat::kFp8, .fp8_scales = kind};
      blocked += single;
      for (TensorPart part : ProjectionParts(projection)) {
        std::vector<float>& v = *PartWeights(*w, part, layer);
        const int64_t k = ProjectionShape(c, projection)[1];
        const int64_t n = static_cast<int64_t>(v.size()) / k;
        Fp8Matrix m = QuantizeFp8(v, n, k, kind);
        ASSERT_TRUE(m.Validate(path).ok());
        for (int64_t r = 0; r < n; ++r) {
          for (int64_t col = 0; col < k; ++col) v[r * k + col] = m.Value(r, col);
        }
        fp8[{part, layer}] = std::move(m);
      }
    }
  }
  ASSERT_TRUE(all_rows || blocked > 0);
  absl::StatusOr<std::unique_ptr<ModelRunner>> cpu =
      CreateCpuModelRunnerFromWeights(c, *w, CpuRunnerOptions{});
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  out->cpu = *std::move(cpu);
  for (Fp8Compute compute : {Fp8Compute::kW8A16, Fp8Compute::kW8A8}) {
    QuantizedSource source(*w, {}, fp8);
    CudaRunnerOptions o = TestOptions();
    o.fp8_compute = compute;
    absl::StatusOr<std::unique_ptr<CudaModelRunner>> gpu =
        CreateCudaModelRunnerFromSource(c, out->spec, source, o);
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    (compute == Fp8Compute::kW8A8 ? out->w8a8 : out->w8a16) = *std::move(gpu);
  }
}

TEST(CudaModelRunnerFp8Test, QuantizedTinyCheckpointsMatchCpu) {
  for (const char* path : {"tests/golden/tiny_llama", "tests/golden/tiny_qwen2"}) {
    SCOPED_TRACE(path);
    Quantized q;
    Quantize(path, &q);
    if (HasFatalFailure()) return;
    const std::string plan = q.w8a16->memory_plan().ToString();
    EXPECT_NE(plan.find("fp8 block128"), std::string::npos) << plan;
    const std::string label = std::string(path) + " fp8 w8a16";
    CompareRunners(*q.cpu, *q.w8a16, q.config, path, label);
    DecodeStepsMatch(*q.cpu, *q.w8a16, q.config, label);
    for (const Prompt& p : GoldenPrompts(path)) {
      OneSequence cpu_seq(q.cpu.get(), 16), gpu_seq(q.w8a8.get(), 16);
      absl::StatusOr<std::vector<float>> want = cpu_seq.Run(p.ids, false);
      absl::StatusOr<std::vector<float>> got = gpu_seq.Run(p.ids, false);
      ASSERT_TRUE(want.ok() && got.ok()) << want.status() << got.status();
      ASSERT_EQ(want->size(), got->size());
      double diff = 0, norm = 0;
      for (size_t i = 0; i < want->size(); ++i) {
        diff += std::pow((*got)[i] - (*want)[i], 2);
        norm += std::pow((*want)[i], 2);
      }
      const double relative = std::sqrt(diff / norm);
      std::printf("%s w8a8 prompt %s (%zu tokens): last logits' relative RMS error %.4f\n", path,
                  p.name.c_str(), p.ids.size(), relative);
      EXPECT_LT(relative, kW8A8RelativeError) << p.name;
    }
  }
}

// The comparison arm LaunchSettings::gemv_early_dependents on the FP8 Gemv
// kernel (W8A16 decode at batch 1): the prompts and the greedy steps still
// match the CPU runner on the dequantized weights.
TEST(CudaModelRunnerFp8Test, GemvEarlyLaunchesMatchCpu) {
  const LaunchSettings served = GetLaunchSettings();
  LaunchSettings early = served;
  early.gemv_early_dependents = true;
  ASSERT_TRUE(SetLaunchSettings(early).ok());
  const char* path = "tests/golden/tiny_llama";
  Quantized q;
  Quantize(path, &q);
  if (!HasFatalFailure()) {
    CompareRunners(*q.cpu, *q.w8a16, q.config, path, "tiny_llama fp8 w8a16, early Gemv");
  }
  ASSERT_TRUE(SetLaunchSettings(served).ok());
}

// The relative RMS of got against want.
double RelativeRms(const std::vector<float>& got, const std::vector<float>& want) {
  double diff = 0, norm = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    diff += std::pow(got[i] - want[i], 2);
    norm += std::pow(want[i], 2);
  }
  return std::sqrt(diff / norm);
}

// W8A8 steps of many rows with every projection row-scaled: a prefill of
// eight sequences (60-67 tokens each: Fp8Gemm's scaled forms where cuBLASLt
// has them, the norms in its activations' pass, gate_up's [gate | up] rows
// left for down's SiLU·mul) and a decode step of the eight (the fp32 sums
// and the epilogue kernel), every logit within kW8A8RelativeError of the
// CPU runner's on the dequantized weights.
TEST(CudaModelRunnerFp8Test, W8A8BatchesMatchCpu) {
  for (const char* path : {"tests/golden/tiny_llama", "tests/golden/tiny_qwen2"}) {
    SCOPED_TRACE(path);
    Quantized q;
    Quantize(path, &q, /*all_rows=*/true);
    if (HasFatalFailure()) return;
    constexpr int32_t kSeqs = 8;
    const int32_t block_size = q.w8a8->kv_layout().block_size;
    const int32_t blocks = (70 + block_size - 1) / block_size;
    const int32_t id_range = static_cast<int32_t>(std::min<int64_t>(500, q.config.vocab_size));
    std::vector<std::vector<int32_t>> tables(kSeqs), ids(kSeqs), next(kSeqs, {0});
    for (int32_t s = 0; s < kSeqs; ++s) {
      for (int32_t b = 0; b < blocks; ++b) tables[s].push_back(s * blocks + b);
      for (int32_t i = 0; i < 60 + s; ++i) ids[s].push_back((s * 29 + i * 7) % id_range);
      next[s][0] = (s * 13 + 5) % id_range;
    }
    auto table = [&](int32_t s, int32_t tokens) {
      return std::span<const int32_t>(tables[s]).first((tokens + block_size - 1) / block_size);
    };
    BatchInput prefill, decode;
    for (int32_t s = 0; s < kSeqs; ++s) {
      prefill.chunks.push_back({.seq_id = s, .token_ids = ids[s], .block_table = table(s, 60 + s)});
      decode.chunks.push_back({.seq_id = s,
                               .token_ids = next[s],
                               .start_pos = 60 + s,
                               .block_table = table(s, 61 + s)});
    }
    for (const BatchInput* batch : {&prefill, &decode}) {
      std::vector<float> want, got;
      ASSERT_TRUE(q.cpu->Forward(*batch, &want).ok());
      const absl::Status st = q.w8a8->Forward(*batch, &got);
      ASSERT_TRUE(st.ok()) << st;
      ASSERT_EQ(got.size(), want.size());
      const double relative = RelativeRms(got, want);
      std::printf("%s w8a8 %s of %d sequences: relative RMS error %.4f\n", path,
                  batch == &prefill ? "prefill" : "decode step", kSeqs, relative);
      EXPECT_LT(relative, kW8A8RelativeError);
    }
  }
}

TEST(CudaModelRunnerFp8Test, HfCheckpointsMatchCpu) {
  const std::pair<const char*, std::set<std::string>> cases[] = {
      {"ct_channel", {"bf16", "fp8"}}, {"ct_tensor", {"bf16", "fp8"}}, {"fbgemm", {"bf16", "fp8"}}};
  for (const auto& [name, formats] : cases) {
    const std::string path = std::string("tests/golden/hf_fp8/") + name;
    SCOPED_TRACE(path);
    absl::StatusOr<Reference> ref = OpenReference(path);
    ASSERT_TRUE(ref.ok()) << ref.status();
    CudaRunnerOptions o = TestOptions();
    o.fp8_compute = Fp8Compute::kW8A16;
    auto gpu = CreateCudaModelRunner(*ref->ckpt, o);
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    std::set<std::string> got;
    for (const auto& [format, bytes] : (*gpu)->memory_plan().weights.by_format) got.insert(format);
    EXPECT_EQ(got, formats);
    DecodeStepsMatch(*ref->cpu, **gpu, ref->ckpt->config, path);
  }
  // The block-scaled file's heads are 68 wide, which no CUDA attention
  // kernel takes: refused at creation, naming head_dim.
  absl::StatusOr<Reference> block = OpenReference("tests/golden/hf_fp8/fp8_block");
  ASSERT_TRUE(block.ok()) << block.status();
  auto refused = CreateCudaModelRunner(*block->ckpt, TestOptions());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnimplemented) << refused.status();
  EXPECT_NE(refused.status().message().find("head_dim 68"), std::string::npos) << refused.status();
}

}  // namespace
}  // namespace onecard::engine
