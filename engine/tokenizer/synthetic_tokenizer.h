// The tokenizer of a synthetic model (engine/model/synthetic_shapes.h): the
// served path needs one, and such a model has no vocabulary of its own.
// Over the model's vocab_size ids:
//   0-255         the bytes 0x00-0xff (text is encoded a byte a token)
//   256, 257      "<|im_start|>", "<|im_end|>" (special; so chat requests
//                 render with ChatML)
//   bos, eos      the config's bos_token_id / eos_token_id when at or above
//                 258: "<|begin_of_text|>", "<|end_of_text|>" (special); no
//                 usable eos: "<|im_end|>" is the eos
//   other ids     the text "<id>", e.g. "<48213>"
// Stop ids: the eos and "<|im_end|>". Decode(Encode(text)) == text for any
// text without those special strings.
// Tested by tests/engine/tokenizer/synthetic_tokenizer_test.cc.
#ifndef ONECARD_ENGINE_TOKENIZER_SYNTHETIC_TOKENIZER_H_
#define ONECARD_ENGINE_TOKENIZER_SYNTHETIC_TOKENIZER_H_

#include <memory>

#include "absl/status/statusor.h"
#include "engine/model/model_config.h"
#include "engine/tokenizer/tokenizer.h"

namespace onecard::engine {

// InvalidArgument when config.vocab_size < 258.
absl::StatusOr<std::unique_ptr<Tokenizer>> MakeSyntheticTokenizer(const ModelConfig& config);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_TOKENIZER_SYNTHETIC_TOKENIZER_H_
