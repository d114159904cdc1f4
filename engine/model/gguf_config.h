// GGUF metadata -> ModelConfig: general.architecture (llama, whose files also
// carry Mistral models, or qwen2), <arch>.context_length, embedding_length,
// block_count, feed_forward_length, attention.head_count(_kv),
// attention.key_length, rope.freq_base, attention.layer_norm_rms_epsilon,
// rope.scaling.type (none) and llama3 scaling recovered from the
// rope_freqs.weight factors of Llama-3.1-style files; vocab from
// tokenizer.ggml.tokens; tied embeddings when output.weight is absent;
// bos/eos from tokenizer.ggml.*_token_id.
// Errors name the file and the key. Tested by tests/engine/model/gguf_config_test.cc.
#ifndef ONECARD_ENGINE_MODEL_GGUF_CONFIG_H_
#define ONECARD_ENGINE_MODEL_GGUF_CONFIG_H_

#include "absl/status/statusor.h"
#include "engine/model/gguf.h"
#include "engine/model/model_config.h"

namespace onecard::engine {

absl::StatusOr<ModelConfig> ModelConfigFromGguf(const GgufFile& gguf);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_MODEL_GGUF_CONFIG_H_
