// Fuzz target: an HF config.json of arbitrary bytes through ParseHfConfig
// (architecture, sizes, rope scaling, quantization_config).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "engine/model/hf_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)onecard::engine::ParseHfConfig(std::string_view(reinterpret_cast<const char*>(data), size),
                                       "config.json");
  return 0;
}
