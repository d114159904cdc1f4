// Fuzz target: an HF config.json of arbitrary bytes through ParseHfConfig
// (architecture, sizes, rope scaling) and its "quantization_config" through
// ParseHfQuantConfig (4-bit and FP8 methods), then the parsed config's
// module matching (config groups, ignore lists, FP8 schemes).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "engine/model/hf_config.h"
#include "engine/model/hf_quant_config.h"
#include "nlohmann/json.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace onecard::engine;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)ParseHfConfig(text, "config.json");
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("quantization_config")) return 0;
  const absl::StatusOr<HfQuantConfig> q =
      ParseHfQuantConfig(j["quantization_config"].dump(), "config.json");
  if (!q.ok()) return 0;
  for (const char* module : {"lm_head", "model.layers.0.self_attn.q_proj",
                             "model.layers.1.mlp.down_proj", "model.layers.10.mlp.gate"}) {
    (void)q->GroupFor(module);
    (void)q->Fp8SchemeFor(module);
  }
  return 0;
}
