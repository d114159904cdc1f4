// Tests of the quantize subcommand:
// - its argument checks (before anything loads);
// - the tiny golden checkpoints (tests/golden/tiny_llama: GQA, untied, BF16;
//   tiny_qwen2: q/k/v bias, tied, F32 shards) quantized with groups of 32,
//   sym and not, then opened with onecard's own loader (the GPTQ reader of
//   engine/model/hf_int4.h): the config it finds is GPTQ v1 with the group
//   and sym asked for; every projection's 4-bit values equal, bit for bit,
//   fp16(scale) (code - zero) of GPTQ's round-to-nearest of the original
//   weights (QuantizeGptqRtn, checked against GPTQ's formulas by
//   tests/engine/model/gptq_quantizer_test.cc); every other tensor is
//   copied byte for byte; the tokenizer files are there;
// - the quantized model runs on the cpu backend: its logits equal bit for
//   bit those of the original model with the reference-dequantized
//   projections put in its place (the cpu backend computes in fp32 from the
//   same fp32 weights), and stay near the original model's (bound below);
// - the bytes written for three tiny_qwen2 projections equal those of
//   GPTQModel's quantizer and packer (tests/golden/quantize/);
// - the input errors: a missing folder, a group that does not divide k, an
//   already-quantized checkpoint, an output that cannot be created, the
//   input folder as output, a GGUF tensor with no place in an HF folder;
//   each names what is wrong, is a usage error (exit 2) and writes nothing;
// - a GGUF file (a tiny model, llama with llama.cpp's Q/K permutation and
//   qwen2 with biases) gives the same tensors, byte for byte, and the same
//   config as the HF folder of the same model (tests/engine/model/
//   tiny_model.h writes both); the real GGUF files are quantize_gguf_test's;
// - --format fp8: tiny_llama's and tiny_qwen2's projections written as
//   compressed-tensors float-quantized pairs whose codes and scales equal,
//   byte for byte, those ml_dtypes gives (tests/golden/hf_fp8/
//   quantize_tiny_llama.safetensors, make_hf_fp8_goldens.py); the folder
//   loads as FP8 (per-channel, dynamic per-token activations, lm_head
//   ignored), every other tensor is copied, and the cpu backend runs it:
//   the same logits and greedy tokens as the runner made from its
//   dequantized weights, near the original's; a GGUF input gives the HF
//   folder's bytes; an FP8 checkpoint is refused as already quantized.
#include "tools/onecard/quantize_command.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "engine/model/checkpoint.h"
#include "engine/model/gptq_quantizer.h"
#include "engine/model/layer_tensors.h"
#include "engine/model/model_weights.h"
#include "engine/model/safetensors.h"
#include "engine/runtime/cpu/cpu_model_runner.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/engine/model/model_test_util.h"
#include "tests/engine/model/tiny_model.h"
#include "tests/testing/all_close.h"

namespace onecard::tools {
namespace {

using engine::TensorPart;
using ::onecard::testing::ScratchDir;
using ::onecard::testing::SourcePath;
using ::testing::HasSubstr;

constexpr TensorPart kProjections[] = {TensorPart::kQ,   TensorPart::kK,    TensorPart::kV,
                                       TensorPart::kO,   TensorPart::kGate, TensorPart::kUp,
                                       TensorPart::kDown};

TEST(QuantizeCommandTest, ArgumentErrorsNameTheFlag) {
  const QuantizeCommandOptions valid = {.model_path = "m", .out_dir = "o"};
  EXPECT_TRUE(CheckQuantizeOptions(valid).ok());
  QuantizeCommandOptions o = valid;
  o.model_path.clear();
  EXPECT_THAT(CheckQuantizeOptions(o).message(), HasSubstr("--model is required"));
  o = valid;
  o.out_dir.clear();
  EXPECT_THAT(CheckQuantizeOptions(o).message(), HasSubstr("--out is required"));
  o = valid;
  o.method = "awq";
  EXPECT_THAT(CheckQuantizeOptions(o).message(), HasSubstr("--method: \"awq\""));
  for (int32_t bad : {0, -2, 12, 4}) {
    o = valid;
    o.group_size = bad;
    EXPECT_THAT(CheckQuantizeOptions(o).message(), HasSubstr("--group-size")) << bad;
  }
  o = valid;
  o.group_size = -1;
  EXPECT_TRUE(CheckQuantizeOptions(o).ok());
  o = valid;
  o.format = QuantizeFormat::kFp8;
  EXPECT_TRUE(CheckQuantizeOptions(o).ok());
  o.method = "gptq";
  o.calibration_path = "text";
  EXPECT_THAT(CheckQuantizeOptions(o).message(), HasSubstr("--method gptq: only --format int4"));
}

TEST(QuantizeCommandTest, FormatFlagParses) {
  QuantizeFormat format = QuantizeFormat::kInt4;
  std::string error;
  EXPECT_TRUE(AbslParseFlag("fp8", &format, &error));
  EXPECT_EQ(format, QuantizeFormat::kFp8);
  EXPECT_TRUE(AbslParseFlag("int4", &format, &error));
  EXPECT_EQ(format, QuantizeFormat::kInt4);
  EXPECT_FALSE(AbslParseFlag("int8", &format, &error));
  EXPECT_EQ(error, "\"int8\" is not one of int4, fp8");
  EXPECT_EQ(AbslUnparseFlag(QuantizeFormat::kFp8), "fp8");
  EXPECT_EQ(AbslUnparseFlag(QuantizeFormat::kInt4), "int4");
}

// The last token's logits of `tokens` in one prefill.
std::vector<float> LastLogits(engine::ModelRunner& runner, const std::vector<int32_t>& tokens) {
  const std::vector<int32_t> table = {0, 1};
  engine::BatchInput batch;
  batch.chunks.push_back({1, tokens, 0, table});
  std::vector<float> logits;
  const absl::Status status = runner.Forward(batch, &logits);
  EXPECT_TRUE(status.ok()) << status;
  return logits;
}

double Nmse(std::span<const float> got, std::span<const float> want) {
  return ::onecard::testing::CompareAll(got, want, {}).nmse;
}

// Every tensor of `original` but the decoder projections is in `quantized`,
// byte for byte.
void ExpectOtherTensorsCopied(const engine::Checkpoint& original,
                              const engine::Checkpoint& quantized) {
  for (const std::string& name : original.weights->TensorNames()) {
    if (name.ends_with("_proj.weight") && name.find("layers.") != std::string::npos) continue;
    const engine::TensorView* a = original.weights->Find(name);
    const engine::TensorView* b = quantized.weights->Find(name);
    ASSERT_NE(b, nullptr) << name;
    EXPECT_EQ(a->dtype, b->dtype) << name;
    ASSERT_EQ(a->size_bytes, b->size_bytes) << name;
    EXPECT_EQ(std::memcmp(a->data, b->data, a->size_bytes), 0) << name;
  }
}

// The cpu backend on the original checkpoint, on the quantized one, and on
// `reference` weights (the quantized values in fp32).
struct Runners {
  absl::StatusOr<std::unique_ptr<engine::ModelRunner>> original, quantized, reference;
  bool ok() const {
    EXPECT_TRUE(original.ok() && quantized.ok() && reference.ok())
        << original.status() << quantized.status() << reference.status();
    return original.ok() && quantized.ok() && reference.ok();
  }
};
Runners MakeRunners(const engine::Checkpoint& original, const engine::Checkpoint& quantized,
                    engine::ModelWeightsF32 reference) {
  const engine::CpuRunnerOptions options = {.num_threads = 2, .num_kv_blocks = 4};
  return {engine::CreateCpuModelRunner(original, options),
          engine::CreateCpuModelRunner(quantized, options),
          engine::CreateCpuModelRunnerFromWeights(original.config, std::move(reference), options)};
}

const std::vector<int32_t> kTokens = {5, 17, 230, 99, 4, 512, 77, 3, 610, 42, 8, 300};

struct GoldenCase {
  const char* dir;
  bool sym;
};

class QuantizeGoldenTest : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(QuantizeGoldenTest, OnecardLoadsGptqRoundToNearestOfTheOriginal) {
  ScratchDir scratch;
  const QuantizeCommandOptions o = {.model_path = SourcePath(GetParam().dir),
                                    .out_dir = scratch.path() + "/q",
                                    .group_size = 32,
                                    .sym = GetParam().sym};
  std::ostringstream out;
  const absl::Status status = RunQuantize(o, out);
  ASSERT_TRUE(status.ok()) << status;
  const nlohmann::json summary = nlohmann::json::parse(out.str(), nullptr, false);
  ASSERT_TRUE(summary.is_object()) << out.str();

  absl::StatusOr<engine::Checkpoint> original = engine::OpenCheckpoint(o.model_path);
  absl::StatusOr<engine::Checkpoint> quantized = engine::OpenCheckpoint(o.out_dir);
  ASSERT_TRUE(original.ok() && quantized.ok()) << original.status() << quantized.status();
  const int64_t layers = original->config.num_layers;
  EXPECT_EQ(summary["tensors_quantized"], 7 * layers);
  EXPECT_EQ(summary["layers"], layers);
  EXPECT_EQ(quantized->quant.method, engine::HfQuantMethod::kGptq);
  EXPECT_EQ(quantized->quant.group_size, 32);
  EXPECT_EQ(quantized->quant.symmetric, GetParam().sym);
  EXPECT_FALSE(quantized->quant.gptq_v2);
  EXPECT_FALSE(quantized->quant.desc_act);
  EXPECT_TRUE(std::filesystem::exists(o.out_dir + "/tokenizer.json"));

  absl::StatusOr<engine::ModelWeightsF32> reference = engine::LoadWeightsF32(*original);
  ASSERT_TRUE(reference.ok()) << reference.status();
  double sum_weight_nmse = 0;
  for (int64_t l = 0; l < layers; ++l) {
    for (TensorPart part : kProjections) {
      absl::StatusOr<engine::ResolvedTensor> w = engine::ResolveTensor(*original, part, l);
      absl::StatusOr<engine::ResolvedTensor> q = engine::ResolveTensor(*quantized, part, l);
      ASSERT_TRUE(w.ok() && q.ok()) << w.status() << q.status();
      ASSERT_TRUE(q->hf_int4.has_value()) << q->name;
      const int64_t n = w->shape[0], k = w->shape[1];
      absl::StatusOr<std::vector<float>> values = engine::ReadTensorF32(*w);
      absl::StatusOr<engine::GptqQuantized> rtn =
          engine::QuantizeGptqRtn(*values, n, k, 32, GetParam().sym);
      absl::StatusOr<engine::Int4Matrix> m = engine::ReadTensorInt4(*q);
      ASSERT_TRUE(rtn.ok() && m.ok()) << rtn.status() << m.status();
      std::vector<float>& dequantized = *engine::PartWeights(*reference, part, l);
      dequantized = engine::DequantizeGptq(*rtn);  // fp16(scale) (code - zero)
      int64_t mismatches = 0;
      for (int64_t r = 0; r < n; ++r) {
        for (int64_t c = 0; c < k; ++c) mismatches += m->Value(r, c) != dequantized[r * k + c];
      }
      EXPECT_EQ(mismatches, 0) << q->name;
      // Rounding to steps of 2 max|w| / 15 (max|w| ~ 2.5 sigma in a group of
      // 32 normal weights) leaves uniform noise of step^2 / 12 ~ 0.009 sigma^2
      // (sym; zero points: less). Measured 0.0061 .. 0.0095.
      const double weight_nmse = Nmse(dequantized, *values);
      EXPECT_LT(weight_nmse, 0.0125) << q->name;
      sum_weight_nmse += weight_nmse;
    }
  }
  ExpectOtherTensorsCopied(*original, *quantized);
  Runners runners = MakeRunners(*original, *quantized, std::move(*reference));
  ASSERT_TRUE(runners.ok());
  const std::vector<float> logits_q = LastLogits(**runners.quantized, kTokens);
  const std::vector<float> logits_o = LastLogits(**runners.original, kTokens);
  EXPECT_EQ(logits_q, LastLogits(**runners.reference, kTokens));
  // Near the original: each projection's relative output error is about its
  // weight NMSE, and the errors of the 14 (llama) or 21 (qwen2) projections
  // add up along the residual stream: their sum (0.09 .. 0.19 here) estimates
  // the logits' NMSE; measured 0.06 .. 0.14 (these random models' logits are
  // nearly flat, so their top-1 is not stable under 4-bit noise and is not
  // compared). Twice the estimate leaves room for the estimate's roughness; a
  // packing error (a nibble or row out of place, a zero point off by one)
  // turns projections into other random matrices and gives an NMSE near 1
  // or more (and fails the bit-for-bit checks above).
  EXPECT_LT(Nmse(logits_q, logits_o), 2 * sum_weight_nmse);
}

INSTANTIATE_TEST_SUITE_P(TinyCheckpoints, QuantizeGoldenTest,
                         ::testing::Values(GoldenCase{"tests/golden/tiny_llama", true},
                                           GoldenCase{"tests/golden/tiny_llama", false},
                                           GoldenCase{"tests/golden/tiny_qwen2", true},
                                           GoldenCase{"tests/golden/tiny_qwen2", false}));

// The bytes GPTQModel's quantizer and packer give (ported to numpy by
// tests/golden/quantize/make_quantize_goldens.py) for three projections of
// tiny_qwen2, sym and not: qweight, v1 qzeros, fp16 scales and g_idx, equal.
TEST(QuantizeCommandTest, WritesTheBytesOfGptqModelsPacking) {
  absl::StatusOr<std::unique_ptr<engine::SafetensorsSource>> golden =
      engine::SafetensorsSource::OpenFile(
          SourcePath("tests/golden/quantize/tiny_qwen2_g32.safetensors"));
  ASSERT_TRUE(golden.ok()) << golden.status();
  for (const bool sym : {true, false}) {
    ScratchDir scratch;
    const QuantizeCommandOptions o = {.model_path = SourcePath("tests/golden/tiny_qwen2"),
                                      .out_dir = scratch.path() + "/q",
                                      .group_size = 32,
                                      .sym = sym};
    std::ostringstream out;
    ASSERT_TRUE(RunQuantize(o, out).ok());
    absl::StatusOr<std::unique_ptr<engine::SafetensorsSource>> written =
        engine::SafetensorsSource::OpenFile(o.out_dir + "/model.safetensors");
    ASSERT_TRUE(written.ok()) << written.status();
    const std::string prefix = sym ? "sym/" : "asym/";
    int compared = 0;
    for (const std::string& name : (*golden)->TensorNames()) {
      if (!name.starts_with(prefix)) continue;
      const engine::TensorView* want = (*golden)->Find(name);
      const engine::TensorView* got = (*written)->Find(name.substr(prefix.size()));
      ASSERT_NE(got, nullptr) << name;
      EXPECT_EQ(got->dtype, want->dtype) << name;
      EXPECT_EQ(got->shape, want->shape) << name;
      ASSERT_EQ(got->size_bytes, want->size_bytes) << name;
      EXPECT_EQ(std::memcmp(got->data, want->data, want->size_bytes), 0) << name;
      ++compared;
    }
    EXPECT_EQ(compared, 12) << prefix;
  }
}

// Runs quantize and expects a usage error naming `says`, with no output folder.
void ExpectRefused(QuantizeCommandOptions o, const std::string& says) {
  std::ostringstream out;
  const absl::Status status = RunQuantize(o, out);
  EXPECT_FALSE(status.ok()) << o.model_path;
  EXPECT_TRUE(IsQuantizeUsageError(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr(says));
  EXPECT_TRUE(out.str().empty());
}

TEST(QuantizeCommandTest, InputErrorsAreNamedAndWriteNothing) {
  ScratchDir scratch;
  const std::string out = scratch.path() + "/q";
  ExpectRefused({.model_path = "/nonexistent/model", .out_dir = out}, "/nonexistent/model");
  // tiny_llama's projections take 64 or 160 inputs: groups of 128 fit none.
  ExpectRefused({.model_path = SourcePath("tests/golden/tiny_llama"), .out_dir = out},
                "model.layers.0.self_attn.q_proj.weight [64, 64] in ");
  ExpectRefused(
      {.model_path = SourcePath("tests/golden/tiny_llama"), .out_dir = out, .group_size = 128},
      "k = 64 is not a multiple of --group-size 128");
  ExpectRefused({.model_path = SourcePath("tests/golden/hf_int4/gptq_v2_sym"), .out_dir = out},
                "is already quantized (gptq");
  EXPECT_FALSE(std::filesystem::exists(out));
  const std::string file = scratch.Write("file", "x");
  ExpectRefused({.model_path = SourcePath("tests/golden/tiny_llama"),
                 .out_dir = file + "/q",
                 .group_size = 32},
                "--out: cannot create the folder");
  ExpectRefused({.model_path = SourcePath("tests/golden/tiny_llama"),
                 .out_dir = SourcePath("tests/golden/tiny_llama"),
                 .group_size = 32},
                "is the input folder");
}

// Greedy tokens after `prompt`, each from a fresh prefill of the tokens so far.
std::vector<int32_t> Greedy(engine::ModelRunner& runner, std::vector<int32_t> tokens, int count) {
  std::vector<int32_t> out;
  for (int i = 0; i < count; ++i) {
    const std::vector<float> logits = LastLogits(runner, tokens);
    if (logits.empty()) break;
    const int32_t next =
        static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    out.push_back(next);
    tokens.push_back(next);
  }
  return out;
}

class QuantizeFp8Test : public ::testing::TestWithParam<const char*> {};

TEST_P(QuantizeFp8Test, LoadsAsFp8AndTheCpuRunnerGenerates) {
  ScratchDir scratch;
  const QuantizeCommandOptions o = {.model_path = SourcePath(GetParam()),
                                    .out_dir = scratch.path() + "/fp8",
                                    .format = QuantizeFormat::kFp8};
  std::ostringstream out;
  const absl::Status status = RunQuantize(o, out);
  ASSERT_TRUE(status.ok()) << status;
  const nlohmann::json summary = nlohmann::json::parse(out.str(), nullptr, false);
  ASSERT_TRUE(summary.is_object()) << out.str();
  EXPECT_EQ(summary["format"], "fp8");
  EXPECT_FALSE(summary.contains("group_size"));

  absl::StatusOr<engine::Checkpoint> original = engine::OpenCheckpoint(o.model_path);
  absl::StatusOr<engine::Checkpoint> quantized = engine::OpenCheckpoint(o.out_dir);
  ASSERT_TRUE(original.ok() && quantized.ok()) << original.status() << quantized.status();
  const int64_t layers = original->config.num_layers;
  EXPECT_EQ(summary["tensors_quantized"], 7 * layers);
  EXPECT_EQ(quantized->quant.method, engine::HfQuantMethod::kCompressedTensors);
  EXPECT_TRUE(quantized->quant.Ignores("lm_head"));
  const std::optional<engine::Fp8Scheme> scheme =
      quantized->quant.Fp8SchemeFor("model.layers.0.mlp.up_proj");
  ASSERT_TRUE(scheme.has_value());
  EXPECT_EQ(scheme->weights, engine::Fp8WeightScales::kChannel);
  EXPECT_EQ(scheme->activations, engine::Fp8Activations::kDynamicToken);
  EXPECT_TRUE(std::filesystem::exists(o.out_dir + "/tokenizer.json"));

  // tiny_llama: the codes and scales ml_dtypes gives.
  std::unique_ptr<engine::SafetensorsSource> golden;
  if (std::string(GetParam()) == "tests/golden/tiny_llama") {
    auto g = engine::SafetensorsSource::OpenFile(
        SourcePath("tests/golden/hf_fp8/quantize_tiny_llama.safetensors"));
    ASSERT_TRUE(g.ok()) << g.status();
    golden = std::move(*g);
    EXPECT_EQ(golden->TensorNames().size(), static_cast<size_t>(14 * layers));
  }
  absl::StatusOr<engine::ModelWeightsF32> dequantized = engine::LoadWeightsF32(*quantized);
  ASSERT_TRUE(dequantized.ok()) << dequantized.status();
  double sum_weight_nmse = 0;
  for (int64_t l = 0; l < layers; ++l) {
    for (TensorPart part : kProjections) {
      absl::StatusOr<engine::ResolvedTensor> w = engine::ResolveTensor(*original, part, l);
      absl::StatusOr<engine::ResolvedTensor> q = engine::ResolveTensor(*quantized, part, l);
      ASSERT_TRUE(w.ok() && q.ok()) << w.status() << q.status();
      ASSERT_TRUE(q->hf_fp8.has_value()) << q->name;
      EXPECT_EQ(engine::Fp8FormOf(*q), engine::Fp8Scales::kRow);
      absl::StatusOr<engine::Fp8Matrix> m = engine::ReadTensorFp8(*q);
      ASSERT_TRUE(m.ok()) << m.status();
      if (golden != nullptr) {
        for (const engine::TensorView* v : {q->hf_fp8->weight, q->hf_fp8->scale}) {
          const engine::TensorView* want = golden->Find(v->name);
          ASSERT_NE(want, nullptr) << v->name;
          EXPECT_EQ(v->dtype, want->dtype) << v->name;
          EXPECT_EQ(v->shape, want->shape) << v->name;
          ASSERT_EQ(v->size_bytes, want->size_bytes) << v->name;
          EXPECT_EQ(std::memcmp(v->data, want->data, v->size_bytes), 0) << v->name;
        }
      }
      absl::StatusOr<std::vector<float>> values = engine::ReadTensorF32(*w);
      ASSERT_TRUE(values.ok()) << values.status();
      // E4M3 keeps 3 mantissa bits: a relative rounding error up to 2^-4,
      // uniform, NMSE about 2^-8 / 3 ~ 0.0013 for normal-range values.
      const double weight_nmse = Nmse(engine::DequantizeFp8(*m), *values);
      EXPECT_LT(weight_nmse, 0.003) << q->name;
      sum_weight_nmse += weight_nmse;
    }
  }
  ExpectOtherTensorsCopied(*original, *quantized);
  Runners runners = MakeRunners(*original, *quantized, std::move(*dequantized));
  ASSERT_TRUE(runners.ok());
  const std::vector<float> logits_q = LastLogits(**runners.quantized, kTokens);
  EXPECT_EQ(logits_q, LastLogits(**runners.reference, kTokens));
  EXPECT_LT(Nmse(logits_q, LastLogits(**runners.original, kTokens)), 2 * sum_weight_nmse);
  const std::vector<int32_t> generated = Greedy(**runners.quantized, kTokens, 4);
  EXPECT_EQ(generated.size(), 4u);
  EXPECT_EQ(generated, Greedy(**runners.reference, kTokens, 4));
}

INSTANTIATE_TEST_SUITE_P(TinyCheckpoints, QuantizeFp8Test,
                         ::testing::Values("tests/golden/tiny_llama", "tests/golden/tiny_qwen2"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param).substr(13);
                         });

// Every tensor of the two model.safetensors: the same names, dtypes, shapes
// and bytes.
void ExpectSameTensors(const std::string& a_dir, const std::string& b_dir) {
  auto a = engine::SafetensorsSource::OpenDirectory(a_dir);
  auto b = engine::SafetensorsSource::OpenDirectory(b_dir);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_EQ((*a)->TensorNames(), (*b)->TensorNames());
  for (const std::string& name : (*a)->TensorNames()) {
    const engine::TensorView* x = (*a)->Find(name);
    const engine::TensorView* y = (*b)->Find(name);
    EXPECT_EQ(x->dtype, y->dtype) << name;
    EXPECT_EQ(x->shape, y->shape) << name;
    ASSERT_EQ(x->size_bytes, y->size_bytes) << name;
    EXPECT_EQ(std::memcmp(x->data, y->data, x->size_bytes), 0) << name;
  }
}

TEST(QuantizeCommandTest, GgufInputGivesTheHfFolderOfTheSameModel) {
  for (const char* arch : {"llama", "qwen2"}) {
    SCOPED_TRACE(arch);
    ScratchDir scratch;
    const testing::TinyModel model = testing::MakeTinyModel(
        {.arch = arch, .vocab = 48, .hidden = 16, .intermediate = 24, .heads = 4, .kv_heads = 2});
    const std::string gguf =
        scratch.Write("tiny.gguf", testing::TinyGgufWriter(model).Build().bytes);
    const std::string hf = testing::WriteTinyHfFolder(model, scratch, "hf");
    QuantizeCommandOptions o = {.model_path = gguf,
                                .out_dir = scratch.path() + "/from_gguf",
                                .group_size = 8,
                                .num_threads = 2};
    std::ostringstream out;
    const absl::Status from_gguf = RunQuantize(o, out);
    ASSERT_TRUE(from_gguf.ok()) << from_gguf;
    o.model_path = hf;
    o.out_dir = scratch.path() + "/from_hf";
    const absl::Status from_hf = RunQuantize(o, out);
    ASSERT_TRUE(from_hf.ok()) << from_hf;
    ExpectSameTensors(scratch.path() + "/from_gguf", scratch.path() + "/from_hf");
    auto a = engine::OpenCheckpoint(scratch.path() + "/from_gguf");
    auto b = engine::OpenCheckpoint(scratch.path() + "/from_hf");
    ASSERT_TRUE(a.ok()) << a.status();
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ(a->quant.method, engine::HfQuantMethod::kGptq);
    EXPECT_EQ(a->quant.group_size, 8);
    testing::ExpectSameModelConfig(a->config, b->config, /*compare_name=*/false);
    EXPECT_EQ(a->config.name, "tiny " + std::string(arch));  // the GGUF's general.name
  }
}

TEST(QuantizeCommandTest, GgufTensorWithNoPlaceIsRefused) {
  ScratchDir scratch;
  const testing::TinyModel model = testing::MakeTinyModel({.hidden = 16, .intermediate = 24});
  testing::GgufTestWriter writer = testing::TinyGgufWriter(model);
  writer.AddF32Tensor("blk.0.attn_extra.weight", {16}, std::vector<float>(16, 1.0f));
  const std::string gguf = scratch.Write("extra.gguf", writer.Build().bytes);
  ExpectRefused({.model_path = gguf, .out_dir = scratch.path() + "/q", .group_size = 8},
                "tensor 'blk.0.attn_extra.weight' has no place in a Hugging Face folder");
  EXPECT_FALSE(std::filesystem::exists(scratch.path() + "/q"));
}

TEST(QuantizeCommandTest, Fp8FromGgufIsTheHfFoldersAndFp8IsNotQuantizedAgain) {
  ScratchDir scratch;
  const testing::TinyModel model = testing::MakeTinyModel(
      {.arch = "llama", .vocab = 48, .hidden = 16, .intermediate = 24, .heads = 4, .kv_heads = 2});
  const std::string gguf = scratch.Write("tiny.gguf", testing::TinyGgufWriter(model).Build().bytes);
  const std::string hf = testing::WriteTinyHfFolder(model, scratch, "hf");
  QuantizeCommandOptions o = {
      .model_path = gguf, .out_dir = scratch.path() + "/from_gguf", .format = QuantizeFormat::kFp8};
  std::ostringstream out;
  ASSERT_TRUE(RunQuantize(o, out).ok());
  o.model_path = hf;
  o.out_dir = scratch.path() + "/from_hf";
  ASSERT_TRUE(RunQuantize(o, out).ok());
  ExpectSameTensors(scratch.path() + "/from_gguf", scratch.path() + "/from_hf");
  ExpectRefused({.model_path = o.out_dir,
                 .out_dir = scratch.path() + "/again",
                 .format = QuantizeFormat::kFp8},
                "is already quantized (compressed-tensors");
}

}  // namespace
}  // namespace onecard::tools
