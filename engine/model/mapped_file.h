// MappedFile: a whole file mapped read-only into memory (RAII: unmapped and
// closed on destruction). Loaders hand out views into it instead of copying
// tensor bytes; DropMappedPages lets a loader give back what it has read.
// Errors name the file. Tested by
// tests/engine/model/mapped_file_test.cc.
#ifndef ONECARD_ENGINE_MODEL_MAPPED_FILE_H_
#define ONECARD_ENGINE_MODEL_MAPPED_FILE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace onecard::engine {

class MappedFile {
 public:
  // NotFound when the file is absent; InvalidArgument naming the kind for
  // anything but a regular file (a directory, a FIFO: never waits for a
  // writer; engine/common/regular_file.h); Internal for other OS failures.
  // An empty file maps to size() == 0.
  static absl::StatusOr<std::unique_ptr<MappedFile>> Open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::string& path() const { return path_; }
  const uint8_t* data() const { return data_; }  // nullptr when size() == 0
  uint64_t size() const { return size_; }

 private:
  MappedFile(std::string path, const uint8_t* data, uint64_t size)
      : path_(std::move(path)), data_(data), size_(size) {}
  std::string path_;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
};

// Drops the pages of [data, data + size) (bytes of a MappedFile, widened to
// whole pages) from this process's resident set: madvise(MADV_DONTNEED). The
// kernel's page cache keeps the file's pages and a later read faults them
// back in, so the bytes stay readable and unchanged; only the process's RSS
// falls. A loader that reads a checkpoint layer by layer calls it after each
// layer, so that its peak RSS is a layer, not the file.
void DropMappedPages(const uint8_t* data, uint64_t size);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_MODEL_MAPPED_FILE_H_
