// Config files (YAML or JSON) into typed protobuf messages. See config.h.
#include "services/common/config.h"

#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
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

}  // namespace

absl::Status ParseConfigText(absl::string_view text, absl::string_view source,
                             google::protobuf::Message* out) {
  out->Clear();
  absl::StatusOr<YAML::Node> root = ParseYaml(text, source);
  if (!root.ok()) return root.status();
  return ProtoFromYaml(*root, source, out);
}

absl::Status LoadConfigFile(const std::string& path, google::protobuf::Message* out) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return absl::NotFoundError(absl::StrCat(path, ": cannot open the config file"));
  std::ostringstream contents;
  contents << file.rdbuf();
  if (file.bad()) return absl::DataLossError(absl::StrCat(path, ": read error"));
  return ParseConfigText(contents.str(), path, out);
}

}  // namespace onecard::services
