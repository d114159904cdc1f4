// ModelConfig::Validate names the offending field; ArchitectureName.
#include "engine/model/model_config.h"

#include <functional>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace onecard::engine {
namespace {

using ::testing::HasSubstr;

ModelConfig SmolLm2() {
  ModelConfig c;
  c.vocab_size = 49152;
  c.hidden_size = 576;
  c.intermediate_size = 1536;
  c.num_layers = 30;
  c.num_heads = 9;
  c.num_kv_heads = 3;
  c.head_dim = 64;
  c.max_position_embeddings = 8192;
  c.rope_theta = 100000.0f;
  c.bos_token_id = 1;
  c.eos_token_id = 2;
  return c;
}

TEST(ModelConfigTest, ValidConfigPasses) { EXPECT_TRUE(SmolLm2().Validate().ok()); }

struct BadCase {
  const char* field;
  std::function<void(ModelConfig&)> breaks;
};

TEST(ModelConfigTest, EachBadFieldIsNamed) {
  const BadCase cases[] = {
      {"vocab_size", [](ModelConfig& c) { c.vocab_size = 0; }},
      {"hidden_size", [](ModelConfig& c) { c.hidden_size = -5; }},
      {"intermediate_size", [](ModelConfig& c) { c.intermediate_size = 0; }},
      {"num_layers", [](ModelConfig& c) { c.num_layers = 1 << 20; }},
      {"num_heads", [](ModelConfig& c) { c.num_heads = 0; }},
      {"num_kv_heads", [](ModelConfig& c) { c.num_kv_heads = 4; }},
      {"num_kv_heads", [](ModelConfig& c) { c.num_kv_heads = 0; }},
      {"head_dim", [](ModelConfig& c) { c.head_dim = 63; }},
      {"max_position_embeddings", [](ModelConfig& c) { c.max_position_embeddings = 0; }},
      {"rms_norm_eps", [](ModelConfig& c) { c.rms_norm_eps = 0.0f; }},
      {"rope_theta", [](ModelConfig& c) { c.rope_theta = NAN; }},
      {"rope_scaling.factor",
       [](ModelConfig& c) {
         c.rope_scaling.enabled = true;
         c.rope_scaling.factor = 0.5f;
       }},
      {"rope_scaling.high_freq_factor",
       [](ModelConfig& c) {
         c.rope_scaling.enabled = true;
         c.rope_scaling.high_freq_factor = 0.5f;
       }},
      {"bos_token_id", [](ModelConfig& c) { c.bos_token_id = 49152; }},
      {"eos_token_id", [](ModelConfig& c) { c.eos_token_id = -2; }},
  };
  for (const BadCase& bad : cases) {
    ModelConfig c = SmolLm2();
    bad.breaks(c);
    absl::Status status = c.Validate();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << bad.field;
    EXPECT_THAT(std::string(status.message()),
                HasSubstr(std::string("ModelConfig.") + bad.field + ":"));
  }
}

TEST(ModelConfigTest, MissingTokenIdsAreAllowed) {
  ModelConfig c = SmolLm2();
  c.bos_token_id = -1;
  c.eos_token_id = -1;
  EXPECT_TRUE(c.Validate().ok());
}

TEST(ModelConfigTest, ArchitectureNames) {
  EXPECT_EQ(ArchitectureName(Architecture::kLlama), "llama");
  EXPECT_EQ(ArchitectureName(Architecture::kQwen2), "qwen2");
  EXPECT_EQ(ArchitectureName(Architecture::kMistral), "mistral");
}

}  // namespace
}  // namespace onecard::engine
