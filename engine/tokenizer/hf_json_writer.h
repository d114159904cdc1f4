// A BpeTokenizerSpec written as Hugging Face tokenizer files, so that a model
// read from a GGUF file can be written as an HF folder (onecard quantize):
// tokenizer.json (the tokenizers library's format: byte-level BPE model with
// its vocabulary and merges, the pre-tokenizer of the spec's kind, NFC when
// the spec normalizes, added tokens, a TemplateProcessing post-processor
// when bos / eos are added, ByteLevel decoder) and tokenizer_config.json
// (bos / eos, add_bos_token / add_eos_token, chat_template). Both
// Tokenizer::FromHfJson and Hugging Face's tokenizers read them as the same
// tokenizer. Tested by tests/engine/tokenizer/hf_json_writer_test.cc.
#ifndef ONECARD_ENGINE_TOKENIZER_HF_JSON_WRITER_H_
#define ONECARD_ENGINE_TOKENIZER_HF_JSON_WRITER_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "engine/tokenizer/bpe_tokenizer.h"

namespace onecard::engine {

struct HfTokenizerFiles {
  std::string tokenizer_json;
  std::string tokenizer_config_json;
};

// model_max_length: written into tokenizer_config.json. InvalidArgument
// naming spec.source when two ids share a token's text (a tokenizer.json
// vocabulary maps each text to one id) or bos / eos is out of range.
absl::StatusOr<HfTokenizerFiles> HfTokenizerJson(const BpeTokenizerSpec& spec,
                                                 int64_t model_max_length);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_TOKENIZER_HF_JSON_WRITER_H_
