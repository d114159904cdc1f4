// The quantization config of an HF checkpoint folder, for its 4-bit weight-only
// projections (hf_int4.h) and its FP8 E4M3 ones (hf_fp8.h): config.json's
// "quantization_config", else quantize_config.json (AutoGPTQ), else
// quant_config.json (AutoAWQ); a folder with none of them is unquantized.
// Methods ("quant_method"):
//  - "gptq" (AutoGPTQ / GPTQModel): bits 4, group_size (-1: one group a row),
//    sym, desc_act, checkpoint_format (or format) "gptq" (v1: zero points
//    stored minus one) or "gptq_v2", pack_dtype int32; "dynamic" per-module
//    overrides are not supported.
//  - "awq" (AutoAWQ): bits / w_bit 4, group_size / q_group_size, zero_point
//    true, version "gemm".
//  - "compressed-tensors": config_groups whose weights are either int 4-bit
//    (format "pack-quantized", top level or per group; strategy "group" or
//    "channel", symmetric or not; no activation quantization) or float 8-bit
//    (format "float-quantized" or its alias "naive-quantized"; strategy
//    "tensor", "channel" or "block" with block_structure [128, 128];
//    symmetric; input_activations absent, static per-tensor, dynamic
//    per-token or dynamic per-group of 128); "ignore" names modules (or "re:"
//    patterns) left unquantized.
//  - "fp8" (transformers' FineGrainedFP8Config, DeepSeek-V3 style):
//    weight_block_size [128, 128] (scales "weight_scale_inv"), fmt "e4m3",
//    activation_scheme "dynamic"; without weight_block_size, per-tensor
//    scales "weight_scale" (AutoFP8 / vLLM's Fp8Config), activation_scheme
//    "dynamic" or "static". modules_to_not_convert (and ignored_layers) name
//    modules left unquantized.
//  - "fbgemm_fp8" (transformers' FbgemmFp8Config): per-channel scales,
//    activation_scale_ub, modules_to_not_convert.
// FP8 activations are recorded as the checkpoint states them; the engine
// quantizes activations dynamically per token whatever they say (a static
// input_scale is not read).
// Anything else is Unimplemented and a malformed field InvalidArgument, both
// naming the file and the field. Tested by
// tests/engine/model/hf_quant_config_test.cc.
#ifndef ONECARD_ENGINE_MODEL_HF_QUANT_CONFIG_H_
#define ONECARD_ENGINE_MODEL_HF_QUANT_CONFIG_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace onecard::engine {

enum class HfQuantMethod : uint8_t { kNone, kGptq, kAwq, kCompressedTensors, kFp8, kFbgemmFp8 };

// "none", "gptq", "awq", "compressed-tensors", "fp8", "fbgemm_fp8".
const char* HfQuantMethodName(HfQuantMethod method);

// How an FP8 weight's scales cover it: one for the whole tensor, one a row
// (output channel), or one a 128 x 128 block.
enum class Fp8WeightScales : uint8_t { kTensor, kChannel, kBlock128 };
// The input activations a checkpoint records: none (weight-only), static
// per-tensor (an input_scale tensor), dynamic per token, dynamic per group
// of 128 columns of a token.
enum class Fp8Activations : uint8_t { kNone, kStaticTensor, kDynamicToken, kDynamicGroup128 };

// "tensor", "channel", "block128"; "none", "static-tensor", "dynamic-token",
// "dynamic-group128".
const char* Fp8WeightScalesName(Fp8WeightScales scales);
const char* Fp8ActivationsName(Fp8Activations activations);

struct Fp8Scheme {
  Fp8WeightScales weights = Fp8WeightScales::kChannel;
  Fp8Activations activations = Fp8Activations::kDynamicToken;
};

// One compressed-tensors config group.
struct CompressedGroup {
  std::string name;                  // its key in config_groups ("group_0")
  std::vector<std::string> targets;  // "Linear", "re:<pattern>" or module names
  int32_t group_size = 0;            // 0: strategy "channel" (one scale a row)
  bool symmetric = true;
  std::optional<Fp8Scheme> fp8;  // float 8-bit weights; int 4-bit when absent
};

struct HfQuantConfig {
  HfQuantMethod method = HfQuantMethod::kNone;
  std::string source;                   // the file it came from (for errors)
  int32_t group_size = 0;               // GPTQ / AWQ; 0: one group a row
  bool symmetric = false;               // GPTQ sym (AWQ: always zero points)
  bool desc_act = false;                // GPTQ
  bool gptq_v2 = false;                 // GPTQ: zero points stored as they are (v1: minus one)
  std::vector<CompressedGroup> groups;  // compressed-tensors
  Fp8Scheme fp8;                        // fp8, fbgemm_fp8
  float activation_scale_ub = 0.0f;     // fbgemm_fp8 (recorded, not used)
  // Modules left unquantized: compressed-tensors "ignore" (names or "re:"
  // patterns), fp8 / fbgemm_fp8 modules_to_not_convert (and ignored_layers).
  std::vector<std::string> ignore;

  // The compressed-tensors group of `module` ("model.layers.0.mlp.up_proj"),
  // as vLLM matches targets: a group naming the module, else one whose
  // "re:" pattern matches from its start, else one targeting "Linear";
  // nullptr if none.
  const CompressedGroup* GroupFor(const std::string& module) const;

  // Whether `module` is on the ignore list: compressed-tensors as vLLM
  // matches it (the name itself, or a "re:" pattern matching from its
  // start); fp8 / fbgemm_fp8 as transformers' should_convert_module (an entry
  // matching as a pattern from the name's start, or ending the name).
  bool Ignores(const std::string& module) const;

  // The FP8 scheme the config gives `module`'s weight; nullopt when it makes
  // it no FP8 weight (another method, an ignored module, no group or a
  // 4-bit group for it).
  std::optional<Fp8Scheme> Fp8SchemeFor(const std::string& module) const;
};

// Parses a quantization config object (quantize_config.json's text);
// `default_method` is taken when it has no quant_method (AutoGPTQ's and
// AutoAWQ's own files).
absl::StatusOr<HfQuantConfig> ParseHfQuantConfig(
    std::string_view json_text, const std::string& source,
    HfQuantMethod default_method = HfQuantMethod::kNone);

// The config of the HF folder `dir` (kNone when it has none).
absl::StatusOr<HfQuantConfig> LoadHfQuantConfig(const std::string& dir);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_MODEL_HF_QUANT_CONFIG_H_
