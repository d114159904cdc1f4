// Fuzz target: a GGUF file of arbitrary bytes through the reader (header,
// metadata, tensor table), the model config and tokenizer built from its
// metadata, and every tensor view touched at both ends and dequantized when
// small. Any input must give a status, never a crash or a read out of bounds.
#include <cstddef>
#include <cstdint>
#include <memory>

#include "engine/model/gguf.h"
#include "engine/model/gguf_config.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace onecard;
  const std::string path = fuzz::WriteScratchFile("model.gguf", data, size);
  absl::StatusOr<std::unique_ptr<engine::GgufFile>> gguf = engine::GgufFile::Open(path);
  if (!gguf.ok()) return 0;
  (void)engine::ModelConfigFromGguf(**gguf);
  (void)engine::Tokenizer::FromGguf(**gguf);
  fuzz::TouchTensors(**gguf);
  return 0;
}
