// ParseHfQuantConfig / LoadHfQuantConfig on the quantization configs real
// 4-bit checkpoints carry (AutoGPTQ's quantize_config.json, transformers'
// GPTQConfig and AwqConfig in config.json, AutoAWQ's quant_config.json, an
// llm-compressor W4A16 compressed-tensors config) and on broken or
// unsupported ones, each error naming the file and the field; and
// CompressedGroup target matching (exact names, "re:" patterns, "Linear").
// FP8: llm-compressor's FP8_DYNAMIC, FP8 (static) and FP8_BLOCK
// compressed-tensors configs, transformers' fp8 (DeepSeek-V3 / Qwen3-FP8) and
// fbgemm_fp8 (Llama 3.1 405B FP8) configs, AutoFP8's per-tensor fp8 config,
// a mixed int4 / fp8 compressed-tensors config; ignore lists as vLLM and
// transformers match them; the FP8 fields' errors.
#include "engine/model/hf_quant_config.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/engine/model/model_test_util.h"

namespace onecard::engine {
namespace {

using ::testing::HasSubstr;
using ::testing::SizeIs;

constexpr char kAutoGptq[] = R"({"bits": 4, "group_size": 128, "damp_percent": 0.1,
  "desc_act": true, "static_groups": false, "sym": true, "true_sequential": true,
  "model_name_or_path": null, "model_file_base_name": "model"})";

constexpr char kTransformersGptq[] = R"({"architectures": ["LlamaForCausalLM"],
  "quantization_config": {"bits": 4, "checkpoint_format": "gptq_v2", "damp_percent": 0.01,
    "desc_act": false, "exllama_config": {"version": 1}, "group_size": -1,
    "quant_method": "gptq", "sym": false, "true_sequential": true, "use_exllama": true,
    "pack_dtype": "int32", "dynamic": null}})";

constexpr char kTransformersAwq[] = R"({"quantization_config": {"bits": 4, "group_size": 128,
  "modules_to_not_convert": null, "quant_method": "awq", "version": "gemm",
  "zero_point": true}})";

constexpr char kAutoAwq[] = R"({"zero_point": true, "q_group_size": 64, "w_bit": 4,
  "version": "GEMM"})";

constexpr char kCompressed[] = R"({"quantization_config": {"quant_method": "compressed-tensors",
  "format": "pack-quantized", "quantization_status": "compressed", "ignore": ["lm_head"],
  "config_groups": {
    "group_0": {"targets": ["re:.*self_attn\\.(q|k|v)_proj$", "model.layers.0.mlp.down_proj"],
      "weights": {"num_bits": 4, "type": "int", "symmetric": false, "strategy": "group",
                  "group_size": 32, "actorder": null, "dynamic": false, "observer": "minmax"},
      "input_activations": null, "output_activations": null},
    "group_1": {"targets": ["Linear"], "format": "pack-quantized",
      "weights": {"num_bits": 4, "type": "int", "symmetric": true, "strategy": "channel",
                  "group_size": null}}}}})";

// Writes config.json (and optionally another file) into a scratch folder
// and loads its quantization config.
absl::StatusOr<HfQuantConfig> LoadFrom(const testing::ScratchDir& dir, const std::string& config,
                                       const std::string& other_name = "",
                                       const std::string& other = "") {
  dir.Write("config.json", config);
  if (!other_name.empty()) dir.Write(other_name, other);
  return LoadHfQuantConfig(dir.path());
}

TEST(HfQuantConfigTest, AutoGptqQuantizeConfigJson) {
  testing::ScratchDir dir;
  auto c = LoadFrom(dir, R"({"architectures": ["LlamaForCausalLM"]})", "quantize_config.json",
                    kAutoGptq);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->method, HfQuantMethod::kGptq);
  EXPECT_EQ(c->group_size, 128);
  EXPECT_TRUE(c->symmetric);
  EXPECT_TRUE(c->desc_act);
  EXPECT_FALSE(c->gptq_v2);
  EXPECT_EQ(c->source, dir.path() + "/quantize_config.json");
}

TEST(HfQuantConfigTest, ConfigJsonWinsOverTheOwnFiles) {
  testing::ScratchDir dir;
  auto c = LoadFrom(dir, kTransformersGptq, "quantize_config.json", kAutoGptq);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->method, HfQuantMethod::kGptq);
  EXPECT_EQ(c->group_size, 0);  // -1: one group a row
  EXPECT_FALSE(c->symmetric);
  EXPECT_TRUE(c->gptq_v2);
  EXPECT_EQ(c->source, dir.path() + "/config.json");
}

TEST(HfQuantConfigTest, AwqInConfigJsonAndInQuantConfigJson) {
  testing::ScratchDir dir;
  auto c = LoadFrom(dir, kTransformersAwq);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->method, HfQuantMethod::kAwq);
  EXPECT_EQ(c->group_size, 128);
  EXPECT_FALSE(c->symmetric);
  testing::ScratchDir own;
  c = LoadFrom(own, "{}", "quant_config.json", kAutoAwq);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->method, HfQuantMethod::kAwq);
  EXPECT_EQ(c->group_size, 64);
}

TEST(HfQuantConfigTest, NoConfigIsUnquantized) {
  testing::ScratchDir dir;
  auto c = LoadFrom(dir, R"({"architectures": ["LlamaForCausalLM"]})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->method, HfQuantMethod::kNone);
}

TEST(HfQuantConfigTest, CompressedTensorsGroupsAndTargets) {
  testing::ScratchDir dir;
  auto c = LoadFrom(dir, kCompressed);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->method, HfQuantMethod::kCompressedTensors);
  ASSERT_THAT(c->groups, SizeIs(2));
  EXPECT_EQ(c->groups[0].group_size, 32);
  EXPECT_FALSE(c->groups[0].symmetric);
  EXPECT_EQ(c->groups[1].group_size, 0);
  EXPECT_TRUE(c->groups[1].symmetric);
  auto group_of = [&](const std::string& module) {
    const CompressedGroup* g = c->GroupFor(module);
    return g == nullptr ? std::string("none") : g->name;
  };
  EXPECT_EQ(group_of("model.layers.3.self_attn.k_proj"), "group_0");        // pattern
  EXPECT_EQ(group_of("model.layers.0.mlp.down_proj"), "group_0");           // exact name
  EXPECT_EQ(group_of("model.layers.3.self_attn.o_proj"), "group_1");        // Linear
  EXPECT_EQ(group_of("model.layers.3.self_attn.q_proj_extra"), "group_1");  // pattern's $
}

// llm-compressor's FP8_DYNAMIC (compressed-tensors 0.10 field set).
constexpr char kFp8Dynamic[] = R"({"quantization_config": {"config_groups": {"group_0": {
    "input_activations": {"actorder": null, "block_structure": null, "dynamic": true,
      "group_size": null, "num_bits": 8, "observer": null, "observer_kwargs": {},
      "strategy": "token", "symmetric": true, "type": "float"},
    "output_activations": null, "targets": ["Linear"],
    "weights": {"actorder": null, "block_structure": null, "dynamic": false, "group_size": null,
      "num_bits": 8, "observer": "minmax", "observer_kwargs": {}, "strategy": "channel",
      "symmetric": true, "type": "float"}}},
  "format": "float-quantized", "global_compression_ratio": null,
  "ignore": ["lm_head", "re:.*mlp\\.gate$"], "kv_cache_scheme": null,
  "quant_method": "compressed-tensors", "quantization_status": "compressed"}})";

// FP8_BLOCK (weights 128 x 128, activations dynamic per group of 128) and
// FP8 (static per tensor), as two groups, beside a 4-bit one.
constexpr char kFp8Mixed[] = R"({"quantization_config": {"quant_method": "compressed-tensors",
  "format": "float-quantized", "ignore": ["model.layers.0.self_attn.o_proj"],
  "config_groups": {
    "block": {"targets": ["re:.*self_attn\\.(q|k|v|o)_proj$"],
      "weights": {"num_bits": 8, "type": "float", "strategy": "block",
                  "block_structure": [128, 128], "symmetric": true, "dynamic": false},
      "input_activations": {"num_bits": 8, "type": "float", "strategy": "group",
                            "group_size": 128, "dynamic": true}},
    "static": {"targets": ["re:.*mlp\\.(gate|up)_proj$"],
      "weights": {"num_bits": 8, "type": "float", "strategy": "tensor"},
      "input_activations": {"num_bits": 8, "type": "float", "strategy": "tensor",
                            "dynamic": false, "observer": "static_minmax"}},
    "int4": {"targets": ["Linear"], "format": "pack-quantized",
      "weights": {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128}}}}})";

TEST(HfQuantConfigTest, CompressedTensorsFp8Dynamic) {
  testing::ScratchDir dir;
  auto c = LoadFrom(dir, kFp8Dynamic);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->method, HfQuantMethod::kCompressedTensors);
  ASSERT_THAT(c->groups, SizeIs(1));
  ASSERT_TRUE(c->groups[0].fp8.has_value());
  EXPECT_EQ(c->groups[0].fp8->weights, Fp8WeightScales::kChannel);
  EXPECT_EQ(c->groups[0].fp8->activations, Fp8Activations::kDynamicToken);
  EXPECT_TRUE(c->Fp8SchemeFor("model.layers.7.self_attn.q_proj").has_value());
  EXPECT_FALSE(c->Fp8SchemeFor("lm_head").has_value());                  // ignored
  EXPECT_FALSE(c->Fp8SchemeFor("model.layers.1.mlp.gate").has_value());  // "re:" ignored
  EXPECT_TRUE(c->Fp8SchemeFor("model.layers.1.mlp.gate_proj").has_value());
}

TEST(HfQuantConfigTest, CompressedTensorsFp8BlockStaticAndInt4Groups) {
  testing::ScratchDir dir;
  auto c = LoadFrom(dir, kFp8Mixed);
  ASSERT_TRUE(c.ok()) << c.status();
  auto scheme = [&](const std::string& module) { return c->Fp8SchemeFor(module); };
  ASSERT_TRUE(scheme("model.layers.3.self_attn.k_proj").has_value());
  EXPECT_EQ(scheme("model.layers.3.self_attn.k_proj")->weights, Fp8WeightScales::kBlock128);
  EXPECT_EQ(scheme("model.layers.3.self_attn.k_proj")->activations,
            Fp8Activations::kDynamicGroup128);
  ASSERT_TRUE(scheme("model.layers.3.mlp.up_proj").has_value());
  EXPECT_EQ(scheme("model.layers.3.mlp.up_proj")->weights, Fp8WeightScales::kTensor);
  EXPECT_EQ(scheme("model.layers.3.mlp.up_proj")->activations, Fp8Activations::kStaticTensor);
  EXPECT_FALSE(scheme("model.layers.3.mlp.down_proj").has_value());  // the 4-bit group
  EXPECT_EQ(c->GroupFor("model.layers.3.mlp.down_proj")->group_size, 128);
  EXPECT_FALSE(scheme("model.layers.0.self_attn.o_proj").has_value());  // ignored
  EXPECT_TRUE(scheme("model.layers.1.self_attn.o_proj").has_value());
}

TEST(HfQuantConfigTest, TransformersFp8Block) {
  // DeepSeek-V3's and Qwen3-8B-FP8's config.json.
  testing::ScratchDir dir;
  auto c = LoadFrom(dir, R"({"quantization_config": {"activation_scheme": "dynamic",
      "fmt": "e4m3", "quant_method": "fp8", "weight_block_size": [128, 128],
      "modules_to_not_convert": ["lm_head", "model.layers.1.mlp"]}})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->method, HfQuantMethod::kFp8);
  EXPECT_EQ(c->fp8.weights, Fp8WeightScales::kBlock128);
  EXPECT_EQ(c->fp8.activations, Fp8Activations::kDynamicGroup128);
  EXPECT_TRUE(c->Fp8SchemeFor("model.layers.0.mlp.up_proj").has_value());
  EXPECT_FALSE(c->Fp8SchemeFor("model.layers.1.mlp.up_proj").has_value());  // prefix
  EXPECT_FALSE(c->Fp8SchemeFor("lm_head").has_value());
  EXPECT_EQ(HfQuantMethodName(c->method), std::string("fp8"));
}

TEST(HfQuantConfigTest, AutoFp8PerTensor) {
  testing::ScratchDir dir;
  auto c = LoadFrom(dir, R"({"quantization_config": {"quant_method": "fp8",
      "activation_scheme": "static", "ignored_layers": ["lm_head"]}})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->fp8.weights, Fp8WeightScales::kTensor);
  EXPECT_EQ(c->fp8.activations, Fp8Activations::kStaticTensor);
  EXPECT_TRUE(c->Ignores("lm_head"));
}

TEST(HfQuantConfigTest, FbgemmFp8) {
  // Llama 3.1 405B FP8's form: attention and the first and last layers kept.
  testing::ScratchDir dir;
  auto c = LoadFrom(dir, R"({"quantization_config": {"activation_scale_ub": 1200.0,
      "modules_to_not_convert": ["model.layers.0.mlp.down_proj", "self_attn", "lm_head"],
      "quant_method": "fbgemm_fp8"}})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->method, HfQuantMethod::kFbgemmFp8);
  EXPECT_EQ(c->activation_scale_ub, 1200.0f);
  EXPECT_EQ(c->fp8.weights, Fp8WeightScales::kChannel);
  EXPECT_EQ(c->fp8.activations, Fp8Activations::kDynamicToken);
  EXPECT_TRUE(c->Fp8SchemeFor("model.layers.0.mlp.up_proj").has_value());
  EXPECT_FALSE(c->Fp8SchemeFor("model.layers.0.mlp.down_proj").has_value());
  EXPECT_FALSE(c->Ignores("model.layers.2.self_attn.q_proj"));  // neither prefix nor suffix
  EXPECT_TRUE(c->Ignores("self_attn"));
  EXPECT_EQ(Fp8ActivationsName(c->fp8.activations), std::string("dynamic-token"));
  EXPECT_EQ(Fp8WeightScalesName(c->fp8.weights), std::string("channel"));
}

struct BadCase {
  const char* name;
  const char* quantization_config;
  const char* message;  // after "<dir>/config.json: "
  absl::StatusCode code;
};

void PrintTo(const BadCase& c, std::ostream* os) { *os << c.name; }

class HfQuantConfigBadTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(HfQuantConfigBadTest, NamesTheFileAndTheField) {
  testing::ScratchDir dir;
  auto c = LoadFrom(
      dir, std::string(R"({"quantization_config": )") + GetParam().quantization_config + "}");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), GetParam().code) << c.status();
  EXPECT_THAT(std::string(c.status().message()),
              HasSubstr(dir.path() + "/config.json: " + GetParam().message));
}

constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;
constexpr auto kUnimplemented = absl::StatusCode::kUnimplemented;

INSTANTIATE_TEST_SUITE_P(
    Cases, HfQuantConfigBadTest,
    ::testing::Values(
        BadCase{"UnknownMethod", R"({"quant_method": "hqq"})",
                "field 'quantization_config.quant_method' is \"hqq\"; supported: gptq, awq, "
                "compressed-tensors",
                kUnimplemented},
        BadCase{"MissingMethod", R"({"bits": 4})",
                "field 'quantization_config.quant_method' is missing", kInvalid},
        BadCase{"NotAnObject", R"([1, 2])", "field 'quantization_config' is not a JSON object",
                kInvalid},
        BadCase{"EightBitGptq", R"({"quant_method": "gptq", "bits": 8})",
                "field 'quantization_config.bits' is 8; supported: 4-bit weights", kUnimplemented},
        BadCase{"BitsNotAnInteger", R"({"quant_method": "gptq", "bits": "4"})",
                "field 'quantization_config.bits' is not an integer", kInvalid},
        BadCase{"ZeroGroup", R"({"quant_method": "gptq", "group_size": 0})",
                "field 'quantization_config.group_size' is 0; expected -1 or a positive", kInvalid},
        BadCase{"MarlinFormat", R"({"quant_method": "gptq", "checkpoint_format": "marlin"})",
                "field 'quantization_config.checkpoint_format' is \"marlin\"; supported: gptq, "
                "gptq_v2",
                kUnimplemented},
        BadCase{"Dynamic", R"({"quant_method": "gptq", "dynamic": {"-:.*": {}}})",
                "field 'quantization_config.dynamic' (per-module overrides)", kUnimplemented},
        BadCase{"AwqGemv", R"({"quant_method": "awq", "version": "gemv"})",
                "field 'quantization_config.version' is \"gemv\"; supported: gemm", kUnimplemented},
        BadCase{"AwqNoZeroPoint", R"({"quant_method": "awq", "zero_point": false})",
                "field 'quantization_config.zero_point' = false", kUnimplemented},
        BadCase{"CompressedNoGroups", R"({"quant_method": "compressed-tensors"})",
                "field 'quantization_config.config_groups' must be a non-empty object", kInvalid},
        BadCase{"CompressedIntWeightsFloatFormat",
                R"({"quant_method": "compressed-tensors", "format": "float-quantized",
                    "config_groups": {"g": {"targets": ["Linear"], "weights": {}}}})",
                "field 'quantization_config.config_groups.g.format' is \"float-quantized\"",
                kUnimplemented},
        BadCase{"CompressedW4A8",
                R"({"quant_method": "compressed-tensors", "config_groups": {"g": {
                    "targets": ["Linear"], "weights": {"num_bits": 4, "strategy": "channel"},
                    "input_activations": {"num_bits": 8}}}})",
                "field 'quantization_config.config_groups.g.input_activations' is set",
                kUnimplemented},
        BadCase{"CompressedTensorStrategy",
                R"({"quant_method": "compressed-tensors", "config_groups": {"g": {
                    "targets": ["Linear"], "weights": {"num_bits": 4, "strategy": "tensor"}}}})",
                "field 'quantization_config.config_groups.g.weights.strategy' is \"tensor\"",
                kUnimplemented},
        BadCase{"CompressedGroupWithoutSize",
                R"({"quant_method": "compressed-tensors", "config_groups": {"g": {
                    "targets": ["Linear"], "weights": {"num_bits": 4, "strategy": "group"}}}})",
                "field 'quantization_config.config_groups.g.weights.group_size' is missing",
                kInvalid},
        BadCase{"CompressedBadPattern",
                R"({"quant_method": "compressed-tensors", "config_groups": {"g": {
                    "targets": ["re:(unclosed"], "weights": {"num_bits": 4,
                    "strategy": "channel"}}}})",
                "field 'quantization_config.config_groups.g.targets' holds a bad pattern",
                kInvalid},
        BadCase{"Fp8BlockOf64", R"({"quant_method": "fp8", "weight_block_size": [64, 64]})",
                "field 'quantization_config.weight_block_size' is [64,64]; supported: [128, 128]",
                kUnimplemented},
        BadCase{"Fp8BlockNotAPair", R"({"quant_method": "fp8", "weight_block_size": 128})",
                "field 'quantization_config.weight_block_size' is not a pair of integers",
                kInvalid},
        BadCase{"Fp8StaticBlocks",
                R"({"quant_method": "fp8", "activation_scheme": "static",
                    "weight_block_size": [128, 128]})",
                "field 'quantization_config.activation_scheme' is \"static\"; supported: dynamic",
                kUnimplemented},
        BadCase{"Fp8E5M2", R"({"quant_method": "fp8", "fmt": "e5m2"})",
                "field 'quantization_config.fmt' is \"e5m2\"; supported: e4m3", kUnimplemented},
        BadCase{"Fp8IgnoreNotAList", R"({"quant_method": "fp8", "modules_to_not_convert": "x"})",
                "field 'quantization_config.modules_to_not_convert' must be a list of strings",
                kInvalid},
        BadCase{"FbgemmNegativeBound",
                R"({"quant_method": "fbgemm_fp8", "activation_scale_ub": -1})",
                "field 'quantization_config.activation_scale_ub' is -1", kInvalid},
        BadCase{"CompressedFloat4",
                R"({"quant_method": "compressed-tensors", "format": "float-quantized",
                    "config_groups": {"g": {"targets": ["Linear"],
                    "weights": {"num_bits": 4, "type": "float", "strategy": "tensor"}}}})",
                "field 'quantization_config.config_groups.g.weights.num_bits' is 4",
                kUnimplemented},
        BadCase{"CompressedFp8Group",
                R"({"quant_method": "compressed-tensors", "format": "float-quantized",
                    "config_groups": {"g": {"targets": ["Linear"],
                    "weights": {"num_bits": 8, "type": "float", "strategy": "group",
                                "group_size": 128}}}})",
                "field 'quantization_config.config_groups.g.weights.strategy' is \"group\"; "
                "supported: tensor, channel, block",
                kUnimplemented},
        BadCase{"CompressedFp8Block64",
                R"({"quant_method": "compressed-tensors", "format": "float-quantized",
                    "config_groups": {"g": {"targets": ["Linear"],
                    "weights": {"num_bits": 8, "type": "float", "strategy": "block",
                                "block_structure": [64, 64]}}}})",
                "field 'quantization_config.config_groups.g.weights.block_structure' is [64,64]",
                kUnimplemented},
        BadCase{"CompressedFp8Packed",
                R"({"quant_method": "compressed-tensors", "format": "pack-quantized",
                    "config_groups": {"g": {"targets": ["Linear"],
                    "weights": {"num_bits": 8, "type": "float", "strategy": "channel"}}}})",
                "field 'quantization_config.config_groups.g.format' is \"pack-quantized\"; float "
                "weights: float-quantized",
                kUnimplemented},
        BadCase{"CompressedFp8TensorDynamicActivations",
                R"({"quant_method": "compressed-tensors", "format": "float-quantized",
                    "config_groups": {"g": {"targets": ["Linear"],
                    "weights": {"num_bits": 8, "type": "float", "strategy": "channel"},
                    "input_activations": {"num_bits": 8, "type": "float", "strategy": "channel",
                                          "dynamic": true}}}})",
                "field 'quantization_config.config_groups.g.input_activations.strategy' is "
                "\"channel\" with dynamic true",
                kUnimplemented},
        BadCase{"CompressedFp8IntActivations",
                R"({"quant_method": "compressed-tensors", "format": "float-quantized",
                    "config_groups": {"g": {"targets": ["Linear"],
                    "weights": {"num_bits": 8, "type": "float", "strategy": "channel"},
                    "input_activations": {"num_bits": 8, "type": "int", "strategy": "token",
                                          "dynamic": true}}}})",
                "field 'quantization_config.config_groups.g.input_activations.type' is not that of "
                "float 8-bit activations",
                kUnimplemented},
        BadCase{"CompressedBadIgnorePattern",
                R"({"quant_method": "compressed-tensors", "format": "float-quantized",
                    "ignore": ["re:(x"], "config_groups": {"g": {"targets": ["Linear"],
                    "weights": {"num_bits": 8, "type": "float", "strategy": "channel"}}}})",
                "field 'quantization_config.ignore' holds a bad pattern", kInvalid}),
    [](const ::testing::TestParamInfo<BadCase>& info) { return std::string(info.param.name); });

TEST(HfQuantConfigTest, BrokenOwnFileNamesIt) {
  testing::ScratchDir dir;
  auto c = LoadFrom(dir, "{}", "quantize_config.json", R"({"bits": 3})");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()),
              HasSubstr(dir.path() + "/quantize_config.json: field 'bits' is 3"));
  c = LoadFrom(dir, "{}", "quantize_config.json", "{not json");
  EXPECT_THAT(std::string(c.status().message()),
              HasSubstr(dir.path() + "/quantize_config.json: not a JSON object"));
}

TEST(HfQuantConfigTest, ParseTakesTheDefaultMethod) {
  auto c = ParseHfQuantConfig(kAutoAwq, "quant_config.json", HfQuantMethod::kAwq);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->method, HfQuantMethod::kAwq);
  EXPECT_EQ(HfQuantMethodName(c->method), std::string("awq"));
}

}  // namespace
}  // namespace onecard::engine
