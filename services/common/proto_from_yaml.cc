// A YAML tree into a protobuf message by reflection. See proto_from_yaml.h.
// Nothing here throws: only yaml-cpp's non-throwing accessors are used
// (Type, Scalar, Mark, iteration), never Node::as<T>().
#include "services/common/proto_from_yaml.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <set>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "engine/common/status_macros.h"
#include "google/protobuf/descriptor.h"

namespace onecard::services {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::EnumDescriptor;
using google::protobuf::EnumValueDescriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

// "FinishReason" -> "FINISH_REASON_": the prefix proto style puts on values.
std::string EnumValuePrefix(const EnumDescriptor& type) {
  std::string prefix;
  for (char c : type.name()) {
    if (absl::ascii_isupper(c) && !prefix.empty()) prefix.push_back('_');
    prefix.push_back(absl::ascii_toupper(c));
  }
  return prefix + "_";
}

std::string Describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map:
      return "a mapping";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Null:
      return "nothing";
    default:
      return absl::StrCat("\"", node.Scalar(), "\"");
  }
}

class Walker {
 public:
  explicit Walker(absl::string_view source) : source_(source) {}

  absl::Status FillMessage(const YAML::Node& node, const std::string& path, Message* msg);

 private:
  absl::Status Error(const YAML::Node& node, const std::string& path,
                     absl::string_view problem) const {
    const YAML::Mark mark = node.Mark();
    const std::string line = mark.is_null() ? "" : absl::StrCat(":", mark.line + 1);
    return absl::InvalidArgumentError(
        absl::StrCat(source_, line, ": ", path.empty() ? "(top level)" : path, ": ", problem));
  }
  absl::Status Expected(const YAML::Node& node, const std::string& path,
                        absl::string_view what) const {
    return Error(node, path, absl::StrCat("expected ", what, ", got ", Describe(node)));
  }

  absl::Status FillField(const YAML::Node& node, const std::string& path,
                         const FieldDescriptor* field, Message* msg);
  absl::Status FillRepeated(const YAML::Node& node, const std::string& path,
                            const FieldDescriptor* field, Message* msg);
  absl::Status FillMap(const YAML::Node& node, const std::string& path,
                       const FieldDescriptor* field, Message* msg);
  absl::Status FillDuration(const YAML::Node& node, const std::string& path, Message* msg);
  absl::Status StoreScalar(const YAML::Node& node, const std::string& path,
                           const FieldDescriptor* field, Message* msg);
  absl::Status StoreNumber(const YAML::Node& node, const std::string& path,
                           const FieldDescriptor* field, Message* msg);
  absl::Status StoreReal(const YAML::Node& node, const std::string& path,
                         const FieldDescriptor* field, Message* msg);
  absl::StatusOr<const EnumValueDescriptor*> ParseEnum(const YAML::Node& node,
                                                       const std::string& path,
                                                       const EnumDescriptor& type) const;
  const FieldDescriptor* FindField(const Descriptor& type, const std::string& key) const;

  std::string source_;
};

const FieldDescriptor* Walker::FindField(const Descriptor& type, const std::string& key) const {
  if (const FieldDescriptor* f = type.FindFieldByName(key)) return f;
  return type.FindFieldByCamelcaseName(key);
}

absl::Status Walker::FillMessage(const YAML::Node& node, const std::string& path, Message* msg) {
  if (node.IsNull()) return absl::OkStatus();
  if (!node.IsMap()) return Expected(node, path, "a mapping");
  const Descriptor& type = *msg->GetDescriptor();
  std::set<int> seen;
  for (const auto& entry : node) {
    const YAML::Node& key = entry.first;
    if (!key.IsScalar()) return Expected(key, path, "a field name");
    const std::string child = path.empty() ? key.Scalar() : absl::StrCat(path, ".", key.Scalar());
    const FieldDescriptor* field = FindField(type, key.Scalar());
    if (field == nullptr) {
      std::vector<std::string> known;
      for (int i = 0; i < type.field_count(); ++i) known.push_back(type.field(i)->name());
      return Error(key, child,
                   absl::StrCat("unknown field (known: ", absl::StrJoin(known, ", "), ")"));
    }
    if (!seen.insert(field->number()).second) return Error(key, child, "set twice");
    const auto* oneof = field->real_containing_oneof();
    if (oneof != nullptr && msg->GetReflection()->HasOneof(*msg, oneof) && !entry.second.IsNull()) {
      return Error(key, child,
                   absl::StrCat("only one field of \"", oneof->name(), "\" may be set"));
    }
    RETURN_IF_ERROR(FillField(entry.second, child, field, msg));
  }
  return absl::OkStatus();
}

absl::Status Walker::FillField(const YAML::Node& node, const std::string& path,
                               const FieldDescriptor* field, Message* msg) {
  if (node.IsNull()) return absl::OkStatus();
  if (field->is_map()) return FillMap(node, path, field, msg);
  if (field->is_repeated()) return FillRepeated(node, path, field, msg);
  if (field->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE) {
    return StoreScalar(node, path, field, msg);
  }
  Message* child = msg->GetReflection()->MutableMessage(msg, field);
  if (field->message_type()->full_name() == "google.protobuf.Duration") {
    return FillDuration(node, path, child);
  }
  return FillMessage(node, path, child);
}

absl::Status Walker::FillRepeated(const YAML::Node& node, const std::string& path,
                                  const FieldDescriptor* field, Message* msg) {
  if (!node.IsSequence()) return Expected(node, path, "a list");
  size_t i = 0;
  for (const YAML::Node& element : node) {
    const std::string child = absl::StrCat(path, "[", i++, "]");
    if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (element.IsNull()) return Expected(element, child, "a value");
      Message* added = msg->GetReflection()->AddMessage(msg, field);
      if (field->message_type()->full_name() == "google.protobuf.Duration") {
        RETURN_IF_ERROR(FillDuration(element, child, added));
      } else {
        RETURN_IF_ERROR(FillMessage(element, child, added));
      }
    } else {
      RETURN_IF_ERROR(StoreScalar(element, child, field, msg));
    }
  }
  return absl::OkStatus();
}

absl::Status Walker::FillMap(const YAML::Node& node, const std::string& path,
                             const FieldDescriptor* field, Message* msg) {
  if (!node.IsMap()) return Expected(node, path, "a mapping");
  const Descriptor& entry_type = *field->message_type();
  for (const auto& kv : node) {
    const std::string child = absl::StrCat(path, ".", kv.first.Scalar());
    Message* entry = msg->GetReflection()->AddMessage(msg, field);
    RETURN_IF_ERROR(StoreScalar(kv.first, child, entry_type.map_key(), entry));
    if (kv.second.IsNull()) return Expected(kv.second, child, "a value");
    RETURN_IF_ERROR(FillField(kv.second, child, entry_type.map_value(), entry));
  }
  return absl::OkStatus();
}

absl::Status Walker::FillDuration(const YAML::Node& node, const std::string& path, Message* msg) {
  constexpr char kWhat[] = "a duration (\"250ms\", \"1m30s\" or seconds)";
  if (!node.IsScalar()) return Expected(node, path, kWhat);
  absl::Duration value;
  double seconds = 0;
  if (absl::SimpleAtod(node.Scalar(), &seconds) && std::isfinite(seconds)) {
    value = absl::Seconds(seconds);
  } else if (!absl::ParseDuration(node.Scalar(), &value) || value == absl::InfiniteDuration()) {
    return Expected(node, path, kWhat);
  }
  if (value < absl::ZeroDuration()) return Error(node, path, "must not be negative");
  const int64_t whole = absl::IDivDuration(value, absl::Seconds(1), &value);
  const Descriptor& type = *msg->GetDescriptor();
  const Reflection& r = *msg->GetReflection();
  r.SetInt64(msg, type.FindFieldByName("seconds"), whole);
  r.SetInt32(msg, type.FindFieldByName("nanos"),
             static_cast<int32_t>(absl::ToInt64Nanoseconds(value)));
  return absl::OkStatus();
}

absl::StatusOr<const EnumValueDescriptor*> Walker::ParseEnum(const YAML::Node& node,
                                                             const std::string& path,
                                                             const EnumDescriptor& type) const {
  const std::string& text = node.Scalar();
  if (const EnumValueDescriptor* v = type.FindValueByName(text)) return v;
  const std::string prefix = EnumValuePrefix(type);
  std::vector<std::string> names;
  for (int i = 0; i < type.value_count(); ++i) {
    const std::string& full = type.value(i)->name();
    std::string short_name =
        absl::AsciiStrToLower(full.rfind(prefix, 0) == 0 ? full.substr(prefix.size()) : full);
    if (short_name == absl::AsciiStrToLower(text)) return type.value(i);
    names.push_back(std::move(short_name));
  }
  int number = 0;
  if (absl::SimpleAtoi(text, &number)) {
    if (const EnumValueDescriptor* v = type.FindValueByNumber(number)) return v;
  }
  return Expected(node, path, absl::StrCat("one of ", absl::StrJoin(names, ", ")));
}

absl::Status Walker::StoreScalar(const YAML::Node& node, const std::string& path,
                                 const FieldDescriptor* field, Message* msg) {
  if (!node.IsScalar()) return Expected(node, path, "a single value");
  const Reflection& r = *msg->GetReflection();
  const bool rep = field->is_repeated();
  const std::string& text = node.Scalar();
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_STRING:
      rep ? r.AddString(msg, field, text) : r.SetString(msg, field, text);
      return absl::OkStatus();
    case FieldDescriptor::CPPTYPE_BOOL: {
      const std::string lower = absl::AsciiStrToLower(text);
      if (lower != "true" && lower != "false") return Expected(node, path, "true or false");
      rep ? r.AddBool(msg, field, lower == "true") : r.SetBool(msg, field, lower == "true");
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_ENUM: {
      ASSIGN_OR_RETURN(const EnumValueDescriptor* v, ParseEnum(node, path, *field->enum_type()));
      rep ? r.AddEnum(msg, field, v) : r.SetEnum(msg, field, v);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_MESSAGE:
      return Expected(node, path, "a mapping");
    default:
      return StoreNumber(node, path, field, msg);
  }
}

absl::Status Walker::StoreNumber(const YAML::Node& node, const std::string& path,
                                 const FieldDescriptor* field, Message* msg) {
  const Reflection& r = *msg->GetReflection();
  const bool rep = field->is_repeated();
  const std::string& text = node.Scalar();
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32: {
      int32_t v = 0;
      if (!absl::SimpleAtoi(text, &v)) return Expected(node, path, "a 32-bit integer");
      rep ? r.AddInt32(msg, field, v) : r.SetInt32(msg, field, v);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_INT64: {
      int64_t v = 0;
      if (!absl::SimpleAtoi(text, &v)) return Expected(node, path, "a 64-bit integer");
      rep ? r.AddInt64(msg, field, v) : r.SetInt64(msg, field, v);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_UINT32: {
      uint32_t v = 0;
      if (!absl::SimpleAtoi(text, &v)) return Expected(node, path, "a non-negative 32-bit integer");
      rep ? r.AddUInt32(msg, field, v) : r.SetUInt32(msg, field, v);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_UINT64: {
      uint64_t v = 0;
      if (!absl::SimpleAtoi(text, &v)) return Expected(node, path, "a non-negative 64-bit integer");
      rep ? r.AddUInt64(msg, field, v) : r.SetUInt64(msg, field, v);
      return absl::OkStatus();
    }
    default:
      return StoreReal(node, path, field, msg);
  }
}

absl::Status Walker::StoreReal(const YAML::Node& node, const std::string& path,
                               const FieldDescriptor* field, Message* msg) {
  const Reflection& r = *msg->GetReflection();
  const bool rep = field->is_repeated();
  double v = 0;
  const bool is_float = field->cpp_type() == FieldDescriptor::CPPTYPE_FLOAT;
  if (!absl::SimpleAtod(node.Scalar(), &v) || !std::isfinite(v) ||
      (is_float && std::abs(v) > std::numeric_limits<float>::max())) {
    return Expected(node, path, "a finite number");
  }
  if (is_float) {
    rep ? r.AddFloat(msg, field, static_cast<float>(v))
        : r.SetFloat(msg, field, static_cast<float>(v));
  } else {
    rep ? r.AddDouble(msg, field, v) : r.SetDouble(msg, field, v);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ProtoFromYaml(const YAML::Node& node, absl::string_view source, Message* message) {
  return Walker(source).FillMessage(node, "", message);
}

}  // namespace onecard::services
