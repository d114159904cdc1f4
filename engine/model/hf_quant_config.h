// The quantization config of an HF checkpoint folder, for its 4-bit weight-only
// projections (hf_int4.h): config.json's "quantization_config", else
// quantize_config.json (AutoGPTQ), else quant_config.json (AutoAWQ); a folder
// with none of them is unquantized. Methods ("quant_method"):
//  - "gptq" (AutoGPTQ / GPTQModel): bits 4, group_size (-1: one group a row),
//    sym, desc_act, checkpoint_format (or format) "gptq" (v1: zero points
//    stored minus one) or "gptq_v2", pack_dtype int32; "dynamic" per-module
//    overrides are not supported.
//  - "awq" (AutoAWQ): bits / w_bit 4, group_size / q_group_size, zero_point
//    true, version "gemm".
//  - "compressed-tensors": format "pack-quantized" (top level or per group),
//    config_groups whose weights are int 4-bit, strategy "group" or "channel",
//    symmetric or not, and no activation quantization.
// Anything else is Unimplemented and a malformed field InvalidArgument, both
// naming the file and the field. Tested by
// tests/engine/model/hf_quant_config_test.cc.
#ifndef ONECARD_ENGINE_MODEL_HF_QUANT_CONFIG_H_
#define ONECARD_ENGINE_MODEL_HF_QUANT_CONFIG_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace onecard::engine {

enum class HfQuantMethod : uint8_t { kNone, kGptq, kAwq, kCompressedTensors };

// "none", "gptq", "awq", "compressed-tensors".
const char* HfQuantMethodName(HfQuantMethod method);

// One compressed-tensors config group.
struct CompressedGroup {
  std::string name;                  // its key in config_groups ("group_0")
  std::vector<std::string> targets;  // "Linear", "re:<pattern>" or module names
  int32_t group_size = 0;            // 0: strategy "channel" (one scale a row)
  bool symmetric = true;
};

struct HfQuantConfig {
  HfQuantMethod method = HfQuantMethod::kNone;
  std::string source;                   // the file it came from (for errors)
  int32_t group_size = 0;               // GPTQ / AWQ; 0: one group a row
  bool symmetric = false;               // GPTQ sym (AWQ: always zero points)
  bool desc_act = false;                // GPTQ
  bool gptq_v2 = false;                 // GPTQ: zero points stored as they are (v1: minus one)
  std::vector<CompressedGroup> groups;  // compressed-tensors

  // The compressed-tensors group of `module` ("model.layers.0.mlp.up_proj"),
  // as vLLM matches targets: a group naming the module, else one whose
  // "re:" pattern matches from its start, else one targeting "Linear";
  // nullptr if none.
  const CompressedGroup* GroupFor(const std::string& module) const;
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
