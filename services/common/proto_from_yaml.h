// Fills a protobuf message from a parsed YAML tree by reflection, checking
// every field's name and type; the engine of config.h (which owns the
// syntax rules and the file handling). Errors are InvalidArgument with
// "<source>:<line>: <field path>: <problem>" (1-based line of the node).
// Tested by tests/services/common/proto_from_yaml_test.cc.
#ifndef ONECARD_SERVICES_COMMON_PROTO_FROM_YAML_H_
#define ONECARD_SERVICES_COMMON_PROTO_FROM_YAML_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/message.h"
#include "yaml-cpp/yaml.h"

namespace onecard::services {

// Merges `node` (a mapping, or null for "nothing set") into *message.
// `source` names the document in errors.
absl::Status ProtoFromYaml(const YAML::Node& node, absl::string_view source,
                           google::protobuf::Message* message);

}  // namespace onecard::services

#endif  // ONECARD_SERVICES_COMMON_PROTO_FROM_YAML_H_
