// Files that loaders and configs read must be regular files: opening a FIFO
// for reading blocks until a writer appears (`onecard inspect` on a FIFO
// hung), and a directory, device or socket holds no model. Each file is
// opened without blocking and checked with fstat before anything is read,
// so there is no window in which another kind of file can be swapped in.
// Errors name the file and what it is ("m.gguf: a FIFO, not a regular file").
// Tested by tests/engine/common/regular_file_test.cc.
#ifndef ONECARD_ENGINE_COMMON_REGULAR_FILE_H_
#define ONECARD_ENGINE_COMMON_REGULAR_FILE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace onecard {

// A descriptor of the regular file at `path`, opened read-only without
// blocking; the caller closes it. NotFound when absent, PermissionDenied when
// not readable, InvalidArgument naming the kind when not a regular file.
absl::StatusOr<int> OpenRegularFile(const std::string& path);

// The whole contents of the regular file at `path` (errors as above).
absl::StatusOr<std::string> ReadRegularFile(const std::string& path);

}  // namespace onecard

#endif  // ONECARD_ENGINE_COMMON_REGULAR_FILE_H_
