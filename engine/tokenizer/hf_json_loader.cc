// Tokenizer::FromHfJson: reads an HF tokenizer.json (byte-level BPE) and the
// optional tokenizer_config.json into a BpeTokenizerSpec. nlohmann::json is
// used without exceptions (parse(..., nullptr, false) and type checks before
// every access). Tested by tests/engine/tokenizer/hf_json_loader_test.cc.
#include <cctype>
#include <nlohmann/json.hpp>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/common/regular_file.h"
#include "engine/common/status_macros.h"
#include "engine/tokenizer/bpe_tokenizer.h"
#include "engine/tokenizer/byte_level.h"
#include "engine/tokenizer/hf_json_config.h"
#include "engine/tokenizer/tokenizer.h"

namespace onecard::engine {
namespace {

using json = nlohmann::json;

absl::StatusOr<json> ReadJson(const std::string& path) {
  absl::StatusOr<std::string> text = ReadRegularFile(path);
  if (!text.ok()) return text.status();
  json doc = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return absl::InvalidArgumentError(absl::StrCat(path, ": not valid JSON"));
  if (!doc.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": the top level is not an object"));
  }
  return doc;
}

absl::Status FieldError(const std::string& path, const std::string& field,
                        const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", field, ": ", what));
}

// model.vocab -> tokens by id.
absl::Status ReadVocab(const std::string& path, const json& model, BpeTokenizerSpec* spec) {
  const auto it = model.find("vocab");
  if (it == model.end() || !it->is_object()) {
    return FieldError(path, "model.vocab", "missing or not an object");
  }
  constexpr int64_t kMaxVocab = 1 << 24;
  for (const auto& [token, id] : it->items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= kMaxVocab) {
      return FieldError(path, absl::StrCat("model.vocab[\"", token, "\"]"),
                        "not an id in [0, 2^24)");
    }
    const auto index = static_cast<size_t>(id.get<int64_t>());
    if (index >= spec->tokens.size()) spec->tokens.resize(index + 1);
    if (!spec->tokens[index].empty()) {
      return FieldError(path, absl::StrCat("model.vocab[\"", token, "\"]"),
                        absl::StrCat("id ", index, " is also '", spec->tokens[index], "'"));
    }
    spec->tokens[index] = token;
  }
  return absl::OkStatus();
}

// model.merges: ["a b", ...] (older files) or [["a", "b"], ...].
absl::Status ReadMerges(const std::string& path, const json& model, BpeTokenizerSpec* spec) {
  const auto it = model.find("merges");
  if (it == model.end() || !it->is_array()) {
    return FieldError(path, "model.merges", "missing or not an array");
  }
  spec->merges.reserve(it->size());
  for (size_t i = 0; i < it->size(); ++i) {
    const json& m = (*it)[i];
    if (m.is_string()) {
      const std::string& s = m.get_ref<const std::string&>();
      const size_t space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos) {
        return FieldError(path, absl::StrCat("model.merges[", i, "]"),
                          absl::StrCat("'", s, "' is not two tokens split by one space"));
      }
      spec->merges.emplace_back(s.substr(0, space), s.substr(space + 1));
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      spec->merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    } else {
      return FieldError(path, absl::StrCat("model.merges[", i, "]"),
                        "neither \"a b\" nor [\"a\", \"b\"]");
    }
  }
  return absl::OkStatus();
}

// The model options onecard supports (plain byte-level BPE).
absl::Status CheckModelOptions(const std::string& path, const json& model, BpeTokenizerSpec* spec) {
  const auto type = model.find("type");
  if (type != model.end() && (!type->is_string() || *type != "BPE")) {
    return FieldError(path, "model.type",
                      absl::StrCat(type->dump(), " is not supported (supported: \"BPE\")"));
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const auto it = model.find(key);
    if (it != model.end() && !it->is_null() &&
        !(it->is_string() && it->get_ref<const std::string&>().empty())) {
      return FieldError(path, absl::StrCat("model.", key), "must be empty for byte-level BPE");
    }
  }
  const auto dropout = model.find("dropout");
  if (dropout != model.end() && !dropout->is_null()) {
    return FieldError(path, "model.dropout", "BPE dropout is not supported");
  }
  const auto ignore = model.find("ignore_merges");
  if (ignore != model.end() && !ignore->is_null()) {
    if (!ignore->is_boolean()) return FieldError(path, "model.ignore_merges", "not a boolean");
    spec->ignore_merges = ignore->get<bool>();
  }
  return absl::OkStatus();
}

// byte_fallback: a byte whose byte-level symbol is not in the vocabulary
// becomes its "<0xXX>" token instead of being dropped. Where no such byte
// has that token (SmolLM2's and Qwen2's vocabularies have none) the option
// changes nothing and the file loads: transformers sets it when it converts a
// GGUF's tokenizer. Refused where it would emit a token, naming the byte.
absl::Status CheckByteFallback(const std::string& path, const json& model,
                               const BpeTokenizerSpec& spec) {
  const auto fallback = model.find("byte_fallback");
  if (fallback == model.end() || !fallback->is_boolean() || !fallback->get<bool>()) {
    return absl::OkStatus();
  }
  absl::flat_hash_set<std::string_view> vocab(spec.tokens.begin(), spec.tokens.end());
  for (int b = 0; b < 256; ++b) {
    const std::string symbol = BytesToByteLevel(std::string(1, static_cast<char>(b)));
    const std::string byte_token = absl::StrCat("<0x", absl::Hex(b, absl::kZeroPad2), ">");
    std::string upper = byte_token;
    for (char& c : upper) c = c == 'x' ? c : static_cast<char>(std::toupper(c));
    if (!vocab.contains(symbol) && vocab.contains(upper)) {
      return FieldError(path, "model.byte_fallback",
                        absl::StrCat("true, and byte ", upper, " has a fallback token: byte ",
                                     "fallback is not supported"));
    }
  }
  return absl::OkStatus();
}

bool BoolOr(const json& obj, const char* key, bool fallback) {
  const auto it = obj.find(key);
  return it != obj.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

absl::Status ReadAddedTokens(const std::string& path, const json& doc, BpeTokenizerSpec* spec) {
  const auto it = doc.find("added_tokens");
  if (it == doc.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_array()) return FieldError(path, "added_tokens", "not an array");
  for (size_t i = 0; i < it->size(); ++i) {
    const json& t = (*it)[i];
    const std::string field = absl::StrCat("added_tokens[", i, "]");
    if (!t.is_object()) return FieldError(path, field, "not an object");
    const auto id = t.find("id");
    const auto content = t.find("content");
    if (id == t.end() || !id->is_number_integer() || id->get<int64_t>() < 0 ||
        id->get<int64_t>() >= (1 << 24)) {
      return FieldError(path, field + ".id", "missing or not an id in [0, 2^24)");
    }
    if (content == t.end() || !content->is_string() ||
        content->get_ref<const std::string&>().empty()) {
      return FieldError(path, field + ".content", "missing or not a non-empty string");
    }
    AddedToken token;
    token.id = static_cast<int32_t>(id->get<int64_t>());
    token.content = content->get<std::string>();
    token.special = BoolOr(t, "special", false);
    token.single_word = BoolOr(t, "single_word", false);
    token.lstrip = BoolOr(t, "lstrip", false);
    token.rstrip = BoolOr(t, "rstrip", false);
    token.normalized = BoolOr(t, "normalized", !token.special);
    spec->added_tokens.push_back(std::move(token));
  }
  return absl::OkStatus();
}

// normalizer: null or NFC (Qwen2); decoder: null or ByteLevel.
absl::Status ReadNormalizerAndDecoder(const std::string& path, const json& doc,
                                      BpeTokenizerSpec* spec) {
  const auto norm = doc.find("normalizer");
  if (norm != doc.end() && !norm->is_null()) {
    const auto type = norm->is_object() ? norm->find("type") : norm->end();
    const bool nfc = type != norm->end() && *type == "NFC";
    if (!nfc) {
      return FieldError(path, "normalizer",
                        absl::StrCat("type ", type == norm->end() ? "?" : type->dump(),
                                     " is not supported (supported: null, \"NFC\")"));
    }
    if (!NormalizerAvailable(NormalizerKind::kNfc)) {
      return FieldError(path, "normalizer",
                        "NFC needs ICU, which this build lacks (install libicu-dev, rebuild)");
    }
    spec->normalizer = NormalizerKind::kNfc;
  }
  const auto dec = doc.find("decoder");
  if (dec != doc.end() && !dec->is_null()) {
    const auto type = dec->find("type");
    if (type == dec->end() || *type != "ByteLevel") {
      return FieldError(path, "decoder.type",
                        absl::StrCat(type == dec->end() ? "missing" : type->dump(),
                                     " is not supported (supported: \"ByteLevel\")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromHfJson(
    const std::string& tokenizer_json_path, const std::string& tokenizer_config_path) {
  const std::string& path = tokenizer_json_path;
  ASSIGN_OR_RETURN(const json doc, ReadJson(path));
  const auto model = doc.find("model");
  if (model == doc.end() || !model->is_object()) {
    return FieldError(path, "model", "missing or not an object");
  }
  BpeTokenizerSpec spec;
  spec.source = path;
  spec.merges_field = "model.merges";
  RETURN_IF_ERROR(CheckModelOptions(path, *model, &spec));
  RETURN_IF_ERROR(ReadVocab(path, *model, &spec));
  RETURN_IF_ERROR(CheckByteFallback(path, *model, spec));
  RETURN_IF_ERROR(ReadMerges(path, *model, &spec));
  RETURN_IF_ERROR(ReadAddedTokens(path, doc, &spec));
  RETURN_IF_ERROR(ReadNormalizerAndDecoder(path, doc, &spec));
  ASSIGN_OR_RETURN(spec.pre_tokenizer, PreTokenizerKindFromHfJson(path, doc));
  RETURN_IF_ERROR(ReadPostProcessor(path, doc, &spec));
  if (!tokenizer_config_path.empty()) {
    ASSIGN_OR_RETURN(const json config, ReadJson(tokenizer_config_path));
    RETURN_IF_ERROR(ApplyTokenizerConfig(tokenizer_config_path, config, &spec));
  }
  return CreateBpeTokenizer(std::move(spec));
}

}  // namespace onecard::engine
