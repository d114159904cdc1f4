// The parts of an HF tokenizer.json around its BPE model (pre_tokenizer,
// post_processor) and tokenizer_config.json (bos/eos, add_bos_token,
// chat_template), read into a BpeTokenizerSpec. Used by hf_json_loader.cc;
// tested by tests/engine/tokenizer/hf_json_config_test.cc.
#ifndef ONECARD_ENGINE_TOKENIZER_HF_JSON_CONFIG_H_
#define ONECARD_ENGINE_TOKENIZER_HF_JSON_CONFIG_H_

#include <nlohmann/json.hpp>
#include <string>

#include "absl/status/statusor.h"
#include "engine/tokenizer/bpe_tokenizer.h"

namespace onecard::engine {

// Maps tokenizer.json's pre_tokenizer to a kind:
//   ByteLevel(use_regex)                              -> kGpt2
//   Sequence[Digits(individual_digits), ByteLevel(use_regex)] -> kSmolLM
//   Sequence[Split(<regex>, Isolated), ByteLevel(use_regex=false)] -> the kind
//     whose pattern is <regex> (Llama-3, Qwen2 or GPT-2).
// Anything else is InvalidArgument naming `path` and the field.
absl::StatusOr<PreTokenizerKind> PreTokenizerKindFromHfJson(const std::string& path,
                                                            const nlohmann::json& doc);

// post_processor: TemplateProcessing whose "single" starts (ends) with a
// special token sets add_bos and bos_id (add_eos, eos_id); ByteLevel and null
// add nothing; Sequence applies each. Needs spec->tokens and added_tokens.
absl::Status ReadPostProcessor(const std::string& path, const nlohmann::json& doc,
                               BpeTokenizerSpec* spec);

// tokenizer_config.json: bos_token / eos_token (string, {"content": ...} or
// null), add_bos_token / add_eos_token (override the post-processor),
// chat_template (a string, or a list of {name, template}: "default" first).
absl::Status ApplyTokenizerConfig(const std::string& path, const nlohmann::json& config,
                                  BpeTokenizerSpec* spec);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_TOKENIZER_HF_JSON_CONFIG_H_
