// GPTQ through `onecard quantize --method gptq` (quantize_gptq.h) on the
// tiny golden checkpoints (tests/golden/tiny_llama, tiny_qwen2) with the
// first tokens of tests/data/text/sqlite-docs.txt as calibration:
// - every projection of every layer has an output error
//   trace((W - Q) H (W - Q)^T) on the inputs it was calibrated with at most
//   that of round-to-nearest under the same H (what GPTQ is for; a wrong
//   Hessian, update or order breaks it), and strictly less summed over the
//   model;
// - the folder it writes loads in onecard and runs on the cpu backend;
// - its argument errors.
#include "tools/onecard/quantize_gptq.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <span>
#include <sstream>

#include "engine/common/regular_file.h"
#include "engine/model/gptq_quantizer.h"
#include "engine/model/gptq_solver.h"
#include "engine/runtime/cpu/cpu_model_runner.h"
#include "engine/runtime/engine.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/engine/model/model_test_util.h"
#include "tests/testing/all_close.h"
#include "tools/onecard/quantize_command.h"

namespace onecard::tools {
namespace {

using ::onecard::testing::ScratchDir;
using ::onecard::testing::SourcePath;
using ::testing::HasSubstr;

constexpr char kText[] = "tests/data/text/sqlite-docs.txt";

class QuantizeGptqTest : public ::testing::TestWithParam<const char*> {};

TEST_P(QuantizeGptqTest, OutputErrorIsAtMostRoundToNearestsForEveryProjection) {
  absl::StatusOr<engine::Checkpoint> checkpoint = engine::OpenCheckpoint(SourcePath(GetParam()));
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  auto quantizer = GptqLayerQuantizer::Create(*checkpoint, {.text_path = SourcePath(kText),
                                                            .num_tokens = 300,
                                                            .sequence_tokens = 128,
                                                            .group_size = 32,
                                                            .num_threads = 2});
  ASSERT_TRUE(quantizer.ok()) << quantizer.status();
  EXPECT_EQ((*quantizer)->num_calibration_tokens(), 300);
  double total_gptq = 0, total_rtn = 0;
  for (int64_t l = 0; l < checkpoint->config.num_layers; ++l) {
    absl::StatusOr<std::vector<GptqProjection>> layer = (*quantizer)->QuantizeLayer(l);
    ASSERT_TRUE(layer.ok()) << layer.status();
    ASSERT_EQ(layer->size(), 7u);
    for (const GptqProjection& p : *layer) {
      absl::StatusOr<engine::ResolvedTensor> t = engine::ResolveTensor(*checkpoint, p.part, l);
      ASSERT_TRUE(t.ok()) << t.status();
      absl::StatusOr<std::vector<float>> w = engine::ReadTensorF32(*t);
      absl::StatusOr<engine::GptqQuantized> rtn =
          engine::QuantizeGptqRtn(*w, t->shape[0], t->shape[1], 32, true);
      ASSERT_TRUE(rtn.ok()) << rtn.status();
      const double e_gptq = engine::GptqOutputError(*w, p.quantized, *p.hessian);
      const double e_rtn = engine::GptqOutputError(*w, *rtn, *p.hessian);
      EXPECT_LE(e_gptq, e_rtn) << t->name;
      total_gptq += e_gptq;
      total_rtn += e_rtn;
    }
  }
  EXPECT_LT(total_gptq, total_rtn);
  RecordProperty("gptq_over_rtn_error", std::to_string(total_gptq / total_rtn));
}

TEST_P(QuantizeGptqTest, WritesAFolderOnecardLoadsAndRuns) {
  ScratchDir scratch;
  const QuantizeCommandOptions o = {.model_path = SourcePath(GetParam()),
                                    .out_dir = scratch.path() + "/q",
                                    .method = "gptq",
                                    .group_size = 32,
                                    .calibration_path = SourcePath(kText),
                                    .calibration_tokens = 200,
                                    .num_threads = 2};
  std::ostringstream out;
  const absl::Status status = RunQuantize(o, out);
  ASSERT_TRUE(status.ok()) << status;
  const nlohmann::json summary = nlohmann::json::parse(out.str(), nullptr, false);
  EXPECT_EQ(summary["method"], "gptq");
  EXPECT_EQ(summary["calibration_tokens"], 200);
  absl::StatusOr<engine::Checkpoint> q = engine::OpenCheckpoint(o.out_dir);
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->quant.method, engine::HfQuantMethod::kGptq);
  auto runner = engine::CreateCpuModelRunner(*q, {.num_threads = 2, .num_kv_blocks = 2});
  ASSERT_TRUE(runner.ok()) << runner.status();
  const std::vector<int32_t> tokens = {5, 17, 230, 99};
  const std::vector<int32_t> table = {0, 1};
  engine::BatchInput batch;
  batch.chunks.push_back({1, tokens, 0, table});
  std::vector<float> logits;
  ASSERT_TRUE((*runner)->Forward(batch, &logits).ok());
  EXPECT_EQ(static_cast<int64_t>(logits.size()), q->config.vocab_size);
}

// The quantizer runs one layer at a time on the residual stream it kept;
// the reference runs the whole prefix (layers 0..l, those before l replaced
// by their dequantized 4-bit weights) from the tokens, as GPTQ defines layer
// l's inputs. Layer l's Hessians must be the same.
TEST_P(QuantizeGptqTest, KeptStreamGivesThePrefixModelsHessians) {
  absl::StatusOr<engine::Checkpoint> checkpoint = engine::OpenCheckpoint(SourcePath(GetParam()));
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  const GptqCalibrationOptions options = {.text_path = SourcePath(kText),
                                          .num_tokens = 300,
                                          .sequence_tokens = 128,
                                          .group_size = 32,
                                          .num_threads = 2};
  auto quantizer = GptqLayerQuantizer::Create(*checkpoint, options);
  ASSERT_TRUE(quantizer.ok()) << quantizer.status();
  absl::StatusOr<engine::ModelWeightsF32> weights = engine::LoadWeightsF32(*checkpoint);
  ASSERT_TRUE(weights.ok()) << weights.status();
  absl::StatusOr<std::unique_ptr<engine::Tokenizer>> tokenizer = engine::OpenTokenizer(*checkpoint);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  absl::StatusOr<std::string> text = ReadRegularFile(SourcePath(kText));
  ASSERT_TRUE(text.ok()) << text.status();
  std::vector<int32_t> tokens = (*tokenizer)->Encode(*text, /*add_special_tokens=*/false);
  tokens.resize(300);
  for (int64_t l = 0; l < checkpoint->config.num_layers; ++l) {
    absl::StatusOr<std::vector<GptqProjection>> layer = (*quantizer)->QuantizeLayer(l);
    ASSERT_TRUE(layer.ok()) << layer.status();
    // The reference: the model of layers 0..l, observed at layer l.
    engine::ModelConfig config = checkpoint->config;
    config.num_layers = l + 1;
    engine::ModelWeightsF32 prefix;
    prefix.embedding = weights->embedding;
    prefix.layers.assign(weights->layers.begin(), weights->layers.begin() + l + 1);
    prefix.final_norm = weights->final_norm;
    prefix.lm_head = weights->lm_head;
    const int64_t hidden = config.hidden_size;
    std::vector<engine::GptqHessian> h = {
        engine::GptqHessian(hidden), engine::GptqHessian(config.num_heads * config.head_dim),
        engine::GptqHessian(hidden), engine::GptqHessian(config.intermediate_size)};
    engine::CpuRunnerOptions o = {.num_threads = 2, .num_kv_blocks = 128 / 16};
    ASSERT_EQ(o.kv_block_size, 16);
    o.linear_input_observer = [&](int64_t at, engine::LinearInput input, std::span<const float> x,
                                  int32_t rows) {
      if (at == l && input != engine::LinearInput::kResidual) {
        h[static_cast<int>(input)].Add(x, rows);
      }
    };
    auto runner = engine::CreateCpuModelRunnerFromWeights(config, std::move(prefix), o);
    ASSERT_TRUE(runner.ok()) << runner.status();
    const std::vector<int32_t> table = {0, 1, 2, 3, 4, 5, 6, 7};
    std::vector<float> logits;
    for (size_t start = 0; start < tokens.size(); start += 128) {
      engine::BatchInput batch;
      batch.chunks.push_back(
          {static_cast<int64_t>(start),
           std::span<const int32_t>(tokens).subspan(start, std::min<size_t>(128, 300 - start)), 0,
           table});
      ASSERT_TRUE((*runner)->Forward(batch, &logits).ok());
    }
    constexpr engine::LinearInput kInputs[] = {
        engine::LinearInput::kQkv, engine::LinearInput::kQkv,    engine::LinearInput::kQkv,
        engine::LinearInput::kO,   engine::LinearInput::kGateUp, engine::LinearInput::kGateUp,
        engine::LinearInput::kDown};
    for (size_t i = 0; i < layer->size(); ++i) {
      const std::vector<double> want = h[static_cast<int>(kInputs[i])].Matrix();
      const std::vector<double>& got = *(*layer)[i].hessian;
      ASSERT_EQ(got.size(), want.size());
      double max_error = 0, max_value = 0;
      for (size_t j = 0; j < got.size(); ++j) {
        max_error = std::max(max_error, std::abs(got[j] - want[j]));
        max_value = std::max(max_value, std::abs(want[j]));
      }
      EXPECT_LE(max_error, 1e-9 * max_value) << "layer " << l << " projection " << i;
    }
    // The next reference layer sees this layer as the quantizer left it.
    for (const GptqProjection& p : *layer) {
      *engine::PartWeights(*weights, p.part, l) = engine::DequantizeGptq(p.quantized);
    }
  }
}

TEST_P(QuantizeGptqTest, LayersGoInOrder) {
  absl::StatusOr<engine::Checkpoint> checkpoint = engine::OpenCheckpoint(SourcePath(GetParam()));
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  auto quantizer = GptqLayerQuantizer::Create(
      *checkpoint,
      {.text_path = SourcePath(kText), .num_tokens = 64, .group_size = 32, .num_threads = 2});
  ASSERT_TRUE(quantizer.ok()) << quantizer.status();
  absl::StatusOr<std::vector<GptqProjection>> skipped = (*quantizer)->QuantizeLayer(1);
  EXPECT_EQ(skipped.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(skipped.status().message(), HasSubstr("layer 0 is next, not 1"));
  EXPECT_TRUE((*quantizer)->QuantizeLayer(0).ok());
  EXPECT_EQ((*quantizer)->QuantizeLayer(0).status().code(), absl::StatusCode::kFailedPrecondition);
}

INSTANTIATE_TEST_SUITE_P(TinyCheckpoints, QuantizeGptqTest,
                         ::testing::Values("tests/golden/tiny_llama", "tests/golden/tiny_qwen2"));

TEST(QuantizeGptqArgumentsTest, ErrorsNameTheFlag) {
  QuantizeCommandOptions o = {.model_path = "m", .out_dir = "o", .method = "gptq"};
  EXPECT_THAT(CheckQuantizeOptions(o).message(), HasSubstr("--calibration FILE is required"));
  o.calibration_path = "t.txt";
  EXPECT_TRUE(CheckQuantizeOptions(o).ok());
  o.damp = 0;
  EXPECT_THAT(CheckQuantizeOptions(o).message(), HasSubstr("--damp: 0"));
  o.damp = 0.01;
  o.calibration_tokens = 1;
  EXPECT_THAT(CheckQuantizeOptions(o).message(), HasSubstr("--calibration-tokens: 1"));
  o = {.model_path = "m", .out_dir = "o", .calibration_path = "t.txt"};
  EXPECT_THAT(CheckQuantizeOptions(o).message(), HasSubstr("only --method gptq"));
}

}  // namespace
}  // namespace onecard::tools
