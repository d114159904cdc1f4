// ParseHfConfig on the config.json files of real checkpoints (Llama-3.2-1B
// with llama3 rope scaling, Qwen2-0.5B-Instruct, Mistral-7B-v0.1 with its
// sliding window, Mistral-Nemo with an explicit head_dim) and on broken ones:
// unknown architecture, missing or mistyped fields, unsupported features.
#include "engine/model/hf_config.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/engine/model/model_test_util.h"

namespace onecard::engine {
namespace {

using ::testing::HasSubstr;
using Json = nlohmann::json;

constexpr char kLlama32[] = R"({"architectures": ["LlamaForCausalLM"], "attention_bias": false,
  "attention_dropout": 0.0, "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009],
  "head_dim": 64, "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02,
  "intermediate_size": 8192, "max_position_embeddings": 131072, "mlp_bias": false,
  "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 16,
  "num_key_value_heads": 8, "pretraining_tp": 1, "rms_norm_eps": 1e-05,
  "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "rope_theta": 500000.0, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
  "use_cache": true, "vocab_size": 128256})";

constexpr char kQwen2[] = R"({"architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0,
  "bos_token_id": 151643, "eos_token_id": 151645, "hidden_act": "silu", "hidden_size": 896,
  "initializer_range": 0.02, "intermediate_size": 4864, "max_position_embeddings": 32768,
  "max_window_layers": 24, "model_type": "qwen2", "num_attention_heads": 14,
  "num_hidden_layers": 24, "num_key_value_heads": 2, "rms_norm_eps": 1e-06,
  "rope_theta": 1000000.0, "sliding_window": 32768, "tie_word_embeddings": true,
  "torch_dtype": "bfloat16", "use_cache": true, "use_sliding_window": false,
  "vocab_size": 151936})";

constexpr char kMistral7b[] = R"({"architectures": ["MistralForCausalLM"], "bos_token_id": 1,
  "eos_token_id": 2, "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
  "intermediate_size": 14336, "max_position_embeddings": 32768, "model_type": "mistral",
  "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
  "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "sliding_window": 4096,
  "tie_word_embeddings": false, "torch_dtype": "bfloat16", "use_cache": true,
  "vocab_size": 32000})";

constexpr char kMistralNemo[] = R"({"architectures": ["MistralForCausalLM"], "bos_token_id": 1,
  "eos_token_id": 2, "head_dim": 128, "hidden_act": "silu", "hidden_size": 5120,
  "intermediate_size": 14336, "max_position_embeddings": 1024000, "model_type": "mistral",
  "num_attention_heads": 32, "num_hidden_layers": 40, "num_key_value_heads": 8,
  "rms_norm_eps": 1e-05, "rope_theta": 1000000.0, "sliding_window": null,
  "tie_word_embeddings": false, "vocab_size": 131072})";

absl::StatusOr<ModelConfig> Parse(const std::string& text) {
  return ParseHfConfig(text, "/ckpt/Some-Model/config.json");
}

// kLlama32 with one field replaced (or removed when value is null and
// remove is set).
std::string Edited(const char* base, const std::string& field, const Json& value,
                   bool remove = false) {
  Json j = Json::parse(base);
  if (remove) {
    j.erase(field);
  } else {
    j[field] = value;
  }
  return j.dump();
}

TEST(HfConfigTest, Llama32WithLlama3RopeScaling) {
  auto c = Parse(kLlama32);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->architecture, Architecture::kLlama);
  EXPECT_EQ(c->vocab_size, 128256);
  EXPECT_EQ(c->hidden_size, 2048);
  EXPECT_EQ(c->intermediate_size, 8192);
  EXPECT_EQ(c->num_layers, 16);
  EXPECT_EQ(c->num_heads, 32);
  EXPECT_EQ(c->num_kv_heads, 8);
  EXPECT_EQ(c->head_dim, 64);
  EXPECT_EQ(c->max_position_embeddings, 131072);
  EXPECT_FLOAT_EQ(c->rms_norm_eps, 1e-5f);
  EXPECT_FLOAT_EQ(c->rope_theta, 500000.0f);
  EXPECT_TRUE(c->rope_scaling.enabled);
  EXPECT_FLOAT_EQ(c->rope_scaling.factor, 32.0f);
  EXPECT_FLOAT_EQ(c->rope_scaling.low_freq_factor, 1.0f);
  EXPECT_FLOAT_EQ(c->rope_scaling.high_freq_factor, 4.0f);
  EXPECT_EQ(c->rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_FALSE(c->attention_bias);
  EXPECT_EQ(c->bos_token_id, 128000);
  EXPECT_EQ(c->eos_token_id, 128001);  // the first of the list
  EXPECT_EQ(c->name, "Some-Model");    // the folder
}

TEST(HfConfigTest, Qwen2HasQkvBiasAndNoWindowCap) {
  auto c = Parse(kQwen2);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->architecture, Architecture::kQwen2);
  EXPECT_TRUE(c->attention_bias);
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_EQ(c->num_heads, 14);
  EXPECT_EQ(c->num_kv_heads, 2);
  EXPECT_EQ(c->head_dim, 64);  // 896 / 14
  EXPECT_EQ(c->max_position_embeddings, 32768);
  EXPECT_FLOAT_EQ(c->rms_norm_eps, 1e-6f);
  EXPECT_FLOAT_EQ(c->rope_theta, 1e6f);
  EXPECT_FALSE(c->rope_scaling.enabled);
  EXPECT_EQ(c->bos_token_id, 151643);
  EXPECT_EQ(c->eos_token_id, 151645);
}

TEST(HfConfigTest, MistralSlidingWindowCapsTheContext) {
  auto c = Parse(kMistral7b);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->architecture, Architecture::kMistral);
  EXPECT_EQ(c->max_position_embeddings, 4096);
  EXPECT_FALSE(c->attention_bias);
  EXPECT_FALSE(c->tie_word_embeddings);
  EXPECT_EQ(c->head_dim, 128);
  EXPECT_EQ(c->vocab_size, 32000);
}

TEST(HfConfigTest, MistralNemoHasAnExplicitHeadDim) {
  auto c = Parse(kMistralNemo);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->head_dim, 128);                     // not 5120 / 32
  EXPECT_EQ(c->max_position_embeddings, 1024000);  // no window
}

TEST(HfConfigTest, TransformersV5RopeParameters) {
  Json j = Json::parse(kLlama32);
  j.erase("rope_scaling");
  j.erase("rope_theta");
  j["rope_parameters"] = {{"rope_theta", 500000.0},  {"rope_type", "llama3"},
                          {"factor", 8.0},           {"low_freq_factor", 1.0},
                          {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 8192}};
  auto c = Parse(j.dump());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FLOAT_EQ(c->rope_theta, 500000.0f);
  EXPECT_TRUE(c->rope_scaling.enabled);
  EXPECT_FLOAT_EQ(c->rope_scaling.factor, 8.0f);
}

TEST(HfConfigTest, DefaultsOfAbsentFields) {
  Json j = Json::parse(kMistral7b);
  for (const char* f : {"num_key_value_heads", "rms_norm_eps", "rope_theta", "sliding_window",
                        "max_position_embeddings", "bos_token_id", "eos_token_id"}) {
    j.erase(f);
  }
  auto c = Parse(j.dump());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->num_kv_heads, 32);
  EXPECT_FLOAT_EQ(c->rms_norm_eps, 1e-6f);
  EXPECT_FLOAT_EQ(c->rope_theta, 10000.0f);
  EXPECT_EQ(c->max_position_embeddings, 131072);
  EXPECT_EQ(c->bos_token_id, -1);
  EXPECT_EQ(c->eos_token_id, -1);
}

void ExpectError(const std::string& text, absl::StatusCode code, const std::string& what) {
  auto c = Parse(text);
  ASSERT_FALSE(c.ok()) << what;
  EXPECT_EQ(c.status().code(), code) << c.status();
  EXPECT_THAT(std::string(c.status().message()),
              HasSubstr("/ckpt/Some-Model/config.json: " + what));
}

TEST(HfConfigTest, UnknownArchitectureNamesTheField) {
  ExpectError(Edited(kLlama32, "architectures", {"GPT2LMHeadModel"}),
              absl::StatusCode::kUnimplemented,
              "field 'architectures' [\"GPT2LMHeadModel\"] names no supported architecture");
  ExpectError(Edited(kLlama32, "architectures", nullptr, true), absl::StatusCode::kInvalidArgument,
              "field 'architectures' must be");
}

TEST(HfConfigTest, MissingOrMistypedFields) {
  ExpectError(Edited(kLlama32, "hidden_size", nullptr, true), absl::StatusCode::kInvalidArgument,
              "field 'hidden_size' is missing");
  ExpectError(Edited(kQwen2, "num_hidden_layers", "24"), absl::StatusCode::kInvalidArgument,
              "field 'num_hidden_layers' is not an integer: \"24\"");
  ExpectError(Edited(kQwen2, "rms_norm_eps", "small"), absl::StatusCode::kInvalidArgument,
              "field 'rms_norm_eps' is not a number");
  ExpectError(Edited(kQwen2, "eos_token_id", "x"), absl::StatusCode::kInvalidArgument,
              "field 'eos_token_id' is not a token id");
  ExpectError(Edited(kQwen2, "tie_word_embeddings", 1), absl::StatusCode::kInvalidArgument,
              "field 'tie_word_embeddings' is not a boolean");
  ExpectError("[1, 2]", absl::StatusCode::kInvalidArgument, "not a JSON object");
  ExpectError("{\"architectures\": ", absl::StatusCode::kInvalidArgument, "not a JSON object");
}

TEST(HfConfigTest, RopeScalingErrors) {
  Json j = Json::parse(kLlama32);
  j["rope_scaling"].erase("factor");
  ExpectError(j.dump(), absl::StatusCode::kInvalidArgument,
              "field 'rope_scaling.factor' is missing");
  j["rope_scaling"] = {{"type", "yarn"}, {"factor", 4.0}};
  ExpectError(j.dump(), absl::StatusCode::kUnimplemented,
              "field 'rope_scaling.rope_type' is \"yarn\"; supported: default, llama3");
  ExpectError(Edited(kLlama32, "rope_scaling", 3), absl::StatusCode::kInvalidArgument,
              "field 'rope_scaling' is not an object");
}

TEST(HfConfigTest, UnsupportedFeatures) {
  ExpectError(Edited(kLlama32, "attention_bias", true), absl::StatusCode::kUnimplemented,
              "field 'attention_bias' = true is not supported");
  ExpectError(Edited(kLlama32, "mlp_bias", true), absl::StatusCode::kUnimplemented,
              "field 'mlp_bias' = true is not supported");
  ExpectError(Edited(kQwen2, "hidden_act", "gelu"), absl::StatusCode::kUnimplemented,
              "field 'hidden_act' is \"gelu\"; supported: silu");
}

TEST(HfConfigTest, InconsistentValuesFailValidation) {
  ExpectError(Edited(kLlama32, "num_key_value_heads", 5), absl::StatusCode::kInvalidArgument,
              "ModelConfig.num_kv_heads: 5 does not divide num_heads 32");
}

// HfConfigJson writes what ParseHfConfig reads back as the same config:
// every field of the real configs above (the Mistral window already applied
// to max_position_embeddings), and odd floats.
TEST(HfConfigTest, WrittenConfigReadsBackTheSame) {
  for (const char* text : {kLlama32, kQwen2, kMistral7b}) {
    absl::StatusOr<ModelConfig> config = ParseHfConfig(text, "/m/config.json");
    ASSERT_TRUE(config.ok()) << config.status();
    const std::string written = HfConfigJson(*config);
    absl::StatusOr<ModelConfig> back = ParseHfConfig(written, "/out/config.json");
    ASSERT_TRUE(back.ok()) << back.status() << "\n" << written;
    testing::ExpectSameModelConfig(*config, *back);
  }
  ModelConfig odd;
  odd.name = "odd";
  odd.vocab_size = 100;
  odd.hidden_size = 64;
  odd.intermediate_size = 96;
  odd.num_layers = 3;
  odd.num_heads = 4;
  odd.num_kv_heads = 4;
  odd.head_dim = 24;  // not hidden / heads
  odd.rms_norm_eps = 1.0f / 3.0f;
  odd.rope_theta = 123456.7f;
  odd.bos_token_id = -1;
  odd.eos_token_id = 0;
  absl::StatusOr<ModelConfig> back = ParseHfConfig(HfConfigJson(odd), "/odd/config.json");
  ASSERT_TRUE(back.ok()) << back.status();
  testing::ExpectSameModelConfig(odd, *back);
  const Json j = Json::parse(HfConfigJson(odd));
  EXPECT_TRUE(j["bos_token_id"].is_null());
  EXPECT_EQ(j["architectures"], Json::array({"LlamaForCausalLM"}));
}

TEST(HfConfigTest, LoadMissingFileIsNotFound) {
  auto c = LoadHfConfig("/nonexistent/config.json");
  EXPECT_EQ(c.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("/nonexistent/config.json"));
}

}  // namespace
}  // namespace onecard::engine
