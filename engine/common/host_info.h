// What the host offers, for bounds on configured sizes: physical memory and
// the number of cores, read once from the system (sysconf and
// std::thread::hardware_concurrency) and never below 1; and the memory
// available now.
// Tested by tests/engine/common/host_info_test.cc.
#ifndef ONECARD_ENGINE_COMMON_HOST_INFO_H_
#define ONECARD_ENGINE_COMMON_HOST_INFO_H_

#include <cstdint>

namespace onecard {

// Physical memory of the host in bytes.
int64_t HostMemoryBytes();
// Memory the host can give now without swapping, in bytes, read afresh each
// call: /proc/meminfo's MemAvailable (free pages plus the page cache and
// slabs it can reclaim), else sysconf's free pages; 0 when neither is known.
int64_t HostAvailableMemoryBytes();
// Cores (hardware threads) of the host.
int HostCores();
// The most threads a configured pool may have: 4 a core, at most 1024.
int MaxConfiguredThreads();

}  // namespace onecard

#endif  // ONECARD_ENGINE_COMMON_HOST_INFO_H_
