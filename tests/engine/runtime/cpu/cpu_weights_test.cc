// Tests of CheckCpuConfig, PackCpuWeights and LoadCpuWeights
// (engine/runtime/cpu/cpu_weights.cc): the fused matrices hold the source rows
// in the documented order ([q; k; v], [gate; up]), biases are stacked the same
// way, a tied model keeps one embedding, and bad shapes are errors naming the
// layer and the part; an fp32 GGUF file loads (in either format) to
// PackCpuWeights' weights of LoadWeightsF32's values, and a missing tensor is
// NotFound naming it and the file; once loaded, no page of the file is in the
// process's resident set. Block files: cpu_model_runner_native_test.
#include "engine/runtime/cpu/cpu_weights.h"

#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tests/engine/model/tiny_model.h"
#include "tests/engine/runtime/cpu/tiny_model.h"

namespace onecard::engine {
namespace {

// Every row of w, in fp32 (RowF32), one after another.
std::vector<float> Values(const CpuLinear& w) {
  std::vector<float> out(w.out_features() * w.in_features());
  for (int64_t r = 0; r < w.out_features(); ++r) w.RowF32(r, &out[r * w.in_features()]);
  return out;
}

std::vector<float> Concat(std::initializer_list<const std::vector<float>*> parts) {
  std::vector<float> out;
  for (const auto* p : parts) out.insert(out.end(), p->begin(), p->end());
  return out;
}

TEST(PackCpuWeightsTest, FusesInTheDocumentedOrder) {
  for (Architecture arch : {Architecture::kLlama, Architecture::kQwen2}) {
    const ModelConfig config = testing::TinyConfig(arch);
    const ModelWeightsF32 source = testing::RandomWeights(config, 3);
    auto packed = PackCpuWeights(config, source);
    ASSERT_TRUE(packed.ok()) << packed.status();
    for (size_t l = 0; l < source.layers.size(); ++l) {
      const LayerWeightsF32& s = source.layers[l];
      const CpuLayerWeights& p = packed->layers[l];
      EXPECT_EQ(Values(p.wqkv), Concat({&s.wq, &s.wk, &s.wv})) << l;
      EXPECT_EQ(p.bqkv, Concat({&s.bq, &s.bk, &s.bv})) << l;
      EXPECT_EQ(Values(p.w_gate_up), Concat({&s.w_gate, &s.w_up})) << l;
      EXPECT_EQ(Values(p.wo), s.wo);
      EXPECT_EQ(Values(p.w_down), s.w_down);
      EXPECT_FALSE(p.wqkv.quantized());
      EXPECT_EQ(p.attn_norm, s.attn_norm);
      EXPECT_EQ(p.ffn_norm, s.ffn_norm);
    }
    EXPECT_EQ(Values(packed->output_weight()), source.output_weight());
    EXPECT_EQ(Values(packed->embedding), source.embedding);
    EXPECT_EQ(packed->lm_head.empty(), config.tie_word_embeddings);
    EXPECT_EQ(packed->format, CpuWeightFormat::kF32);
  }
}

TEST(PackCpuWeightsTest, ShapeErrorsNameThePart) {
  const ModelConfig config = testing::TinyConfig(Architecture::kQwen2);
  ModelWeightsF32 w = testing::RandomWeights(config, 4);
  w.layers[2].bk.clear();  // a Qwen2 model needs its k bias
  auto packed = PackCpuWeights(config, w);
  EXPECT_EQ(packed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(packed.status().message().find("layer 2 bk has 0 elements"), std::string::npos)
      << packed.status();
  w = testing::RandomWeights(config, 4);
  w.embedding.resize(10);
  EXPECT_NE(PackCpuWeights(config, w).status().message().find("embedding"), std::string::npos);
  w = testing::RandomWeights(config, 4);
  w.layers.pop_back();
  EXPECT_NE(PackCpuWeights(config, w).status().message().find("2 layers"), std::string::npos);
}

// An fp32 GGUF file (llama: Q/K rows as llama.cpp stores them; qwen2:
// biases, tied) in both formats: fp32 runs with LoadWeightsF32's values.
TEST(LoadCpuWeightsTest, F32FileLoadsToTheValuesOfLoadWeightsF32) {
  for (const char* arch : {"llama", "qwen2"}) {
    SCOPED_TRACE(arch);
    const ::onecard::testing::ScratchDir dir;
    const ::onecard::testing::TinyModel model =
        ::onecard::testing::MakeTinyModel({.arch = arch, .tied = arch == std::string("qwen2")});
    const std::string path =
        dir.Write("tiny.gguf", ::onecard::testing::TinyGgufWriter(model).Build().bytes);
    absl::StatusOr<Checkpoint> c = OpenCheckpoint(path);
    ASSERT_TRUE(c.ok()) << c.status();
    absl::StatusOr<ModelWeightsF32> f32 = LoadWeightsF32(*c);
    ASSERT_TRUE(f32.ok()) << f32.status();
    absl::StatusOr<CpuWeights> want = PackCpuWeights(c->config, *std::move(f32));
    ASSERT_TRUE(want.ok()) << want.status();
    for (CpuWeightFormat format : {CpuWeightFormat::kNative, CpuWeightFormat::kF32}) {
      absl::StatusOr<CpuWeights> got = LoadCpuWeights(*c, format);
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_EQ(got->format, format);
      EXPECT_EQ(got->bytes(), want->bytes());
      EXPECT_EQ(Values(got->embedding), Values(want->embedding));
      EXPECT_EQ(Values(got->output_weight()), Values(want->output_weight()));
      EXPECT_EQ(got->lm_head.empty(), want->lm_head.empty());
      EXPECT_EQ(got->final_norm, want->final_norm);
      for (size_t l = 0; l < want->layers.size(); ++l) {
        const CpuLayerWeights& g = got->layers[l];
        const CpuLayerWeights& w = want->layers[l];
        EXPECT_FALSE(g.wqkv.quantized() || g.wo.quantized() || g.w_gate_up.quantized() ||
                     g.w_down.quantized());
        EXPECT_EQ(Values(g.wqkv), Values(w.wqkv)) << l;
        EXPECT_EQ(Values(g.wo), Values(w.wo)) << l;
        EXPECT_EQ(Values(g.w_gate_up), Values(w.w_gate_up)) << l;
        EXPECT_EQ(Values(g.w_down), Values(w.w_down)) << l;
        EXPECT_EQ(g.bqkv, w.bqkv) << l;
        EXPECT_EQ(g.attn_norm, w.attn_norm) << l;
        EXPECT_EQ(g.ffn_norm, w.ffn_norm) << l;
      }
    }
  }
}

// Resident kB of this process's mappings of `path` (/proc/self/smaps).
int64_t MappedResidentKb(const std::string& path) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool in_path = false;
  int64_t kb = 0;
  while (std::getline(smaps, line)) {
    const std::vector<std::string> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (f.size() >= 5 && absl::StrContains(f[0], '-') && f[0].back() != ':') {
      in_path = f.size() >= 6 && f.back() == path;  // a mapping's first line
    } else if (in_path && f.size() >= 2 && f[0] == "Rss:") {
      int64_t v = 0;
      if (absl::SimpleAtoi(f[1], &v)) kb += v;
    }
  }
  return kb;
}

// The header's pages leave the resident set once parsed, each tensor's once
// read, and again once all are read (a read's fault maps its neighbours'
// cached pages with it): a loaded file holds none.
TEST(LoadCpuWeightsTest, LeavesNoPageOfTheFileResident) {
  const ::onecard::testing::ScratchDir dir;
  const ::onecard::testing::TinyModel model =
      ::onecard::testing::MakeTinyModel({.hidden = 256, .intermediate = 512, .layers = 6});
  const std::string path =
      dir.Write("tiny.gguf", ::onecard::testing::TinyGgufWriter(model).Build().bytes);
  absl::StatusOr<Checkpoint> c = OpenCheckpoint(path);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(MappedResidentKb(path), 0) << "after OpenCheckpoint";
  for (CpuWeightFormat format : {CpuWeightFormat::kNative, CpuWeightFormat::kF32}) {
    absl::StatusOr<CpuWeights> w = LoadCpuWeights(*c, format);
    ASSERT_TRUE(w.ok()) << w.status();
    EXPECT_EQ(MappedResidentKb(path), 0) << "after LoadCpuWeights";
  }
}

TEST(LoadCpuWeightsTest, MissingTensorIsNamedWithTheFile) {
  const ::onecard::testing::ScratchDir dir;
  const std::string path =
      dir.Write("tiny.gguf", ::onecard::testing::TinyGgufWriter(
                                 ::onecard::testing::MakeTinyModel({}), "blk.1.ffn_up.weight")
                                 .Build()
                                 .bytes);
  absl::StatusOr<Checkpoint> c = OpenCheckpoint(path);
  ASSERT_TRUE(c.ok()) << c.status();
  const absl::Status s = LoadCpuWeights(*c, CpuWeightFormat::kNative).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(s.message().find("blk.1.ffn_up.weight"), std::string::npos) << s;
  EXPECT_NE(s.message().find(path), std::string::npos) << s;
}

TEST(CheckCpuConfigTest, NamesTheField) {
  ModelConfig c = testing::TinyConfig(Architecture::kLlama);
  EXPECT_TRUE(CheckCpuConfig(c).ok());
  c.head_dim = 15;
  EXPECT_NE(CheckCpuConfig(c).message().find("head_dim"), std::string::npos);
  c = testing::TinyConfig(Architecture::kLlama);
  c.vocab_size = 0;
  EXPECT_NE(CheckCpuConfig(c).message().find("vocab_size = 0"), std::string::npos);
  c = testing::TinyConfig(Architecture::kLlama);
  c.rms_norm_eps = 0.0f;
  EXPECT_NE(CheckCpuConfig(c).message().find("rms_norm_eps"), std::string::npos);
}

}  // namespace
}  // namespace onecard::engine
