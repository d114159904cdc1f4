// Fuzz target: an HF tokenizer.json (and, after a 0xFF 0x00 separator, a
// tokenizer_config.json) of arbitrary bytes through Tokenizer::FromHfJson;
// a tokenizer that loads encodes and decodes a fixed text with specials.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "engine/tokenizer/tokenizer.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace onecard;
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  const size_t split = all.find(std::string_view("\xff\x00", 2));
  const std::string_view json = all.substr(0, split);
  const std::string path = fuzz::WriteScratchFile(
      "tokenizer.json", reinterpret_cast<const uint8_t*>(json.data()), json.size());
  std::string config_path;
  if (split != std::string_view::npos) {
    const std::string_view config = all.substr(split + 2);
    config_path = fuzz::WriteScratchFile(
        "tokenizer_config.json", reinterpret_cast<const uint8_t*>(config.data()), config.size());
  }
  absl::StatusOr<std::unique_ptr<engine::Tokenizer>> t =
      engine::Tokenizer::FromHfJson(path, config_path);
  if (!t.ok()) return 0;
  const std::vector<int32_t> ids = (*t)->Encode("Hi <|im_start|>user\n\xc3\xa9 42!", true);
  (void)(*t)->Decode(ids, false);
  (void)engine::ChatTemplate::ForTokenizer(**t);
  return 0;
}
