// The resident memory of a process on Linux: VmRSS of /proc/<pid>/status, in
// bytes. Used by cpu-decode (its own process) and the serve benchmarks'
// local workers (tools/bench/serve/local_cluster.h).
// Tested through tests/integration/router_*_test.cc and cpu-decode's records.
#ifndef ONECARD_TOOLS_BENCH_PROCESS_MEMORY_H_
#define ONECARD_TOOLS_BENCH_PROCESS_MEMORY_H_

#include <cstdint>

namespace onecard::bench {

// pid 0 is this process. 0 when the process is gone or the line is missing.
int64_t ResidentBytes(int pid = 0);

}  // namespace onecard::bench

#endif  // ONECARD_TOOLS_BENCH_PROCESS_MEMORY_H_
