// Config files (YAML or JSON) into typed protobuf messages. See config.h.
#include "services/common/config.h"

#include <algorithm>
#include <iterator>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "engine/common/log.h"
#include "engine/common/regular_file.h"
#include "onecard/v1/config.pb.h"
#include "services/common/command_line.h"
#include "services/common/proto_from_yaml.h"
#include "yaml-cpp/yaml.h"

namespace onecard::services {
namespace {

// yaml-cpp reports malformed input by throwing; this is the only place that
// calls its throwing parser, and nothing escapes it.
absl::StatusOr<YAML::Node> ParseYaml(absl::string_view text, absl::string_view source) {
  try {
    return YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    const std::string line = e.mark.is_null() ? "" : absl::StrCat(":", e.mark.line + 1);
    return absl::InvalidArgumentError(
        absl::StrCat(source, line, ": not valid YAML or JSON: ", e.msg));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": not valid YAML or JSON: ", e.what()));
  }
}

absl::StatusOr<YAML::Node> ReadYamlFile(const std::string& path) {
  absl::StatusOr<std::string> contents = ReadRegularFile(path);  // never blocks on a FIFO
  if (absl::IsNotFound(contents.status())) {
    return absl::NotFoundError(absl::StrCat(path, ": cannot open the config file"));
  }
  if (!contents.ok()) return contents.status();
  return ParseYaml(*contents, path);
}

// True when the top level of `root` is a mapping with a key naming a field
// of OnecardConfig (proto or lowerCamelCase name): the file is a whole
// cluster config rather than one section.
bool IsWholeConfig(const YAML::Node& root) {
  if (!root.IsMap()) return false;
  const google::protobuf::Descriptor& whole = *v1::OnecardConfig::descriptor();
  for (const auto& entry : root) {
    if (!entry.first.IsScalar()) continue;
    const std::string& key = entry.first.Scalar();
    if (whole.FindFieldByName(key) != nullptr || whole.FindFieldByCamelcaseName(key) != nullptr) {
      return true;
    }
  }
  return false;
}

}  // namespace

absl::Status ParseConfigText(absl::string_view text, absl::string_view source,
                             google::protobuf::Message* out) {
  out->Clear();
  absl::StatusOr<YAML::Node> root = ParseYaml(text, source);
  if (!root.ok()) return root.status();
  return ProtoFromYaml(*root, source, out);
}

absl::Status LoadConfigFile(const std::string& path, google::protobuf::Message* out) {
  out->Clear();
  absl::StatusOr<YAML::Node> root = ReadYamlFile(path);
  if (!root.ok()) return root.status();
  return ProtoFromYaml(*root, path, out);
}

absl::Status LoadServiceConfig(const std::string& path, absl::string_view section,
                               google::protobuf::Message* out) {
  if (path.empty()) return absl::OkStatus();
  absl::StatusOr<YAML::Node> root = ReadYamlFile(path);
  if (!root.ok()) return root.status();
  out->Clear();
  if (!IsWholeConfig(*root)) return ProtoFromYaml(*root, path, out);
  v1::OnecardConfig whole;
  if (absl::Status s = ProtoFromYaml(*root, path, &whole); !s.ok()) return s;
  const google::protobuf::FieldDescriptor* field =
      whole.GetDescriptor()->FindFieldByName(std::string(section));
  if (field == nullptr || field->message_type() != out->GetDescriptor()) {
    return absl::InternalError(absl::StrCat("no config section \"", section, "\" of type ",
                                            out->GetDescriptor()->full_name()));
  }
  out->CopyFrom(whole.GetReflection()->GetMessage(whole, field));
  return absl::OkStatus();
}

absl::StatusOr<int64_t> ParseByteSize(absl::string_view text) {
  const absl::string_view trimmed = absl::StripAsciiWhitespace(text);
  size_t split = 0;
  while (split < trimmed.size() && (absl::ascii_isdigit(trimmed[split]) || trimmed[split] == '.')) {
    ++split;
  }
  const absl::string_view number = trimmed.substr(0, split);
  const absl::string_view unit = absl::StripLeadingAsciiWhitespace(trimmed.substr(split));
  static constexpr struct {
    const char* name;
    double scale;
  } kUnits[] = {{"", 1.0},
                {"B", 1.0},
                {"KiB", 1024.0},
                {"MiB", 1048576.0},
                {"GiB", 1073741824.0},
                {"TiB", 1099511627776.0}};
  double value = 0.0;
  const auto* found = std::find_if(std::begin(kUnits), std::end(kUnits),
                                   [&](const auto& u) { return unit == u.name; });
  if (number.empty() || !absl::SimpleAtod(number, &value) || found == std::end(kUnits)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"", text, "\" is not a size: expected a number with B, KiB, MiB, GiB or TiB"));
  }
  const double bytes = value * found->scale;
  if (bytes >= 9.2e18) {
    return absl::InvalidArgumentError(absl::StrCat("\"", text, "\" is too large"));
  }
  return static_cast<int64_t>(bytes);
}

void ApplyLogConfig(const v1::LogConfig& config) {
  if (!LogLevelFlagGiven()) {
    switch (config.level()) {
      case v1::LOG_LEVEL_DEBUG:
        SetLogLevel(LogLevel::kDebug);
        break;
      case v1::LOG_LEVEL_WARN:
        SetLogLevel(LogLevel::kWarn);
        break;
      case v1::LOG_LEVEL_ERROR:
        SetLogLevel(LogLevel::kError);
        break;
      default:  // unspecified, info
        SetLogLevel(LogLevel::kInfo);
    }
  }
  if (!LogFormatFlagGiven()) {
    SetLogFormat(config.format() == v1::LOG_FORMAT_JSON ? LogFormat::kJson : LogFormat::kText);
  }
}

}  // namespace onecard::services
