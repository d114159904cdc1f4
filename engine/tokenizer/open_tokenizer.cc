// OpenTokenizer (see tokenizer.h): the tokenizer of an opened checkpoint (a
// synthetic model's: synthetic_tokenizer.h). In
// onecard_tokenizer, below the engine, so that the backends may tokenize
// (the KV cache calibration prompts, engine/runtime/kv_scales.h).
// Tested by tests/tools/onecard/perplexity_golden_test.cc (SmolLM2's GGUF)
// and tests/engine/runtime/kv_scales_test.cc.
#include "engine/model/checkpoint.h"
#include "engine/tokenizer/synthetic_tokenizer.h"
#include "engine/tokenizer/tokenizer.h"

namespace onecard::engine {

absl::StatusOr<std::unique_ptr<Tokenizer>> OpenTokenizer(const Checkpoint& checkpoint) {
  if (checkpoint.format == CheckpointFormat::kSynthetic) {
    return MakeSyntheticTokenizer(checkpoint.config);
  }
  if (checkpoint.gguf() != nullptr) return Tokenizer::FromGguf(*checkpoint.gguf());
  return Tokenizer::FromHfJson(checkpoint.tokenizer_json_path, checkpoint.tokenizer_config_path);
}

}  // namespace onecard::engine
