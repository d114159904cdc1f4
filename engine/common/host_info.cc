// Host memory and cores (see host_info.h).
#include "engine/common/host_info.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <string>
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

int64_t HostAvailableMemoryBytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key, unit;
  int64_t value = 0;
  while (meminfo >> key >> value) {
    std::getline(meminfo, unit);  // " kB"
    if (key == "MemAvailable:") return value * 1024;
  }
  const long pages = sysconf(_SC_AVPHYS_PAGES);
  const long page_size = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0) return 0;
  return static_cast<int64_t>(pages) * page_size;
}

int HostCores() {
  static const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  return cores;
}

int MaxConfiguredThreads() { return std::min(1024, 4 * HostCores()); }

}  // namespace onecard
