// ModelConfigFromGguf on crafted GGUF metadata (llama, qwen2) and on broken
// metadata: unknown architecture, missing and mistyped keys, unsupported RoPE
// variants. The real SmolLM2 file is covered by gguf_smollm2_test.cc.
#include "engine/model/gguf_config.h"

#include <cmath>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/model/tiny_model.h"

namespace onecard::engine {
namespace {

using namespace ::onecard::testing;  // NOLINT: writer, tiny models, constants
using ::testing::HasSubstr;

class GgufConfigTest : public ::testing::Test {
 protected:
  absl::StatusOr<ModelConfig> Config(const GgufTestWriter& w) {
    path_ = dir_.Write("m.gguf", w.Build().bytes);
    auto gguf = GgufFile::Open(path_);
    if (!gguf.ok()) return gguf.status();
    return ModelConfigFromGguf(**gguf);
  }
  void ExpectError(const GgufTestWriter& w, absl::StatusCode code, const std::string& what) {
    auto c = Config(w);
    ASSERT_FALSE(c.ok()) << what;
    EXPECT_EQ(c.status().code(), code) << c.status();
    EXPECT_THAT(std::string(c.status().message()), HasSubstr(path_ + ": "));
    EXPECT_THAT(std::string(c.status().message()), HasSubstr(what));
  }

  TinySpec spec_;
  ScratchDir dir_;
  std::string path_;
};

TEST_F(GgufConfigTest, Llama) {
  spec_.hidden = 32;
  auto c = Config(TinyGgufWriter(MakeTinyModel(spec_)));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->architecture, Architecture::kLlama);
  EXPECT_EQ(c->name, "tiny llama");
  EXPECT_EQ(c->vocab_size, 40);
  EXPECT_EQ(c->hidden_size, 32);
  EXPECT_EQ(c->intermediate_size, 24);
  EXPECT_EQ(c->num_layers, 2);
  EXPECT_EQ(c->num_heads, 4);
  EXPECT_EQ(c->num_kv_heads, 2);
  EXPECT_EQ(c->head_dim, 8);
  EXPECT_EQ(c->max_position_embeddings, 64);
  EXPECT_FLOAT_EQ(c->rope_theta, 500000.0f);
  EXPECT_FLOAT_EQ(c->rms_norm_eps, 1e-6f);
  EXPECT_FALSE(c->rope_scaling.enabled);
  EXPECT_FALSE(c->attention_bias);
  EXPECT_FALSE(c->tie_word_embeddings);  // output.weight present
  EXPECT_EQ(c->bos_token_id, 1);
  EXPECT_EQ(c->eos_token_id, 2);
}

TEST_F(GgufConfigTest, Qwen2TiedWithBias) {
  spec_.arch = "qwen2";
  spec_.tied = true;
  auto c = Config(TinyGgufWriter(MakeTinyModel(spec_)));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->architecture, Architecture::kQwen2);
  EXPECT_TRUE(c->attention_bias);
  EXPECT_TRUE(c->tie_word_embeddings);  // no output.weight
}

// Only the required keys; no tokenizer.ggml.tokens (llama.vocab_size instead).
GgufTestWriter Minimal() {
  GgufTestWriter w;
  w.AddString("general.architecture", "llama");
  w.AddInt("llama.context_length", kMetaU32, 128);
  w.AddInt("llama.embedding_length", kMetaU32, 64);
  w.AddInt("llama.block_count", kMetaU32, 1);
  w.AddInt("llama.feed_forward_length", kMetaU32, 96);
  w.AddInt("llama.attention.head_count", kMetaU32, 4);
  w.AddInt("llama.vocab_size", kMetaU32, 100);
  return w;
}

TEST_F(GgufConfigTest, DefaultsAndFallbacks) {
  auto c = Config(Minimal());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->vocab_size, 100);
  EXPECT_EQ(c->num_kv_heads, 4);
  EXPECT_EQ(c->head_dim, 16);
  EXPECT_FLOAT_EQ(c->rope_theta, 10000.0f);
  EXPECT_FLOAT_EQ(c->rms_norm_eps, 1e-5f);
  EXPECT_EQ(c->bos_token_id, -1);
  EXPECT_TRUE(c->tie_word_embeddings);
}

TEST_F(GgufConfigTest, UnknownArchitecture) {
  GgufTestWriter w;
  w.AddString("general.architecture", "gpt2");
  ExpectError(w, absl::StatusCode::kUnimplemented,
              "metadata key 'general.architecture' is \"gpt2\"; supported: llama, qwen2");
}

TEST_F(GgufConfigTest, MissingAndMistypedKeys) {
  GgufTestWriter none;
  ExpectError(none, absl::StatusCode::kNotFound, "metadata key 'general.architecture' not found");
  GgufTestWriter w;
  w.AddString("general.architecture", "llama");
  w.AddInt("llama.context_length", kMetaU32, 128);
  w.AddString("llama.embedding_length", "64");
  ExpectError(w, absl::StatusCode::kInvalidArgument,
              "metadata key 'llama.embedding_length' is string, not int");
  GgufTestWriter m;
  m.AddString("general.architecture", "qwen2");
  ExpectError(m, absl::StatusCode::kNotFound, "metadata key 'qwen2.context_length' not found");
}

TEST_F(GgufConfigTest, UnsupportedRopeVariants) {
  GgufTestWriter linear = TinyGgufWriter(MakeTinyModel(spec_));
  linear.AddString("llama.rope.scaling.type", "linear");
  ExpectError(linear, absl::StatusCode::kUnimplemented,
              "metadata key 'llama.rope.scaling.type' is \"linear\"");
  GgufTestWriter partial = TinyGgufWriter(MakeTinyModel(spec_));
  partial.AddInt("llama.rope.dimension_count", kMetaU32, 2);
  ExpectError(partial, absl::StatusCode::kUnimplemented,
              "metadata key 'llama.rope.dimension_count' is 2, not head_dim 4");
  GgufTestWriter none = TinyGgufWriter(MakeTinyModel(spec_));
  none.AddString("llama.rope.scaling.type", "none");
  EXPECT_TRUE(Config(none).ok());
}

// rope_freqs.weight as llama.cpp's convert_hf_to_gguf.py writes it for
// rope_scaling {rope_type: llama3} (LlamaModel.generate_extra_tensors, in
// float32 like the converter).
std::vector<float> ConverterRopeFreqs(float theta, int64_t head_dim, float factor, float low,
                                      float high, float orig) {
  std::vector<float> factors;
  for (int64_t i = 0; i < head_dim; i += 2) {
    float freq = 1.0f / std::pow(theta, static_cast<float>(i) / head_dim);
    float wavelen = 2.0f * static_cast<float>(M_PI) / freq;
    if (wavelen < orig / high) {
      factors.push_back(1.0f);
    } else if (wavelen > orig / low) {
      factors.push_back(factor);
    } else {
      float smooth = (orig / wavelen - low) / (high - low);
      factors.push_back(1.0f / ((1.0f - smooth) / factor + smooth));
    }
  }
  return factors;
}

// A llama GGUF with head_dim 128 or 64 (Llama-3.1-8B, Llama-3.2-1B shapes).
GgufTestWriter Llama31(int64_t head_dim, const std::vector<float>& rope_freqs) {
  GgufTestWriter w;
  w.AddString("general.architecture", "llama");
  w.AddInt("llama.context_length", kMetaU32, 131072);
  w.AddInt("llama.embedding_length", kMetaU32, 4 * head_dim);
  w.AddInt("llama.block_count", kMetaU32, 1);
  w.AddInt("llama.feed_forward_length", kMetaU32, 96);
  w.AddInt("llama.attention.head_count", kMetaU32, 4);
  w.AddInt("llama.vocab_size", kMetaU32, 100);
  w.AddF32("llama.rope.freq_base", 500000.0f);
  w.AddF32Tensor("rope_freqs.weight", {static_cast<int64_t>(rope_freqs.size())}, rope_freqs);
  return w;
}

TEST_F(GgufConfigTest, RecoversLlama3ScalingFromRopeFreqs) {
  struct Case {
    int64_t head_dim;
    float factor;
  };
  for (Case k : {Case{128, 8.0f}, Case{64, 32.0f}}) {
    SCOPED_TRACE(k.head_dim);
    auto c = Config(
        Llama31(k.head_dim, ConverterRopeFreqs(500000.0f, k.head_dim, k.factor, 1.0f, 4.0f, 8192)));
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_TRUE(c->rope_scaling.enabled);
    EXPECT_EQ(c->rope_scaling.factor, k.factor);
    EXPECT_EQ(c->rope_scaling.low_freq_factor, 1.0f);
    EXPECT_EQ(c->rope_scaling.high_freq_factor, 4.0f);
    EXPECT_EQ(c->rope_scaling.original_max_position_embeddings, 8192);
  }
  auto ones = Config(Llama31(64, std::vector<float>(32, 1.0f)));
  ASSERT_TRUE(ones.ok()) << ones.status();
  EXPECT_FALSE(ones->rope_scaling.enabled);
}

TEST_F(GgufConfigTest, RefusesRopeFreqsThatAreNotLlama3) {
  std::vector<float> freqs = ConverterRopeFreqs(500000.0f, 64, 32.0f, 1.0f, 4.0f, 8192);
  freqs[5] = 2.0f;  // a factor where llama3 scaling keeps 1
  ExpectError(Llama31(64, freqs), absl::StatusCode::kUnimplemented,
              "tensor 'rope_freqs.weight' (per-frequency RoPE factors): factor 5 is 2");
  ExpectError(Llama31(64, std::vector<float>(8, 2.0f)), absl::StatusCode::kUnimplemented,
              "8 factors for head_dim 64");
  std::vector<float> step(32, 1.0f);
  std::fill(step.begin() + 16, step.end(), 8.0f);  // no transition band
  ExpectError(Llama31(64, step), absl::StatusCode::kUnimplemented,
              "fewer than two factors in the transition band");
}

TEST_F(GgufConfigTest, TokenIdOutsideTheVocabulary) {
  GgufTestWriter w = Minimal();
  w.AddInt("tokenizer.ggml.eos_token_id", kMetaU32, 100);
  ExpectError(w, absl::StatusCode::kInvalidArgument,
              "metadata key 'tokenizer.ggml.eos_token_id' is 100, outside the vocabulary of 100");
}

TEST_F(GgufConfigTest, InconsistentHeadsFailValidation) {
  GgufTestWriter w = Minimal();
  w.AddInt("llama.attention.head_count_kv", kMetaU32, 3);
  ExpectError(w, absl::StatusCode::kInvalidArgument,
              "ModelConfig.num_kv_heads: 3 does not divide num_heads 4");
}

}  // namespace
}  // namespace onecard::engine
