// The FP8 output of onecard quantize (see quantize_fp8.h).
#include "tools/onecard/quantize_fp8.h"

#include "engine/common/status_macros.h"
#include "engine/model/fp8_quantizer.h"

namespace onecard::tools {
namespace {

using engine::DType;

// A compressed-tensors QuantizationArgs of float 8-bit values.
nlohmann::ordered_json FloatArgs(const char* strategy, bool dynamic) {
  nlohmann::ordered_json args = {
      {"num_bits", 8},        {"type", "float"},
      {"symmetric", true},    {"group_size", nullptr},
      {"strategy", strategy}, {"block_structure", nullptr},
      {"dynamic", dynamic},   {"actorder", nullptr},
      {"observer", nullptr},  {"observer_kwargs", nlohmann::ordered_json::object()}};
  if (!dynamic) args["observer"] = "minmax";
  return args;
}

}  // namespace

std::vector<engine::SafetensorsTensorSpec> Fp8ProjectionSpecs(const std::string& module, int64_t n,
                                                              int64_t k) {
  return {{module + ".weight", DType::kF8E4M3, {n, k}},
          {module + ".weight_scale", DType::kF32, {n, 1}}};
}

absl::Status WriteFp8Projection(const std::string& module, std::span<const float> w, int64_t n,
                                int64_t k, engine::SafetensorsWriter& writer) {
  ASSIGN_OR_RETURN(const engine::Fp8Matrix m, engine::QuantizeFp8Rows(w, n, k, module + ".weight"));
  RETURN_IF_ERROR(writer.Write(module + ".weight", m.codes));
  return writer.Write(module + ".weight_scale", {reinterpret_cast<const uint8_t*>(m.scales.data()),
                                                 m.scales.size() * sizeof(float)});
}

nlohmann::ordered_json Fp8QuantizationConfig() {
  nlohmann::ordered_json group = {{"targets", {"Linear"}},
                                  {"weights", FloatArgs("channel", false)},
                                  {"input_activations", FloatArgs("token", true)},
                                  {"output_activations", nullptr},
                                  {"format", "float-quantized"}};
  return {{"quant_method", "compressed-tensors"},
          {"format", "float-quantized"},
          {"quantization_status", "compressed"},
          {"config_groups", {{"group_0", group}}},
          {"ignore", {"lm_head"}},
          {"kv_cache_scheme", nullptr}};
}

}  // namespace onecard::tools
