// The real SmolLM2-135M-Instruct Q4_1 GGUF (models/, fetched by
// scripts/fetch-model.sh): metadata values, tensor table and the ModelConfig,
// all as read by the gguf package and transformers (values listed in
// tests/golden/model/smollm2_weight_slices.json's config and by GGUFReader).
#include "engine/model/checkpoint.h"
#include "engine/model/gguf.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/all_close.h"

namespace onecard::engine {
namespace {

constexpr char kModel[] = "models/SmolLM2-135M-Instruct.Q4_1.gguf";

TEST(GgufSmolLm2Test, Metadata) {
  auto gguf = GgufFile::Open(::onecard::testing::SourcePath(kModel));
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  const GgufFile& g = **gguf;
  EXPECT_EQ(g.version(), 3u);
  EXPECT_EQ(g.metadata().size(), 33u);
  EXPECT_EQ(g.GetString("general.architecture").value(), "llama");
  EXPECT_EQ(g.GetInt("llama.block_count").value(), 30);
  EXPECT_EQ(g.GetInt("llama.context_length").value(), 8192);
  EXPECT_EQ(g.GetInt("llama.embedding_length").value(), 576);
  EXPECT_EQ(g.GetInt("llama.feed_forward_length").value(), 1536);
  EXPECT_EQ(g.GetInt("llama.attention.head_count").value(), 9);
  EXPECT_EQ(g.GetInt("llama.attention.head_count_kv").value(), 3);
  EXPECT_EQ(g.GetFloat("llama.rope.freq_base").value(), 100000.0);
  EXPECT_EQ(g.GetFloat("llama.attention.layer_norm_rms_epsilon").value(),
            static_cast<double>(1e-5f));
  EXPECT_EQ(g.GetString("tokenizer.ggml.model").value(), "gpt2");
  EXPECT_EQ(g.GetString("tokenizer.ggml.pre").value(), "smollm");
  EXPECT_EQ(g.GetStringArray("tokenizer.ggml.tokens").value().size(), 49152u);
  EXPECT_EQ(g.GetStringArray("tokenizer.ggml.merges").value().size(), 48900u);
  EXPECT_EQ(g.GetIntArray("tokenizer.ggml.token_type").value().size(), 49152u);
  EXPECT_FALSE(g.GetBool("tokenizer.ggml.add_bos_token").value());
  EXPECT_THAT(g.GetString("tokenizer.chat_template").value(), ::testing::HasSubstr("<|im_start|>"));
  EXPECT_EQ(g.GetStringArray("general.languages").value(), std::vector<std::string>{"en"});
}

TEST(GgufSmolLm2Test, Tensors) {
  auto gguf = GgufFile::Open(::onecard::testing::SourcePath(kModel));
  ASSERT_TRUE(gguf.ok()) << gguf.status();
  const GgufFile& g = **gguf;
  EXPECT_EQ(g.TensorNames().size(), 272u);
  int q4_1 = 0, f32 = 0, q8_0 = 0;
  for (const std::string& name : g.TensorNames()) {
    DType dtype = g.Find(name)->dtype;
    q4_1 += dtype == DType::kQ4_1;
    f32 += dtype == DType::kF32;
    q8_0 += dtype == DType::kQ8_0;
  }
  EXPECT_EQ(q4_1, 210);
  EXPECT_EQ(f32, 61);
  EXPECT_EQ(q8_0, 1);
  const TensorView* embd = g.Find("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  EXPECT_EQ(embd->dtype, DType::kQ8_0);
  EXPECT_EQ(embd->shape, (std::vector<int64_t>{49152, 576}));
  EXPECT_EQ(embd->file_offset, 1785664u);
  EXPECT_EQ(embd->size_bytes, 49152u * 576 / 32 * 34);
  const TensorView* down = g.Find("blk.0.ffn_down.weight");
  EXPECT_EQ(down->shape, (std::vector<int64_t>{576, 1536}));
  EXPECT_EQ(down->file_offset, 31868992u);
  EXPECT_EQ(g.Find("blk.0.attn_k.weight")->shape, (std::vector<int64_t>{192, 576}));
  EXPECT_EQ(g.Find("output.weight"), nullptr);
}

TEST(GgufSmolLm2Test, Config) {
  auto ckpt = OpenCheckpoint(::onecard::testing::SourcePath(kModel));
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  const ModelConfig& c = ckpt->config;
  EXPECT_EQ(c.architecture, Architecture::kLlama);
  EXPECT_EQ(c.num_layers, 30);
  EXPECT_EQ(c.hidden_size, 576);
  EXPECT_EQ(c.intermediate_size, 1536);
  EXPECT_EQ(c.num_heads, 9);
  EXPECT_EQ(c.num_kv_heads, 3);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.vocab_size, 49152);
  EXPECT_EQ(c.max_position_embeddings, 8192);
  EXPECT_FLOAT_EQ(c.rope_theta, 100000.0f);
  EXPECT_FLOAT_EQ(c.rms_norm_eps, 1e-5f);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_FALSE(c.rope_scaling.enabled);
  EXPECT_EQ(c.bos_token_id, 1);
  EXPECT_EQ(c.eos_token_id, 2);
}

}  // namespace
}  // namespace onecard::engine
