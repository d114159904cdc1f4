// JsonFields: reads the fields of one JSON object (nlohmann::json, parsed
// without exceptions) with typed getters whose errors name the source file
// and the field ("config.json: field 'quantization_config.bits' is not an
// integer: \"4\""); null counts as absent. Used by the HF config parsers
// (hf_config.cc, hf_quant_config.cc) and tested through their tests.
#ifndef ONECARD_ENGINE_MODEL_JSON_FIELDS_H_
#define ONECARD_ENGINE_MODEL_JSON_FIELDS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "engine/common/status_macros.h"
#include "nlohmann/json.hpp"

namespace onecard::engine {

class JsonFields {
 public:
  JsonFields(const nlohmann::json& object, const std::string& source, std::string prefix = "")
      : object_(object), source_(source), prefix_(std::move(prefix)) {}

  const std::string& source() const { return source_; }
  const std::string& prefix() const { return prefix_; }

  const nlohmann::json* Find(const char* field) const {
    auto it = object_.find(field);
    return it == object_.end() || it->is_null() ? nullptr : &*it;
  }

  std::string Message(const char* field, absl::string_view what) const {
    return absl::StrCat(source_, ": field '", prefix_, field, "' ", what);
  }
  absl::Status Error(const char* field, absl::string_view what) const {
    return absl::InvalidArgumentError(Message(field, what));
  }
  absl::Status Unsupported(const char* field, absl::string_view what) const {
    return absl::UnimplementedError(Message(field, what));
  }

  absl::StatusOr<std::optional<int64_t>> OptionalInt(const char* field) const {
    const nlohmann::json* j = Find(field);
    if (j == nullptr) return std::optional<int64_t>();
    if (!j->is_number_integer())
      return Error(field, absl::StrCat("is not an integer: ", j->dump()));
    if (j->is_number_unsigned() && j->get<uint64_t>() > (uint64_t{1} << 62)) {
      return Error(field, absl::StrCat("is too large: ", j->dump()));
    }
    return std::optional<int64_t>(j->get<int64_t>());
  }

  absl::StatusOr<int64_t> Int(const char* field, std::optional<int64_t> fallback = {}) const {
    ASSIGN_OR_RETURN(std::optional<int64_t> v, OptionalInt(field));
    if (v.has_value()) return *v;
    if (fallback.has_value()) return *fallback;
    return Error(field, "is missing");
  }

  absl::StatusOr<float> Float(const char* field, std::optional<float> fallback = {}) const {
    const nlohmann::json* j = Find(field);
    if (j == nullptr) {
      if (fallback.has_value()) return *fallback;
      return Error(field, "is missing");
    }
    if (!j->is_number()) return Error(field, absl::StrCat("is not a number: ", j->dump()));
    return j->get<float>();
  }

  absl::StatusOr<bool> Bool(const char* field, bool fallback) const {
    const nlohmann::json* j = Find(field);
    if (j == nullptr) return fallback;
    if (!j->is_boolean()) return Error(field, absl::StrCat("is not a boolean: ", j->dump()));
    return j->get<bool>();
  }

  absl::StatusOr<std::string> String(const char* field, std::string fallback) const {
    const nlohmann::json* j = Find(field);
    if (j == nullptr) return fallback;
    if (!j->is_string()) return Error(field, absl::StrCat("is not a string: ", j->dump()));
    return j->get<std::string>();
  }

  // A token id: an integer, a list of integers (its first), or absent (-1).
  absl::StatusOr<int32_t> TokenId(const char* field) const {
    const nlohmann::json* j = Find(field);
    if (j == nullptr) return -1;
    const nlohmann::json* id = j;
    if (j->is_array()) {
      if (j->empty()) return -1;
      id = &(*j)[0];
    }
    if (!id->is_number_integer() || id->get<int64_t>() < 0 || id->get<int64_t>() > INT32_MAX) {
      return Error(field, absl::StrCat("is not a token id or list of ids: ", j->dump()));
    }
    return static_cast<int32_t>(id->get<int64_t>());
  }

 private:
  const nlohmann::json& object_;
  const std::string& source_;
  std::string prefix_;
};

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_MODEL_JSON_FIELDS_H_
