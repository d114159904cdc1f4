// Typed configuration loading: a YAML or JSON file (JSON is read as YAML
// flow style) into a protobuf message of proto/onecard/v1/config.proto.
// Every field is typed: an unknown field, a value of the wrong type or out of
// range, or malformed YAML is InvalidArgument naming the source and the
// field's path, e.g. `worker.yaml:7: kv_cache.block_size: expected an
// integer, got "big"`. Nothing throws (yaml-cpp is wrapped).
// Field names: proto names (snake_case) or lowerCamelCase. Durations:
// "250ms", "1m30s" (absl::ParseDuration) or a number of seconds. Enums: full
// name (PRIORITY_BATCH), short lowercase name (batch) or number. An empty
// (null) value leaves the field unset.
// Tested by tests/services/common/config_test.cc.
#ifndef ONECARD_SERVICES_COMMON_CONFIG_H_
#define ONECARD_SERVICES_COMMON_CONFIG_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/message.h"
#include "onecard/v1/config.pb.h"

namespace onecard::services {

// Parses `text` (YAML or JSON) into *out, which is cleared first. `source`
// names the text in errors (a file name).
absl::Status ParseConfigText(absl::string_view text, absl::string_view source,
                             google::protobuf::Message* out);

// Reads the file at `path` and parses it as above. NotFound when missing.
absl::Status LoadConfigFile(const std::string& path, google::protobuf::Message* out);

// A service's section: the file at `path` holds either a whole
// OnecardConfig (top-level keys worker, router, metrics) or the bare
// section message (*out's type). Which one is decided by the top-level
// keys, so an error inside a section names its full path
// (`cluster.yaml:9: router.tenants[0].max_priority: expected one of ...`).
// A whole config without `section` leaves *out empty. An empty path leaves
// *out as it is.
absl::Status LoadServiceConfig(const std::string& path, absl::string_view section,
                               google::protobuf::Message* out);

// A size in bytes: a number with an optional binary unit, "24GiB",
// "512MiB", "1.5TiB", "4096KiB", "123B" or "123" (bytes); whole bytes after
// the unit is applied. InvalidArgument quoting the text otherwise
// (negative, no number, another unit, above 2^63 bytes).
absl::StatusOr<int64_t> ParseByteSize(absl::string_view text);

// Sets the process's log level and format (engine/common/log.h) from a
// service's `log` section, each only where its flag (--log-level,
// --log-format) was not given; unset fields keep the defaults.
void ApplyLogConfig(const v1::LogConfig& config);

template <typename T>
absl::StatusOr<T> LoadConfig(const std::string& path) {
  T config;
  absl::Status status = LoadConfigFile(path, &config);
  if (!status.ok()) return status;
  return config;
}

template <typename T>
absl::StatusOr<T> LoadServiceConfig(const std::string& path, absl::string_view section) {
  T config;
  absl::Status status = LoadServiceConfig(path, section, &config);
  if (!status.ok()) return status;
  return config;
}

}  // namespace onecard::services

#endif  // ONECARD_SERVICES_COMMON_CONFIG_H_
