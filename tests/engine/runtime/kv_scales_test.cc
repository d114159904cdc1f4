// Tests of engine/runtime/kv_scales.cc:
// - KvScaleFromAmax: amax * 2 / 448, 1 for zero or non-finite amax, never 0;
// - ReadCheckpointKvScales over small safetensors files written here with
//   SafetensorsWriter: per-head, scalar, [1] and .kv_scale tensors in F32,
//   BF16 and F16; none (and GGUF) is nullopt; refusals that name the tensor
//   (a layer without scales, k_scale without v_scale, wrong shape or dtype, a
//   zero, negative, infinite or NaN scale);
// - KvCalibrationPrompts: seeded ids without a checkpoint (deterministic,
//   exactly the cap, inside the vocabulary); the tiny HF folder's tokenizer
//   and SmolLM2's (skipped without models/): several prompts, non-empty,
//   within the cap.
#include "engine/runtime/kv_scales.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <random>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/common/fp16.h"
#include "engine/common/fp8.h"
#include "engine/kernels/bf16.h"
#include "engine/model/safetensors.h"
#include "engine/model/safetensors_writer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/model/model_test_util.h"
#include "tests/testing/all_close.h"

namespace onecard::engine {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kLayers = 3, kKvHeads = 4;

struct ScaleTensor {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  std::vector<float> values;
};

std::string Name(int64_t layer, const char* field) {
  return "model.layers." + std::to_string(layer) + ".self_attn." + field;
}

std::vector<uint8_t> Bytes(const ScaleTensor& t) {
  std::vector<uint8_t> out;
  for (float x : t.values) {
    uint8_t b[4];
    size_t n = 4;
    if (t.dtype == DType::kF32) {
      std::memcpy(b, &x, 4);
    } else if (t.dtype == DType::kI32) {
      const int32_t i = static_cast<int32_t>(x);
      std::memcpy(b, &i, 4);
    } else {
      const uint16_t bits = t.dtype == DType::kBF16 ? FloatToBf16(x) : FloatToHalf(x);
      std::memcpy(b, &bits, 2);
      n = 2;
    }
    out.insert(out.end(), b, b + n);
  }
  return out;
}

// A safetensors checkpoint of `tensors` (plus one weight, as a real file has)
// with a config of kLayers layers and kKvHeads kv heads.
class CheckpointKvScalesTest : public ::testing::Test {
 protected:
  absl::StatusOr<std::optional<KvScales>> Read(std::vector<ScaleTensor> tensors) {
    tensors.push_back({"model.embed_tokens.weight", DType::kF32, {2, 2}, {1, 2, 3, 4}});
    const std::string path = dir_.path() + "/model" + std::to_string(files_++) + ".safetensors";
    std::vector<SafetensorsTensorSpec> specs;
    for (const ScaleTensor& t : tensors) specs.push_back({t.name, t.dtype, t.shape});
    auto writer = SafetensorsWriter::Create(path, specs);
    EXPECT_TRUE(writer.ok()) << writer.status();
    for (const ScaleTensor& t : tensors) EXPECT_TRUE((*writer)->Write(t.name, Bytes(t)).ok());
    EXPECT_TRUE((*writer)->Finish().ok());
    auto source = SafetensorsSource::OpenFile(path);
    EXPECT_TRUE(source.ok()) << source.status();
    checkpoint_.path = path;
    checkpoint_.format = CheckpointFormat::kSafetensors;
    checkpoint_.config.num_layers = kLayers;
    checkpoint_.config.num_kv_heads = kKvHeads;
    checkpoint_.weights = std::move(source).value();
    return ReadCheckpointKvScales(checkpoint_);
  }

  // Every layer with per-head F32 k_scale and v_scale; layer l head h:
  // k 0.01 * (l * kKvHeads + h + 1), v 0.5 times that.
  static std::vector<ScaleTensor> PerHead() {
    std::vector<ScaleTensor> t;
    for (int64_t l = 0; l < kLayers; ++l) {
      std::vector<float> k(kKvHeads), v(kKvHeads);
      for (int64_t h = 0; h < kKvHeads; ++h) {
        k[h] = 0.01f * float(l * kKvHeads + h + 1);
        v[h] = 0.5f * k[h];
      }
      t.push_back({Name(l, "k_scale"), DType::kF32, {kKvHeads}, k});
      t.push_back({Name(l, "v_scale"), DType::kF32, {kKvHeads}, v});
    }
    return t;
  }

  void ExpectRefused(const std::vector<ScaleTensor>& tensors, const std::string& tensor,
                     const std::string& what) {
    const absl::Status status = Read(tensors).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << tensor;
    EXPECT_THAT(status.message(), HasSubstr("'" + tensor + "'"));
    EXPECT_THAT(status.message(), HasSubstr(what));
  }

  onecard::testing::ScratchDir dir_;
  int files_ = 0;
  Checkpoint checkpoint_;
};

TEST(KvScaleFromAmaxTest, HeadroomOverE4m3sRange) {
  EXPECT_EQ(KvScaleFromAmax(224.0f), 1.0f);  // 224 * 2 / 448
  EXPECT_FLOAT_EQ(KvScaleFromAmax(3.5f), 3.5f * 2 / 448);
  EXPECT_FLOAT_EQ(KvScaleFromAmax(1e4f), 1e4f * 2 / 448);
  EXPECT_EQ(KvScaleFromAmax(0.0f), 1.0f);
  EXPECT_EQ(KvScaleFromAmax(std::numeric_limits<float>::infinity()), 1.0f);
  EXPECT_EQ(KvScaleFromAmax(std::numeric_limits<float>::quiet_NaN()), 1.0f);
  EXPECT_EQ(KvScaleFromAmax(1e-44f), std::numeric_limits<float>::min());  // never 0
  // The calibration's largest value lands at 448 / 2 after the division.
  EXPECT_FLOAT_EQ(17.0f / KvScaleFromAmax(17.0f), 224.0f);
}

TEST_F(CheckpointKvScalesTest, PerHeadScalesInLayerOrder) {
  const auto s = Read(PerHead());
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_TRUE(s->has_value());
  const KvScales& scales = **s;
  EXPECT_EQ(scales.num_layers, kLayers);
  EXPECT_EQ(scales.num_kv_heads, kKvHeads);
  EXPECT_EQ(scales.source, "checkpoint");
  for (int64_t l = 0; l < kLayers; ++l) {
    const KvFp8Scales layer = scales.Layer(l);
    for (int64_t h = 0; h < kKvHeads; ++h) {
      EXPECT_EQ(layer.k[h], 0.01f * float(l * kKvHeads + h + 1)) << l << " " << h;
      EXPECT_EQ(layer.v[h], 0.5f * layer.k[h]) << l << " " << h;
    }
  }
  const std::string line = scales.Describe();
  EXPECT_THAT(line, HasSubstr("checkpoint"));
  EXPECT_THAT(line, HasSubstr("3 layers x 4 kv heads"));
  EXPECT_THAT(line, HasSubstr("K 0.01..0.12"));
  EXPECT_THAT(line, HasSubstr("V 0.005..0.06"));
}

// Scalars ([] BF16, [1] F16) and a layer's one .kv_scale apply to every head.
TEST_F(CheckpointKvScalesTest, ScalarsAndKvScaleBroadcast) {
  const auto s = Read({{Name(0, "k_scale"), DType::kBF16, {}, {0.25f}},
                       {Name(0, "v_scale"), DType::kF16, {1}, {0.125f}},
                       {Name(1, "kv_scale"), DType::kF32, {1}, {3.0f}},
                       {Name(2, "kv_scale"), DType::kBF16, {kKvHeads}, {1, 2, 4, 8}},
                       {Name(2, "v_scale"), DType::kF32, {}, {0.5f}}});
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_TRUE(s->has_value());
  for (int64_t h = 0; h < kKvHeads; ++h) {
    EXPECT_EQ((*s)->Layer(0).k[h], 0.25f);
    EXPECT_EQ((*s)->Layer(0).v[h], 0.125f);
    EXPECT_EQ((*s)->Layer(1).k[h], 3.0f);
    EXPECT_EQ((*s)->Layer(1).v[h], 3.0f);
    EXPECT_EQ((*s)->Layer(2).k[h], float(1 << h));  // kv_scale stands in for k_scale
    EXPECT_EQ((*s)->Layer(2).v[h], 0.5f);
  }
}

TEST_F(CheckpointKvScalesTest, NoScalesIsNullopt) {
  const auto s = Read({});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_FALSE(s->has_value());
  Checkpoint gguf;  // a GGUF checkpoint holds no KV scales
  gguf.format = CheckpointFormat::kGguf;
  const auto g = ReadCheckpointKvScales(gguf);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_FALSE(g->has_value());
}

TEST_F(CheckpointKvScalesTest, ALayerWithoutScalesIsRefusedNamingIt) {
  std::vector<ScaleTensor> t = PerHead();
  t.erase(t.begin() + 2, t.begin() + 4);  // layer 1's k_scale and v_scale
  ExpectRefused(t, Name(1, "k_scale"), "not found");
  t = PerHead();
  t.erase(t.begin() + 5);  // layer 2's v_scale
  ExpectRefused(t, Name(2, "v_scale"), "not found while");
}

TEST_F(CheckpointKvScalesTest, WrongShapeOrDtypeIsRefusedNamingTheTensor) {
  std::vector<ScaleTensor> t = PerHead();
  t[3] = {Name(1, "v_scale"), DType::kF32, {kKvHeads - 1}, {1, 1, 1}};
  ExpectRefused(t, Name(1, "v_scale"), "shape [3], expected [], [1] or [4]");
  t = PerHead();
  t[0] = {Name(0, "k_scale"), DType::kF32, {2, 2}, {1, 1, 1, 1}};
  ExpectRefused(t, Name(0, "k_scale"), "shape [2, 2]");
  t = PerHead();
  t[4] = {Name(2, "k_scale"), DType::kI32, {kKvHeads}, {1, 1, 1, 1}};
  ExpectRefused(t, Name(2, "k_scale"), "dtype I32");
}

TEST_F(CheckpointKvScalesTest, ZeroNegativeOrNonFiniteScalesAreRefusedNamingTheTensor) {
  const float bad[] = {0.0f, -0.5f, std::numeric_limits<float>::quiet_NaN(),
                       std::numeric_limits<float>::infinity()};
  for (const float value : bad) {
    SCOPED_TRACE(value);
    std::vector<ScaleTensor> t = PerHead();
    t[3].values[2] = value;  // layer 1's v_scale, head 2
    ExpectRefused(t, Name(1, "v_scale"), "at [2]; a scale must be finite and > 0");
    t = PerHead();
    t[0] = {Name(0, "k_scale"), DType::kBF16, {}, {value}};
    ExpectRefused(t, Name(0, "k_scale"), "at [0]");
  }
}

TEST(KvCalibrationPromptsTest, SeededIdsWithoutACheckpoint) {
  ModelConfig config;
  config.vocab_size = 96;
  for (const int32_t cap : {1, 5, 37, 1024}) {
    SCOPED_TRACE(cap);
    const auto prompts = KvCalibrationPrompts(nullptr, config, cap);
    ASSERT_TRUE(prompts.ok()) << prompts.status();
    int64_t total = 0;
    for (const auto& p : *prompts) {
      EXPECT_FALSE(p.empty());
      for (int32_t id : p) ASSERT_TRUE(id >= 0 && id < 96) << id;
      total += static_cast<int64_t>(p.size());
    }
    EXPECT_EQ(total, cap);
    if (cap >= 37) EXPECT_EQ(prompts->size(), 4u);
    EXPECT_EQ(*prompts, *KvCalibrationPrompts(nullptr, config, cap));  // seeded
  }
  EXPECT_EQ(KvCalibrationPrompts(nullptr, config, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

void ExpectTokenizedPrompts(const Checkpoint& checkpoint) {
  for (const int32_t cap : {1024, 100}) {
    SCOPED_TRACE(cap);
    const auto prompts = KvCalibrationPrompts(&checkpoint, checkpoint.config, cap);
    ASSERT_TRUE(prompts.ok()) << prompts.status();
    int64_t total = 0;
    for (const auto& p : *prompts) {
      EXPECT_FALSE(p.empty());
      for (int32_t id : p) ASSERT_TRUE(id >= 0 && id < checkpoint.config.vocab_size) << id;
      total += static_cast<int64_t>(p.size());
    }
    EXPECT_LE(total, cap);
    if (cap == 100) EXPECT_EQ(total, 100);  // the text is longer than 100 tokens
    if (cap == 1024) {
      EXPECT_GE(prompts->size(), 2u);
      EXPECT_GT(total, 400);
      std::printf("%s: %zu prompts, %lld tokens\n", checkpoint.path.c_str(), prompts->size(),
                  static_cast<long long>(total));
    }
  }
}

TEST(KvCalibrationPromptsTest, TheHfFoldersTokenizer) {
  const auto checkpoint = OpenCheckpoint(onecard::testing::SourcePath("tests/golden/tiny_llama"));
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  ExpectTokenizedPrompts(*checkpoint);
}

TEST(KvCalibrationPromptsTest, SmolLM2sTokenizer) {
  const std::string path = onecard::testing::SourcePath("models/SmolLM2-135M-Instruct.Q4_1.gguf");
  if (!std::filesystem::exists(path)) {
    GTEST_SKIP() << path << " is missing: run scripts/fetch-model.sh";
  }
  const auto checkpoint = OpenCheckpoint(path);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  ExpectTokenizedPrompts(*checkpoint);
}

TEST(KvCalibrationPromptsTest, ACheckpointWithoutATokenizerIsAnError) {
  Checkpoint checkpoint;
  checkpoint.format = CheckpointFormat::kSafetensors;
  checkpoint.config.vocab_size = 96;
  checkpoint.tokenizer_json_path = "/nonexistent/tokenizer.json";
  EXPECT_FALSE(KvCalibrationPrompts(&checkpoint, checkpoint.config).ok());
}

// Prompts of 10, 7, 30, 1 and 5 tokens into one batch: cut to the context
// (8), to the step's tokens (20) and to the pool (5 blocks of 4 tokens),
// blocks in order from 0; a prompt left under min_tokens ends the batch.
TEST(KvCalibrationBatchTest, CutsPromptsToTheStepAndThePool) {
  std::vector<std::vector<int32_t>> prompts;
  for (int32_t len : {10, 7, 30, 1, 5}) {
    prompts.emplace_back(len);
    for (int32_t i = 0; i < len; ++i) prompts.back()[i] = 100 * len + i;
  }
  const KvLayout pool{.num_blocks = 5, .block_size = 4, .num_kv_heads = 1, .head_dim = 16};
  const KvCalibrationBatch batch(prompts, pool,
                                 {.max_context = 8, .max_tokens = 20, .min_tokens = 2});
  const std::vector<SequenceChunk>& chunks = batch.batch().chunks;
  ASSERT_EQ(chunks.size(), 3u);  // 8 + 7 + 4 (the pool's last block): 19 tokens
  EXPECT_EQ(batch.num_tokens(), 19);
  EXPECT_EQ(batch.Source(), "calibrated on 19 tokens");
  const std::vector<std::vector<int32_t>> tables = {{0, 1}, {2, 3}, {4}};
  for (size_t c = 0; c < chunks.size(); ++c) {
    EXPECT_EQ(chunks[c].seq_id, static_cast<int64_t>(c));
    EXPECT_EQ(chunks[c].start_pos, 0);
    EXPECT_FALSE(chunks[c].want_logits);
    EXPECT_EQ(std::vector<int32_t>(chunks[c].block_table.begin(), chunks[c].block_table.end()),
              tables[c]);
    EXPECT_EQ(chunks[c].token_ids.data(), prompts[c].data());  // views, not copies
  }
  EXPECT_EQ(chunks[0].token_ids.size(), 8u);
  EXPECT_EQ(chunks[1].token_ids.size(), 7u);
  EXPECT_EQ(chunks[2].token_ids.size(), 4u);

  // At most max_seqs prompts; a prompt cut under min_tokens stops the batch.
  const KvCalibrationBatch two(prompts, pool, {.max_context = 8, .max_seqs = 2});
  EXPECT_EQ(two.batch().chunks.size(), 2u);
  const KvCalibrationBatch stop(prompts, pool,
                                {.max_context = 8, .max_tokens = 16, .min_tokens = 2});
  EXPECT_EQ(stop.batch().chunks.size(), 2u);  // 8 + 7, then 1 token left: under 2
  EXPECT_EQ(stop.num_tokens(), 15);
}

TEST(KvScalesTest, OnesThenALayerFromItsMaxima) {
  KvScales s = KvScales::Ones(2, 3, "calibrated on 9 tokens");
  EXPECT_EQ(s.k, std::vector<float>(6, 1.0f));
  const std::vector<float> amax = {224.0f, 0.0f, 2.24f, 448.0f, 1.0f, 0.5f};
  s.SetLayerFromAmax(1, amax);
  for (int h = 0; h < 3; ++h) {
    EXPECT_EQ(s.k[h], 1.0f);
    EXPECT_EQ(s.k[3 + h], KvScaleFromAmax(amax[h]));
    EXPECT_EQ(s.v[3 + h], KvScaleFromAmax(amax[3 + h]));
  }
  EXPECT_EQ(s.k[3], 1.0f);  // 224 * 2 / 448
  EXPECT_EQ(s.v[3], 2.0f);
}

// KvFp8KError against the sums written out here: a zero-mean K costs about
// E4M3's relative rounding (~0.13 % of its variation), a K whose channels
// sit near +-300 and move by +-1 over tokens (Qwen2's layer 0 after its
// k_proj bias) costs more than its variation. SetLayerKError marks only the
// second layer BF16, and Describe names it.
TEST(KvScalesTest, KErrorMarksABiasedLayerBf16) {
  constexpr int64_t kTokens = 64, kHeads = 2, kHeadDim = 16, kWidth = kHeads * kHeadDim;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> centered(kTokens * kWidth), biased(kTokens * kWidth);
  for (int64_t i = 0; i < kTokens * kWidth; ++i) {
    const int64_t c = i % kWidth;
    centered[i] = 3.0f * normal(rng);
    biased[i] = (c % 2 == 0 ? 300.0f : -250.0f) + normal(rng);
  }
  auto expected = [&](const std::vector<float>& k, const float* scales) {
    std::vector<double> mean(kWidth, 0.0);
    for (int64_t i = 0; i < kTokens * kWidth; ++i) mean[i % kWidth] += k[i] / kTokens;
    double err = 0.0, var = 0.0;
    for (int64_t i = 0; i < kTokens * kWidth; ++i) {
      const int64_t c = i % kWidth;
      const double e = k[i] - RoundThroughE4m3(k[i], scales[c / kHeadDim]);
      err += e * e;
      var += (k[i] - mean[c]) * (k[i] - mean[c]);
    }
    return err / var;
  };
  KvScales s = KvScales::Ones(2, kHeads, "test");
  for (int64_t layer = 0; layer < 2; ++layer) {
    const std::vector<float>& k = layer == 0 ? centered : biased;
    std::vector<float> amax(2 * kHeads, 0.0f);
    for (int64_t i = 0; i < kTokens * kWidth; ++i) {
      float& a = amax[(i % kWidth) / kHeadDim];
      a = std::max(a, std::abs(k[i]));
    }
    for (int64_t h = 0; h < kHeads; ++h) amax[kHeads + h] = 1.0f;
    s.SetLayerFromAmax(layer, amax);
    s.SetLayerKError(layer, k, kTokens, kHeadDim);
    EXPECT_NEAR(s.k_error[layer], expected(k, s.Layer(layer).k), 1e-9 * (1 + s.k_error[layer]));
  }
  EXPECT_GT(s.k_error[0], 1e-4);
  EXPECT_LT(s.k_error[0], 0.005);
  EXPECT_GT(s.k_error[1], 0.1);
  EXPECT_FALSE(s.LayerBf16(0));
  EXPECT_TRUE(s.LayerBf16(1));
  EXPECT_EQ(s.NumBf16Layers(), 1);
  EXPECT_THAT(s.Describe(), HasSubstr("layers kept in BF16"));
  EXPECT_THAT(s.Describe(), HasSubstr(": 1 (K error"));
  // No variation: no error to weigh (0, kept FP8).
  const std::vector<float> constant(kTokens * kWidth, 5.0f);
  EXPECT_EQ(KvFp8KError(constant, kTokens, kHeads, kHeadDim, s.Layer(0).k), 0.0);
}

// Scales given to a runner must be of its model: a wrong layer or kv head
// count, k / v of the wrong size or bf16_layers of the wrong size are
// refused naming the option; empty bf16_layers fit any model.
TEST(KvScalesTest, CheckFitsNamesTheOptionAndBothShapes) {
  KvScales s = KvScales::Ones(3, 2, "test");
  EXPECT_TRUE(s.CheckFits(3, 2, "Opt.kv_scales").ok());
  s.bf16_layers = {0, 1, 0};
  EXPECT_TRUE(s.CheckFits(3, 2, "Opt.kv_scales").ok());
  for (const auto& [layers, heads] : {std::pair<int64_t, int64_t>{4, 2}, {3, 1}}) {
    const absl::Status st = s.CheckFits(layers, heads, "Opt.kv_scales");
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(st.message(), HasSubstr("Opt.kv_scales: 3 layers x 2 kv heads"));
    EXPECT_THAT(st.message(), HasSubstr(absl::StrCat("model of ", layers, " layers x ", heads)));
  }
  KvScales short_v = s;
  short_v.v.pop_back();
  EXPECT_EQ(short_v.CheckFits(3, 2, "Opt.kv_scales").code(), absl::StatusCode::kInvalidArgument);
  KvScales short_bf16 = s;
  short_bf16.bf16_layers.pop_back();
  EXPECT_EQ(short_bf16.CheckFits(3, 2, "Opt.kv_scales").code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace onecard::engine
