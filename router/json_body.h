// JSON request bodies of the HTTP API, read with nlohmann-json: a parse that
// names where a body stopped being JSON (the field whose string was not
// UTF-8, or "body" when no field was open), and typed reads of an object's
// fields that name the field when its value has another type. Null reads as
// absent, as OpenAI's API treats it.
// Tested by tests/router/json_body_test.cc.
#ifndef ONECARD_ROUTER_JSON_BODY_H_
#define ONECARD_ROUTER_JSON_BODY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace onecard::router {

// INVALID_ARGUMENT "<path>: not valid JSON: <parser's reason>", the path of
// the value being read ("messages[0].content") or "body"; an object is
// required at the top ("body: expected a JSON object").
absl::StatusOr<nlohmann::json> ParseJsonBody(absl::string_view body);

// The fields of one JSON object, errors named `prefix` + key
// ("messages[1].role"). The object must outlive the reader.
class JsonObject {
 public:
  JsonObject(const nlohmann::json& object, std::string prefix)
      : object_(object), prefix_(std::move(prefix)) {}

  // Present and not null.
  bool Has(absl::string_view key) const;
  // The value (null when absent), for fields of several possible types.
  const nlohmann::json& Get(absl::string_view key) const;
  std::string Path(absl::string_view key) const { return prefix_ + std::string(key); }

  absl::StatusOr<std::optional<double>> Number(absl::string_view key) const;
  // An integer that fits int32 (JSON numbers with no fraction, e.g. 5 or 5.0).
  absl::StatusOr<std::optional<int32_t>> Int(absl::string_view key) const;
  // Any JSON integer, as the 64 bits of its two's complement.
  absl::StatusOr<std::optional<uint64_t>> Uint64Bits(absl::string_view key) const;
  absl::StatusOr<std::optional<bool>> Bool(absl::string_view key) const;
  absl::StatusOr<std::optional<std::string>> String(absl::string_view key) const;
  // A string or an array of strings (OpenAI's `stop`); `was_list` says which.
  absl::StatusOr<std::vector<std::string>> Strings(absl::string_view key, bool* was_list) const;
  absl::StatusOr<std::vector<int32_t>> Ints(absl::string_view key) const;

 private:
  absl::Status WrongType(absl::string_view key, absl::string_view expected) const;

  const nlohmann::json& object_;
  const std::string prefix_;
};

// An int32 array element of `value`, named `path`, or INVALID_ARGUMENT.
absl::StatusOr<int32_t> JsonInt32(const nlohmann::json& value, const std::string& path);

}  // namespace onecard::router

#endif  // ONECARD_ROUTER_JSON_BODY_H_
