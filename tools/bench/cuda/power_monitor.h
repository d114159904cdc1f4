// PowerMonitor: what the board did while a measurement ran - its power, the
// SM clock, the share of samples in which a power or thermal limit held the
// clock down, and the energy used - read through NVML on a background thread.
// NVML comes from the driver (libnvidia-ml.so.1, opened with dlopen: the
// build machine has neither its header nor a stub), so Create() is NotFound
// on a machine without the NVIDIA driver.
//
// Why: batch-128 decode on an H200 runs at the board's 700 W cap, where the
// SM clock drops 15-25 % below its maximum and a step's time follows its
// energy (bench/results/2026-11-29-h200-cuda.md); the decode
// preset reports these next to each figure so that a run says whether it was
// capped. Used by tools/bench/cuda/decode.cc; runs only on the GPU machine.
#ifndef ONECARD_TOOLS_BENCH_CUDA_POWER_MONITOR_H_
#define ONECARD_TOOLS_BENCH_CUDA_POWER_MONITOR_H_

#include <memory>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace onecard::bench {

class PowerMonitor {
 public:
  struct Summary {
    int samples = 0;
    double mean_watts = 0;  // board power, NVML's (averaged) reading
    double mean_sm_mhz = 0;
    double min_sm_mhz = 0;
    double limited_fraction = 0;  // samples with a power or thermal clock limit active
    double joules = 0;            // the energy counter's change from Start to Stop
  };

  // Watches the CUDA device `cuda_device` (found by its PCI bus id), sampling
  // every `period`.
  static absl::StatusOr<std::unique_ptr<PowerMonitor>> Create(int cuda_device,
                                                              absl::Duration period);
  ~PowerMonitor();
  PowerMonitor(const PowerMonitor&) = delete;
  PowerMonitor& operator=(const PowerMonitor&) = delete;

  void Start();    // starts sampling (a running one is restarted)
  Summary Stop();  // stops sampling: what the samples since Start say

 private:
  struct Api;
  struct Sample {
    double watts;
    double sm_mhz;
    bool limited;
  };
  PowerMonitor(std::unique_ptr<Api> api, void* device, absl::Duration period);
  void Run(absl::Notification* stop);

  std::unique_ptr<Api> api_;
  void* device_;  // nvmlDevice_t
  absl::Duration period_;
  unsigned long long energy_start_mj_ = 0;
  std::unique_ptr<absl::Notification> stop_;
  std::thread thread_;
  absl::Mutex mu_;
  std::vector<Sample> samples_ ABSL_GUARDED_BY(mu_);
};

}  // namespace onecard::bench

#endif  // ONECARD_TOOLS_BENCH_CUDA_POWER_MONITOR_H_
