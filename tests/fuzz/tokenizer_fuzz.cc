// Fuzz target: the SmolLM2 tokenizer on arbitrary bytes (not UTF-8 either):
// Encode with and without special tokens, Decode of the ids, and the same
// ids (plus the input's bytes read as ids, in and out of the vocabulary)
// through the incremental detokenizer, whose pieces must be valid UTF-8 and
// concatenate to Decode of the same ids.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/utf8.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace onecard;
  const engine::Tokenizer& tokenizer = fuzz::SmolLm2Tokenizer();
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<int32_t> ids = tokenizer.Encode(text, size % 2 == 0);
  (void)tokenizer.Decode(ids, size % 3 == 0);
  for (size_t i = 0; i + 2 <= size; i += 2) {
    ids.push_back(static_cast<int16_t>(data[i] | (data[i + 1] << 8)));  // some negative
  }
  engine::IncrementalDetokenizer detok(&tokenizer, size % 5 == 0);
  std::string streamed;
  for (int32_t id : ids) streamed += detok.Add(id);
  streamed += detok.Flush();
  // The stream's contract (tokenizer.h): valid UTF-8 that concatenates to
  // Decode of the same ids.
  if (!engine::IsValidUtf8(streamed)) std::abort();
  if (streamed != tokenizer.Decode(ids, size % 5 == 0)) std::abort();
  return 0;
}
