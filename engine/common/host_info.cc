// Host memory and cores (see host_info.h).
#include "engine/common/host_info.h"

#include <unistd.h>

#include <algorithm>
#include <thread>

namespace onecard {

int64_t HostMemoryBytes() {
  static const int64_t bytes = [] {
    const long pages = sysconf(_SC_PHYS_PAGES);
    const long page_size = sysconf(_SC_PAGE_SIZE);
    if (pages <= 0 || page_size <= 0) return int64_t{1};
    return static_cast<int64_t>(pages) * page_size;
  }();
  return bytes;
}

int HostCores() {
  static const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  return cores;
}

int MaxConfiguredThreads() { return std::min(1024, 4 * HostCores()); }

}  // namespace onecard
