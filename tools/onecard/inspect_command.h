// The `inspect MODEL` subcommand of the onecard CLI: opens a checkpoint (a
// .gguf file or an HF folder) and prints its ModelConfig, then every tensor's
// name, dtype, shape and size in bytes, then totals (tensors, parameters,
// bytes, and a line per dtype). Tested by
// tests/tools/onecard/inspect_command_test.cc.
#ifndef ONECARD_TOOLS_ONECARD_INSPECT_COMMAND_H_
#define ONECARD_TOOLS_ONECARD_INSPECT_COMMAND_H_

#include <ostream>
#include <string>

#include "absl/status/status.h"

namespace onecard::tools {

// Errors are those of engine::OpenCheckpoint (they name the file and field).
absl::Status RunInspect(const std::string& model_path, std::ostream& out);

}  // namespace onecard::tools

#endif  // ONECARD_TOOLS_ONECARD_INSPECT_COMMAND_H_
