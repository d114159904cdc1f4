// MappedFile: mmap(PROT_READ, MAP_PRIVATE) of a whole file. The descriptor is
// closed right after mapping; the mapping keeps the file alive.
// Tested by tests/engine/model/mapped_file_test.cc.
#include "engine/model/mapped_file.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/common/regular_file.h"

namespace onecard::engine {
namespace {

absl::Status ErrnoError(const std::string& path, const char* what, int err) {
  std::string message = absl::StrCat(path, ": ", what, ": ", std::strerror(err));
  if (err == ENOENT) return absl::NotFoundError(message);
  if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(message);
  return absl::InternalError(message);
}

}  // namespace

absl::StatusOr<std::unique_ptr<MappedFile>> MappedFile::Open(const std::string& path) {
  absl::StatusOr<int> fd = OpenRegularFile(path);  // never blocks on a FIFO
  if (!fd.ok()) return fd.status();
  struct stat st;
  if (::fstat(*fd, &st) != 0) {
    int err = errno;
    ::close(*fd);
    return ErrnoError(path, "cannot stat", err);
  }
  uint64_t size = static_cast<uint64_t>(st.st_size);
  const uint8_t* data = nullptr;
  if (size > 0) {
    void* addr = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, *fd, 0);
    if (addr == MAP_FAILED) {
      int err = errno;
      ::close(*fd);
      return ErrnoError(path, "cannot mmap", err);
    }
    data = static_cast<const uint8_t*>(addr);
  }
  ::close(*fd);
  return std::unique_ptr<MappedFile>(new MappedFile(path, data, size));
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

void DropMappedPages(const uint8_t* data, uint64_t size) {
  if (data == nullptr || size == 0) return;
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(data) & ~(page - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + size + page - 1) & ~(page - 1);
  // Advice only: a failure (an address outside a mapping) changes nothing.
  ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

}  // namespace onecard::engine
