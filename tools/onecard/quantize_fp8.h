// onecard quantize --format fp8's output (quantize_command.h): each decoder
// projection as a compressed-tensors float-quantized pair, "<module>.weight"
// F8_E4M3 [n, k] and "<module>.weight_scale" F32 [n, 1], one scale a row
// (engine/model/fp8_quantizer.h: amax / 448), and config.json's
// quantization_config as llm-compressor writes its FP8_DYNAMIC scheme
// (weights float 8-bit, strategy channel, symmetric, static; input
// activations float 8-bit, strategy token, dynamic; format
// float-quantized; lm_head ignored). Tested by
// tests/tools/onecard/quantize_command_test.cc.
#ifndef ONECARD_TOOLS_ONECARD_QUANTIZE_FP8_H_
#define ONECARD_TOOLS_ONECARD_QUANTIZE_FP8_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/model/safetensors_writer.h"
#include "nlohmann/json.hpp"

namespace onecard::tools {

// The two tensors of `module` ("model.layers.0.self_attn.q_proj") for W [n, k].
std::vector<engine::SafetensorsTensorSpec> Fp8ProjectionSpecs(const std::string& module, int64_t n,
                                                              int64_t k);

// Quantizes W [n, k] (fp32, row-major) and writes its two tensors in order.
absl::Status WriteFp8Projection(const std::string& module, std::span<const float> w, int64_t n,
                                int64_t k, engine::SafetensorsWriter& writer);

// config.json's "quantization_config".
nlohmann::ordered_json Fp8QuantizationConfig();

}  // namespace onecard::tools

#endif  // ONECARD_TOOLS_ONECARD_QUANTIZE_FP8_H_
