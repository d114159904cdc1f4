// Soak: a FaultCluster under mixed load for a long time (30 minutes by
// default): closed-loop users over a mix of short, long and multi-turn
// requests (bench::serve::RunLoad) beside clients that hang up after their
// second token. Every `sample_every` the resident memory, open file
// descriptors and threads of each service process are sampled; the report
// gives each one's first sample after the warm-up, its last, its maximum
// and the drift (last - first), plus the load's counts. Not a CI test:
// scripts/soak.sh runs it.
#ifndef ONECARD_TOOLS_FAULT_SOAK_H_
#define ONECARD_TOOLS_FAULT_SOAK_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tools/fault/fault_cluster.h"

namespace onecard::fault {

struct SoakOptions {
  FaultClusterOptions cluster;
  absl::Duration duration = absl::Minutes(30);
  absl::Duration sample_every = absl::Seconds(10);
  absl::Duration warmup = absl::Minutes(2);  // drift is measured from its end
  int32_t users = 6;
  int32_t cancelling_users = 2;
  std::string samples_csv;  // every sample, when set
};

struct ProcessDrift {
  std::string name;
  int64_t rss_first = 0, rss_last = 0, rss_max = 0;  // bytes
  int64_t fds_first = 0, fds_last = 0, fds_max = 0;
  int64_t threads_first = 0, threads_last = 0, threads_max = 0;
};

struct SoakReport {
  std::vector<ProcessDrift> processes;
  int64_t sent = 0, ok = 0, cancelled_by_clients = 0, other_failures = 0;
  absl::Duration ran;
  std::string Table() const;  // Markdown
};

// /proc/<pid>: open descriptors and threads; -1 when the process is gone.
int64_t OpenFds(int pid);
int64_t Threads(int pid);

absl::StatusOr<SoakReport> RunSoak(const SoakOptions& options);

}  // namespace onecard::fault

#endif  // ONECARD_TOOLS_FAULT_SOAK_H_
