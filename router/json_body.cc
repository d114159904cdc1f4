// JSON bodies (see json_body.h). Tested by tests/router/json_body_test.cc.
#include "router/json_body.h"

#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"

namespace onecard::router {
namespace {

using nlohmann::json;

// Follows the path of the value being read while nlohmann-json parses, so
// that a parse error can say where it happened. Builds nothing.
class PathTracker : public nlohmann::json_sax<json> {
 public:
  bool null() override { return Value(); }
  bool boolean(bool) override { return Value(); }
  bool number_integer(number_integer_t) override { return Value(); }
  bool number_unsigned(number_unsigned_t) override { return Value(); }
  bool number_float(number_float_t, const string_t&) override { return Value(); }
  bool string(string_t&) override { return Value(); }
  bool binary(binary_t&) override { return Value(); }
  bool start_object(std::size_t) override { return Open(false); }
  bool start_array(std::size_t) override { return Open(true); }
  bool end_object() override { return Close(); }
  bool end_array() override { return Close(); }
  bool key(string_t& key) override {
    steps_.back().key = key;
    return true;
  }
  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception& e) override {
    std::string what = e.what();
    // "[json.exception.parse_error.101] parse error at line 1, column 9: ..."
    if (const size_t colon = what.find(": "); colon != std::string::npos) {
      what = what.substr(colon + 2);
    }
    error_ = absl::StrCat(Path(), ": not valid JSON: ", what, " (byte ", position, ")");
    return false;
  }
  const std::string& error() const { return error_; }

 private:
  struct Step {
    bool array = false;
    int64_t index = -1;  // arrays: the element being read
    std::string key;     // objects: the member being read
  };
  bool Value() {
    if (!steps_.empty() && steps_.back().array) ++steps_.back().index;
    return true;
  }
  bool Open(bool array) {
    Value();
    steps_.push_back(Step{array});
    return true;
  }
  bool Close() {
    steps_.pop_back();
    return true;
  }
  // The member or element being read, "body" outside every object. In the
  // innermost array that is the element after the last one read (a value is
  // counted once it parsed).
  std::string Path() const {
    std::string path;
    for (size_t i = 0; i < steps_.size(); ++i) {
      const Step& s = steps_[i];
      if (s.array) {
        absl::StrAppend(&path, "[", s.index + (i + 1 == steps_.size() ? 1 : 0), "]");
      } else if (!s.key.empty()) {
        absl::StrAppend(&path, path.empty() ? "" : ".", s.key);
      }
    }
    return path.empty() ? "body" : path;
  }

  std::vector<Step> steps_;
  std::string error_;
};

const char* TypeName(const json& value) {
  switch (value.type()) {
    case json::value_t::string:
      return "a string";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
    case json::value_t::number_float:
      return "a number";
    case json::value_t::array:
      return "an array";
    case json::value_t::object:
      return "an object";
    default:
      return "null";
  }
}

}  // namespace

absl::StatusOr<json> ParseJsonBody(absl::string_view body) {
  json parsed = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) {
    PathTracker tracker;
    json::sax_parse(body.begin(), body.end(), &tracker);
    return absl::InvalidArgumentError(tracker.error().empty() ? "body: not valid JSON"
                                                              : tracker.error());
  }
  if (!parsed.is_object()) return absl::InvalidArgumentError("body: expected a JSON object");
  return parsed;
}

absl::StatusOr<int32_t> JsonInt32(const json& value, const std::string& path) {
  if (!value.is_number()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": expected an integer, got ", TypeName(value)));
  }
  const double d = value.get<double>();  // exact for every int32
  if (std::trunc(d) != d) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": expected an integer, got ", value.dump()));
  }
  if (d < std::numeric_limits<int32_t>::min() || d > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", value.dump(), " is out of range (a 32-bit integer)"));
  }
  return static_cast<int32_t>(d);
}

bool JsonObject::Has(absl::string_view key) const { return !Get(key).is_null(); }

const json& JsonObject::Get(absl::string_view key) const {
  static const json* const kNull = new json();
  auto it = object_.find(std::string(key));
  return it == object_.end() ? *kNull : *it;
}

absl::Status JsonObject::WrongType(absl::string_view key, absl::string_view expected) const {
  return absl::InvalidArgumentError(
      absl::StrCat(Path(key), ": expected ", expected, ", got ", TypeName(Get(key))));
}

absl::StatusOr<std::optional<double>> JsonObject::Number(absl::string_view key) const {
  const json& v = Get(key);
  if (v.is_null()) return std::nullopt;
  if (!v.is_number()) return WrongType(key, "a number");
  return v.get<double>();
}

absl::StatusOr<std::optional<int32_t>> JsonObject::Int(absl::string_view key) const {
  const json& v = Get(key);
  if (v.is_null()) return std::nullopt;
  absl::StatusOr<int32_t> i = JsonInt32(v, Path(key));
  if (!i.ok()) return i.status();
  return *i;
}

absl::StatusOr<std::optional<uint64_t>> JsonObject::Uint64Bits(absl::string_view key) const {
  const json& v = Get(key);
  if (v.is_null()) return std::nullopt;
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer()) return static_cast<uint64_t>(v.get<int64_t>());
  return WrongType(key, "an integer");
}

absl::StatusOr<std::optional<bool>> JsonObject::Bool(absl::string_view key) const {
  const json& v = Get(key);
  if (v.is_null()) return std::nullopt;
  if (!v.is_boolean()) return WrongType(key, "a boolean");
  return v.get<bool>();
}

absl::StatusOr<std::optional<std::string>> JsonObject::String(absl::string_view key) const {
  const json& v = Get(key);
  if (v.is_null()) return std::nullopt;
  if (!v.is_string()) return WrongType(key, "a string");
  return v.get<std::string>();
}

absl::StatusOr<std::vector<std::string>> JsonObject::Strings(absl::string_view key,
                                                             bool* was_list) const {
  const json& v = Get(key);
  *was_list = v.is_array();
  if (v.is_null()) return std::vector<std::string>();
  if (v.is_string()) return std::vector<std::string>{v.get<std::string>()};
  if (!v.is_array()) return WrongType(key, "a string or an array of strings");
  std::vector<std::string> out;
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat(Path(key), "[", i, "]: expected a string, got ", TypeName(v[i])));
    }
    out.push_back(v[i].get<std::string>());
  }
  return out;
}

absl::StatusOr<std::vector<int32_t>> JsonObject::Ints(absl::string_view key) const {
  const json& v = Get(key);
  if (v.is_null()) return std::vector<int32_t>();
  if (!v.is_array()) return WrongType(key, "an array of integers");
  std::vector<int32_t> out;
  for (size_t i = 0; i < v.size(); ++i) {
    absl::StatusOr<int32_t> id = JsonInt32(v[i], absl::StrCat(Path(key), "[", i, "]"));
    if (!id.ok()) return id.status();
    out.push_back(*id);
  }
  return out;
}

}  // namespace onecard::router
