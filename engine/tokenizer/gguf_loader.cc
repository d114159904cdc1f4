// Tokenizer::FromGguf and BpeTokenizerSpecFromGguf: read llama.cpp's
// tokenizer.ggml.* metadata (model "gpt2": byte-level BPE) into a
// BpeTokenizerSpec. Control and user-defined
// tokens (token_type 3 and 4) become special added tokens matched whole in
// the input. Tested by tests/engine/tokenizer/gguf_loader_test.cc (SmolLM2).
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/common/log.h"
#include "engine/common/status_macros.h"
#include "engine/model/gguf.h"
#include "engine/tokenizer/bpe_tokenizer.h"
#include "engine/tokenizer/pre_tokenizer.h"
#include "engine/tokenizer/tokenizer.h"

namespace onecard::engine {
namespace {

constexpr int64_t kTokenTypeControl = 3;      // llama.cpp LLAMA_TOKEN_TYPE_CONTROL
constexpr int64_t kTokenTypeUserDefined = 4;  // LLAMA_TOKEN_TYPE_USER_DEFINED

absl::Status FieldError(const GgufFile& gguf, const std::string& key, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(gguf.path(), ": ", key, ": ", what));
}

// Prefixes the file name to a metadata getter's error unless it has it.
template <typename T>
absl::StatusOr<T> WithPath(const GgufFile& gguf, absl::StatusOr<T> value) {
  if (value.ok() || absl::StrContains(value.status().message(), gguf.path())) return value;
  return absl::Status(value.status().code(),
                      absl::StrCat(gguf.path(), ": ", value.status().message()));
}

// An optional integer id: -1 when the key is absent.
absl::StatusOr<int32_t> OptionalId(const GgufFile& gguf, const std::string& key) {
  if (gguf.FindMetadata(key) == nullptr) return -1;
  ASSIGN_OR_RETURN(const int64_t id, WithPath(gguf, gguf.GetInt(key)));
  if (id < -1 || id >= (int64_t{1} << 31)) return FieldError(gguf, key, "not a token id");
  return static_cast<int32_t>(id);
}

absl::Status ReadMerges(const GgufFile& gguf, BpeTokenizerSpec* spec) {
  const std::string key = "tokenizer.ggml.merges";
  ASSIGN_OR_RETURN(const std::vector<std::string> merges, WithPath(gguf, gguf.GetStringArray(key)));
  spec->merges.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const std::string& m = merges[i];
    const size_t space = m.find(' ');
    if (space == std::string::npos || space == 0 || space + 1 == m.size() ||
        m.find(' ', space + 1) != std::string::npos) {
      return FieldError(gguf, absl::StrCat(key, "[", i, "]"),
                        absl::StrCat("'", m, "' is not two tokens split by one space"));
    }
    spec->merges.emplace_back(m.substr(0, space), m.substr(space + 1));
  }
  return absl::OkStatus();
}

// Control / user-defined tokens -> added tokens (special, matched whole).
absl::Status ReadTokenTypes(const GgufFile& gguf, BpeTokenizerSpec* spec) {
  const std::string key = "tokenizer.ggml.token_type";
  if (gguf.FindMetadata(key) == nullptr) return absl::OkStatus();
  ASSIGN_OR_RETURN(const std::vector<int64_t> types, WithPath(gguf, gguf.GetIntArray(key)));
  if (types.size() != spec->tokens.size()) {
    return FieldError(gguf, key,
                      absl::StrCat(types.size(), " entries for ", spec->tokens.size(),
                                   " tokens in tokenizer.ggml.tokens"));
  }
  for (size_t id = 0; id < types.size(); ++id) {
    if (types[id] != kTokenTypeControl && types[id] != kTokenTypeUserDefined) continue;
    if (spec->tokens[id].empty()) continue;
    AddedToken t;
    t.id = static_cast<int32_t>(id);
    t.content = spec->tokens[id];
    t.special = true;
    spec->added_tokens.push_back(std::move(t));
  }
  return absl::OkStatus();
}

absl::Status ReadPreTokenizer(const GgufFile& gguf, BpeTokenizerSpec* spec) {
  const std::string key = "tokenizer.ggml.pre";
  if (gguf.FindMetadata(key) == nullptr) {
    Log(LogLevel::kWarn, "tokenizer", "%s: no %s; using the GPT-2 pre-tokenizer", gguf.path(), key);
    spec->pre_tokenizer = PreTokenizerKind::kGpt2;
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(const std::string pre, WithPath(gguf, gguf.GetString(key)));
  auto kind = PreTokenizerKindFromGgufName(pre);
  if (!kind.ok())
    return absl::InvalidArgumentError(absl::StrCat(gguf.path(), ": ", kind.status().message()));
  spec->pre_tokenizer = *kind;
  // llama.cpp encodes Llama-3 words found whole in the vocabulary directly
  // (HF: model.ignore_merges).
  spec->ignore_merges = *kind == PreTokenizerKind::kLlama3;
  return absl::OkStatus();
}

absl::Status ReadSpecialIds(const GgufFile& gguf, BpeTokenizerSpec* spec) {
  ASSIGN_OR_RETURN(spec->bos_id, OptionalId(gguf, "tokenizer.ggml.bos_token_id"));
  ASSIGN_OR_RETURN(spec->eos_id, OptionalId(gguf, "tokenizer.ggml.eos_token_id"));
  ASSIGN_OR_RETURN(const int32_t pad_id, OptionalId(gguf, "tokenizer.ggml.padding_token_id"));
  const auto n = static_cast<int32_t>(spec->tokens.size());
  for (const auto& [key, id] : {std::pair<const char*, int32_t>{"bos_token_id", spec->bos_id},
                                {"eos_token_id", spec->eos_id},
                                {"padding_token_id", pad_id}}) {
    if (id >= n) {
      return FieldError(gguf, absl::StrCat("tokenizer.ggml.", key),
                        absl::StrCat(id, " is outside the vocabulary of ", n));
    }
  }
  if (gguf.FindMetadata("tokenizer.ggml.add_bos_token") != nullptr) {
    ASSIGN_OR_RETURN(spec->add_bos, WithPath(gguf, gguf.GetBool("tokenizer.ggml.add_bos_token")));
  }
  if (gguf.FindMetadata("tokenizer.ggml.add_eos_token") != nullptr) {
    ASSIGN_OR_RETURN(spec->add_eos, WithPath(gguf, gguf.GetBool("tokenizer.ggml.add_eos_token")));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<BpeTokenizerSpec> BpeTokenizerSpecFromGguf(const GgufFile& gguf) {
  ASSIGN_OR_RETURN(const std::string model, WithPath(gguf, gguf.GetString("tokenizer.ggml.model")));
  if (model != "gpt2") {
    return FieldError(
        gguf, "tokenizer.ggml.model",
        absl::StrCat("'", model, "' is not supported (supported: gpt2, byte-level BPE)"));
  }
  BpeTokenizerSpec spec;
  spec.source = gguf.path();
  spec.merges_field = "tokenizer.ggml.merges";
  ASSIGN_OR_RETURN(spec.tokens, WithPath(gguf, gguf.GetStringArray("tokenizer.ggml.tokens")));
  RETURN_IF_ERROR(ReadMerges(gguf, &spec));
  RETURN_IF_ERROR(ReadTokenTypes(gguf, &spec));
  RETURN_IF_ERROR(ReadPreTokenizer(gguf, &spec));
  RETURN_IF_ERROR(ReadSpecialIds(gguf, &spec));
  if (gguf.FindMetadata("tokenizer.chat_template") != nullptr) {
    ASSIGN_OR_RETURN(spec.chat_template, WithPath(gguf, gguf.GetString("tokenizer.chat_template")));
  }
  return spec;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromGguf(const GgufFile& gguf) {
  ASSIGN_OR_RETURN(BpeTokenizerSpec spec, BpeTokenizerSpecFromGguf(gguf));
  return CreateBpeTokenizer(std::move(spec));
}

}  // namespace onecard::engine
