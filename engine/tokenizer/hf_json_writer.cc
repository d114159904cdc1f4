// HfTokenizerJson (see hf_json_writer.h): nlohmann::ordered_json in the
// field order the tokenizers library writes.
#include "engine/tokenizer/hf_json_writer.h"

#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "engine/tokenizer/utf8.h"
#include "nlohmann/json.hpp"

namespace onecard::engine {
namespace {

using Json = nlohmann::ordered_json;

Json ByteLevel(bool add_prefix_space, bool trim_offsets, bool use_regex) {
  return {{"type", "ByteLevel"},
          {"add_prefix_space", add_prefix_space},
          {"trim_offsets", trim_offsets},
          {"use_regex", use_regex}};
}

Json PreTokenizerJson(PreTokenizerKind kind) {
  switch (kind) {
    case PreTokenizerKind::kGpt2:
      return ByteLevel(false, true, true);
    case PreTokenizerKind::kSmolLM:
      return {{"type", "Sequence"},
              {"pretokenizers",
               {{{"type", "Digits"}, {"individual_digits", true}}, ByteLevel(false, true, true)}}};
    case PreTokenizerKind::kLlama3:
    case PreTokenizerKind::kQwen2:
      break;
  }
  const std::string_view pattern =
      kind == PreTokenizerKind::kLlama3 ? kLlama3Pattern : kQwen2Pattern;
  return {{"type", "Sequence"},
          {"pretokenizers",
           {{{"type", "Split"},
             {"pattern", {{"Regex", std::string(pattern)}}},
             {"behavior", "Isolated"},
             {"invert", false}},
            ByteLevel(false, false, false)}}};
}

// "bos" / "eos" items of a TemplateProcessing and its special_tokens entry.
void AddSpecial(const std::string& content, int32_t id, Json* special_tokens) {
  (*special_tokens)[content] = {{"id", content}, {"ids", {id}}, {"tokens", {content}}};
}

Json PostProcessorJson(const BpeTokenizerSpec& spec, const std::string& bos,
                       const std::string& eos) {
  const bool bos_added = spec.add_bos && spec.bos_id >= 0;
  const bool eos_added = spec.add_eos && spec.eos_id >= 0;
  if (!bos_added && !eos_added) return ByteLevel(true, false, true);
  Json special_tokens = Json::object();
  const auto sequence = [&](const char* which, int type_id) {
    Json items = Json::array();
    if (bos_added) items.push_back({{"SpecialToken", {{"id", bos}, {"type_id", type_id}}}});
    items.push_back({{"Sequence", {{"id", which}, {"type_id", type_id}}}});
    if (eos_added) items.push_back({{"SpecialToken", {{"id", eos}, {"type_id", type_id}}}});
    return items;
  };
  if (bos_added) AddSpecial(bos, spec.bos_id, &special_tokens);
  if (eos_added) AddSpecial(eos, spec.eos_id, &special_tokens);
  Json pair = sequence("A", 0);
  for (Json& item : sequence("B", 1)) pair.push_back(std::move(item));
  return {{"type", "TemplateProcessing"},
          {"single", sequence("A", 0)},
          {"pair", std::move(pair)},
          {"special_tokens", std::move(special_tokens)}};
}

absl::Status SpecError(const BpeTokenizerSpec& spec, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(spec.source, ": ", what));
}

// A special token's text (an added token's content, else the vocabulary's).
std::string TokenText(const BpeTokenizerSpec& spec, int32_t id) {
  for (const AddedToken& t : spec.added_tokens) {
    if (t.id == id) return t.content;
  }
  return spec.tokens[id];
}

}  // namespace

absl::StatusOr<HfTokenizerFiles> HfTokenizerJson(const BpeTokenizerSpec& spec,
                                                 int64_t model_max_length) {
  const int64_t size = static_cast<int64_t>(spec.tokens.size());
  for (const auto& [name, id] : {std::pair{"bos", spec.bos_id}, std::pair{"eos", spec.eos_id}}) {
    if (id >= size) {
      return SpecError(
          spec, absl::StrCat(name, " id ", id, " is not below the vocabulary's ", size, " tokens"));
    }
  }
  Json vocab = Json::object();
  absl::flat_hash_map<std::string_view, int32_t> seen;
  for (int32_t id = 0; id < size; ++id) {
    const std::string& text = spec.tokens[id];
    if (text.empty()) continue;  // a hole in the ids
    if (!IsValidUtf8(text)) {
      return SpecError(spec,
                       absl::StrCat("token ", id, " is not valid UTF-8 (JSON cannot hold it)"));
    }
    const auto [it, inserted] = seen.emplace(text, id);
    if (!inserted) {
      return SpecError(spec, absl::StrCat("tokens ", it->second, " and ", id, " are both '", text,
                                          "'; a tokenizer.json vocabulary maps a text to one id"));
    }
    vocab[text] = id;
  }
  Json merges = Json::array();
  for (const auto& [a, b] : spec.merges) merges.push_back({a, b});
  Json added = Json::array();
  for (const AddedToken& t : spec.added_tokens) {
    if (!IsValidUtf8(t.content)) {
      return SpecError(spec, absl::StrCat("added token ", t.id, " is not valid UTF-8"));
    }
    added.push_back({{"id", t.id},
                     {"content", t.content},
                     {"single_word", t.single_word},
                     {"lstrip", t.lstrip},
                     {"rstrip", t.rstrip},
                     {"normalized", t.normalized},
                     {"special", t.special}});
  }
  const std::string bos = spec.bos_id >= 0 ? TokenText(spec, spec.bos_id) : "";
  const std::string eos = spec.eos_id >= 0 ? TokenText(spec, spec.eos_id) : "";
  Json tokenizer;
  tokenizer["version"] = "1.0";
  tokenizer["truncation"] = nullptr;
  tokenizer["padding"] = nullptr;
  tokenizer["added_tokens"] = std::move(added);
  tokenizer["normalizer"] =
      spec.normalizer == NormalizerKind::kNfc ? Json{{"type", "NFC"}} : Json(nullptr);
  tokenizer["pre_tokenizer"] = PreTokenizerJson(spec.pre_tokenizer);
  tokenizer["post_processor"] = PostProcessorJson(spec, bos, eos);
  tokenizer["decoder"] = ByteLevel(true, true, true);
  tokenizer["model"] = {{"type", "BPE"},
                        {"dropout", nullptr},
                        {"unk_token", nullptr},
                        {"continuing_subword_prefix", nullptr},
                        {"end_of_word_suffix", nullptr},
                        {"fuse_unk", false},
                        {"byte_fallback", false},
                        {"ignore_merges", spec.ignore_merges},
                        {"vocab", std::move(vocab)},
                        {"merges", std::move(merges)}};
  Json config;
  config["add_bos_token"] = spec.add_bos;
  config["add_eos_token"] = spec.add_eos;
  config["bos_token"] = spec.bos_id >= 0 ? Json(bos) : Json(nullptr);
  config["eos_token"] = spec.eos_id >= 0 ? Json(eos) : Json(nullptr);
  config["clean_up_tokenization_spaces"] = false;
  config["model_max_length"] = model_max_length;
  config["tokenizer_class"] = "PreTrainedTokenizerFast";
  if (!spec.chat_template.empty()) config["chat_template"] = spec.chat_template;
  // Every string was checked above or is the spec's own ASCII; the chat
  // template's bytes are replaced where invalid rather than thrown on.
  constexpr auto kReplace = Json::error_handler_t::replace;
  return HfTokenizerFiles{.tokenizer_json = tokenizer.dump(2, ' ', false, kReplace) + "\n",
                          .tokenizer_config_json = config.dump(2, ' ', false, kReplace) + "\n"};
}

}  // namespace onecard::engine
