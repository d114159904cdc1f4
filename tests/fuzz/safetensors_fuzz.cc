// Fuzz target: a .safetensors file of arbitrary bytes (header length, JSON
// header, tensor table) through SafetensorsSource; every tensor view
// touched at both ends and dequantized when small.
#include <cstddef>
#include <cstdint>
#include <memory>

#include "engine/model/safetensors.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace onecard;
  const std::string path = fuzz::WriteScratchFile("model.safetensors", data, size);
  absl::StatusOr<std::unique_ptr<engine::SafetensorsSource>> source =
      engine::SafetensorsSource::OpenFile(path);
  if (!source.ok()) return 0;
  fuzz::TouchTensors(**source);
  return 0;
}
