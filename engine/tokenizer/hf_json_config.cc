// tokenizer.json pre_tokenizer / post_processor and tokenizer_config.json
// (see hf_json_config.h). No nlohmann call here can throw: every access is
// behind a type check. Tested by tests/engine/tokenizer/hf_json_config_test.cc.
#include "engine/tokenizer/hf_json_config.h"

#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/tokenizer/pre_tokenizer.h"

namespace onecard::engine {
namespace {

using json = nlohmann::json;

absl::Status FieldError(const std::string& path, const std::string& field,
                        const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", field, ": ", what));
}

std::string StringOr(const json& obj, const char* key, std::string fallback) {
  if (!obj.is_object()) return fallback;
  const auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : fallback;
}

bool BoolOr(const json& obj, const char* key, bool fallback) {
  if (!obj.is_object()) return fallback;
  const auto it = obj.find(key);
  return it != obj.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

constexpr char kSupportedPre[] =
    " (supported: ByteLevel; Sequence[Digits(individual_digits), ByteLevel]; "
    "Sequence[Split(the Llama-3, Qwen2 or GPT-2 regex, Isolated), "
    "ByteLevel(use_regex=false)])";

// The ByteLevel step: checks add_prefix_space and returns use_regex.
absl::StatusOr<bool> ByteLevelUsesRegex(const std::string& path, const json& step,
                                        const std::string& field) {
  if (BoolOr(step, "add_prefix_space", false)) {
    return FieldError(path, field + ".add_prefix_space", "true is not supported");
  }
  return BoolOr(step, "use_regex", true);
}

absl::StatusOr<PreTokenizerKind> KindFromSplit(const std::string& path, const json& split,
                                               const std::string& field) {
  const json* regex = nullptr;
  if (const auto p = split.find("pattern"); p != split.end() && p->is_object()) {
    if (const auto r = p->find("Regex"); r != p->end() && r->is_string()) regex = &*r;
  }
  if (regex == nullptr) return FieldError(path, field + ".pattern.Regex", "missing");
  if (StringOr(split, "behavior", "") != "Isolated" || BoolOr(split, "invert", false)) {
    return FieldError(path, field, "only behavior \"Isolated\" without invert is supported");
  }
  const std::string& pattern = regex->get_ref<const std::string&>();
  if (pattern == kLlama3Pattern) return PreTokenizerKind::kLlama3;
  if (pattern == kQwen2Pattern) return PreTokenizerKind::kQwen2;
  if (pattern == kGpt2Pattern) return PreTokenizerKind::kGpt2;
  return FieldError(path, field + ".pattern.Regex",
                    absl::StrCat("unknown regex '", pattern,
                                 "' (supported: the Llama-3, Qwen2 and GPT-2 patterns)"));
}

// The steps of a pre_tokenizer (a Sequence's list, or the one step) and the
// field name of step i.
struct PreSteps {
  std::vector<const json*> steps;
  bool sequence = false;
  std::string Field(size_t i) const {
    return sequence ? absl::StrCat("pre_tokenizer.pretokenizers[", i, "]") : "pre_tokenizer";
  }
};

absl::StatusOr<PreSteps> ReadPreSteps(const std::string& path, const json& doc) {
  const auto pre = doc.find("pre_tokenizer");
  if (pre == doc.end() || !pre->is_object()) {
    return FieldError(path, "pre_tokenizer", absl::StrCat("missing", kSupportedPre));
  }
  PreSteps out;
  if (StringOr(*pre, "type", "") != "Sequence") {
    out.steps.push_back(&*pre);
    return out;
  }
  const auto list = pre->find("pretokenizers");
  if (list == pre->end() || !list->is_array()) {
    return FieldError(path, "pre_tokenizer.pretokenizers", "missing or not an array");
  }
  for (const json& step : *list) out.steps.push_back(&step);
  out.sequence = true;
  return out;
}

}  // namespace

absl::StatusOr<PreTokenizerKind> PreTokenizerKindFromHfJson(const std::string& path,
                                                            const json& doc) {
  ASSIGN_OR_RETURN(const PreSteps pre, ReadPreSteps(path, doc));
  const std::vector<const json*>& steps = pre.steps;
  const auto field = [&](size_t i) { return pre.Field(i); };
  std::vector<std::string> types;
  for (const json* step : steps) types.push_back(StringOr(*step, "type", "?"));
  const size_t n = steps.size();
  if (n >= 1 && types[n - 1] == "ByteLevel") {
    ASSIGN_OR_RETURN(const bool use_regex, ByteLevelUsesRegex(path, *steps[n - 1], field(n - 1)));
    if (n == 1 && use_regex) return PreTokenizerKind::kGpt2;
    if (n == 2 && types[0] == "Digits" && use_regex) {
      if (!BoolOr(*steps[0], "individual_digits", false)) {
        return FieldError(path, field(0) + ".individual_digits", "only true is supported");
      }
      return PreTokenizerKind::kSmolLM;
    }
    if (n == 2 && types[0] == "Split" && !use_regex)
      return KindFromSplit(path, *steps[0], field(0));
  }
  std::string shape;
  for (const std::string& t : types) absl::StrAppend(&shape, shape.empty() ? "" : ", ", t);
  return FieldError(path, "pre_tokenizer",
                    absl::StrCat("unsupported [", shape, "] with these options", kSupportedPre));
}

namespace {

// The id of a token written as text: added tokens first, then the vocabulary.
int32_t FindToken(const BpeTokenizerSpec& spec, const std::string& content) {
  for (const AddedToken& t : spec.added_tokens) {
    if (t.content == content) return t.id;
  }
  for (size_t id = 0; id < spec.tokens.size(); ++id) {
    if (spec.tokens[id] == content) return static_cast<int32_t>(id);
  }
  return -1;
}

// A special token of a TemplateProcessing: its id from special_tokens, else by
// name.
absl::StatusOr<int32_t> TemplateTokenId(const std::string& path, const json& processor,
                                        const json& item, const std::string& field) {
  const std::string name = StringOr(item, "id", "");
  if (const auto specials = processor.find("special_tokens");
      specials != processor.end() && specials->is_object()) {
    if (const auto s = specials->find(name); s != specials->end() && s->is_object()) {
      const auto ids = s->find("ids");
      if (ids != s->end() && ids->is_array() && ids->size() == 1 && (*ids)[0].is_number_integer()) {
        return static_cast<int32_t>((*ids)[0].get<int64_t>());
      }
    }
  }
  return FieldError(path, field, absl::StrCat("special token '", name, "' has no single id"));
}

absl::Status ReadTemplateProcessing(const std::string& path, const json& processor,
                                    const std::string& field, BpeTokenizerSpec* spec) {
  const auto single = processor.find("single");
  if (single == processor.end() || !single->is_array()) {
    return FieldError(path, field + ".single", "missing or not an array");
  }
  for (size_t i = 0; i < single->size(); ++i) {
    const json& item = (*single)[i];
    const bool first = i == 0;
    const bool last = i + 1 == single->size();
    const auto special = item.is_object() ? item.find("SpecialToken") : item.end();
    if (special == item.end() || !(first || last)) continue;
    const std::string item_field = absl::StrCat(field, ".single[", i, "].SpecialToken");
    ASSIGN_OR_RETURN(const int32_t id, TemplateTokenId(path, processor, *special, item_field));
    if (first) {
      spec->add_bos = true;
      if (spec->bos_id < 0) spec->bos_id = id;
    } else {
      spec->add_eos = true;
      if (spec->eos_id < 0) spec->eos_id = id;
    }
  }
  return absl::OkStatus();
}

absl::Status ReadProcessor(const std::string& path, const json& processor, const std::string& field,
                           BpeTokenizerSpec* spec) {
  if (processor.is_null()) return absl::OkStatus();
  const std::string type = StringOr(processor, "type", "?");
  if (type == "ByteLevel") return absl::OkStatus();
  if (type == "TemplateProcessing") return ReadTemplateProcessing(path, processor, field, spec);
  if (type == "Sequence") {
    const auto list = processor.find("processors");
    if (list == processor.end() || !list->is_array()) {
      return FieldError(path, field + ".processors", "missing or not an array");
    }
    for (size_t i = 0; i < list->size(); ++i) {
      RETURN_IF_ERROR(
          ReadProcessor(path, (*list)[i], absl::StrCat(field, ".processors[", i, "]"), spec));
    }
    return absl::OkStatus();
  }
  return FieldError(path, field + ".type",
                    absl::StrCat("'", type,
                                 "' is not supported (supported: ByteLevel, "
                                 "TemplateProcessing, Sequence)"));
}

// bos_token / eos_token: "text", {"content": "text"} or null.
absl::Status ReadSpecialToken(const std::string& path, const json& config, const char* key,
                              const BpeTokenizerSpec& spec, int32_t* id) {
  const auto it = config.find(key);
  if (it == config.end()) return absl::OkStatus();
  if (it->is_null()) {
    *id = -1;
    return absl::OkStatus();
  }
  const std::string content =
      it->is_string() ? it->get<std::string>() : StringOr(*it, "content", "");
  if (content.empty()) return FieldError(path, key, "neither a string nor {\"content\": ...}");
  *id = FindToken(spec, content);
  if (*id < 0) return FieldError(path, key, absl::StrCat("'", content, "' is not a token"));
  return absl::OkStatus();
}

absl::Status ReadChatTemplate(const std::string& path, const json& config, BpeTokenizerSpec* spec) {
  const auto it = config.find("chat_template");
  if (it == config.end() || it->is_null()) return absl::OkStatus();
  if (it->is_string()) {
    spec->chat_template = it->get<std::string>();
    return absl::OkStatus();
  }
  if (it->is_array()) {
    for (const json& named : *it) {  // [{"name": ..., "template": ...}]: "default" wins
      const std::string source = StringOr(named, "template", "");
      if (spec->chat_template.empty() || StringOr(named, "name", "") == "default") {
        spec->chat_template = source;
      }
    }
    return absl::OkStatus();
  }
  return FieldError(path, "chat_template", "neither a string nor a list of named templates");
}

}  // namespace

absl::Status ReadPostProcessor(const std::string& path, const json& doc, BpeTokenizerSpec* spec) {
  const auto it = doc.find("post_processor");
  if (it == doc.end()) return absl::OkStatus();
  return ReadProcessor(path, *it, "post_processor", spec);
}

absl::Status ApplyTokenizerConfig(const std::string& path, const json& config,
                                  BpeTokenizerSpec* spec) {
  RETURN_IF_ERROR(ReadSpecialToken(path, config, "bos_token", *spec, &spec->bos_id));
  RETURN_IF_ERROR(ReadSpecialToken(path, config, "eos_token", *spec, &spec->eos_id));
  spec->add_bos = BoolOr(config, "add_bos_token", spec->add_bos);
  spec->add_eos = BoolOr(config, "add_eos_token", spec->add_eos);
  return ReadChatTemplate(path, config, spec);
}

}  // namespace onecard::engine
