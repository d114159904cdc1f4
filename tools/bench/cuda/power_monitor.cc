#include "tools/bench/cuda/power_monitor.h"

#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace onecard::bench {
namespace {

// nvml.h's values.
constexpr int kNvmlSuccess = 0;
constexpr int kNvmlClockSm = 1;
// SwPowerCap, HwSlowdown, SwThermalSlowdown, HwThermalSlowdown, HwPowerBrakeSlowdown.
constexpr unsigned long long kLimitReasons = 0x4 | 0x8 | 0x20 | 0x40 | 0x80;

}  // namespace

// The NVML entry points used (nvml.h's signatures, the device as void*).
struct PowerMonitor::Api {
  int (*init)() = nullptr;
  int (*by_pci_bus_id)(const char*, void**) = nullptr;
  int (*power_mw)(void*, unsigned*) = nullptr;
  int (*clock_mhz)(void*, int, unsigned*) = nullptr;
  int (*reasons)(void*, unsigned long long*) = nullptr;
  int (*energy_mj)(void*, unsigned long long*) = nullptr;

  template <typename Fn>
  static bool Symbol(void* lib, const char* name, Fn* out) {
    *out = reinterpret_cast<Fn>(dlsym(lib, name));
    return *out != nullptr;
  }
};

absl::StatusOr<std::unique_ptr<PowerMonitor>> PowerMonitor::Create(int cuda_device,
                                                                   absl::Duration period) {
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    return absl::NotFoundError(absl::StrCat("PowerMonitor: libnvidia-ml.so.1: ", dlerror()));
  }
  auto api = std::make_unique<Api>();
  // The clock-limit query was renamed in CUDA 12.x drivers; either will do.
  const bool loaded =
      Api::Symbol(lib, "nvmlInit_v2", &api->init) &&
      Api::Symbol(lib, "nvmlDeviceGetHandleByPciBusId_v2", &api->by_pci_bus_id) &&
      Api::Symbol(lib, "nvmlDeviceGetPowerUsage", &api->power_mw) &&
      Api::Symbol(lib, "nvmlDeviceGetClockInfo", &api->clock_mhz) &&
      (Api::Symbol(lib, "nvmlDeviceGetCurrentClocksEventReasons", &api->reasons) ||
       Api::Symbol(lib, "nvmlDeviceGetCurrentClocksThrottleReasons", &api->reasons)) &&
      Api::Symbol(lib, "nvmlDeviceGetTotalEnergyConsumption", &api->energy_mj);
  if (!loaded) return absl::NotFoundError("PowerMonitor: an NVML entry point is missing");
  if (const int r = api->init(); r != kNvmlSuccess) {
    return absl::UnavailableError(absl::StrCat("PowerMonitor: nvmlInit_v2 returned ", r));
  }
  char bus_id[32] = {};
  if (cudaDeviceGetPCIBusId(bus_id, sizeof(bus_id), cuda_device) != cudaSuccess) {
    (void)cudaGetLastError();
    return absl::NotFoundError(
        absl::StrCat("PowerMonitor: no PCI bus id for CUDA device ", cuda_device));
  }
  void* device = nullptr;
  if (const int r = api->by_pci_bus_id(bus_id, &device); r != kNvmlSuccess) {
    return absl::NotFoundError(
        absl::StrCat("PowerMonitor: NVML has no device at ", bus_id, " (", r, ")"));
  }
  return std::unique_ptr<PowerMonitor>(new PowerMonitor(std::move(api), device, period));
}

PowerMonitor::PowerMonitor(std::unique_ptr<Api> api, void* device, absl::Duration period)
    : api_(std::move(api)), device_(device), period_(period) {}

PowerMonitor::~PowerMonitor() { Stop(); }

void PowerMonitor::Start() {
  Stop();
  {
    absl::MutexLock lock(&mu_);
    samples_.clear();
  }
  energy_start_mj_ = 0;
  api_->energy_mj(device_, &energy_start_mj_);
  stop_ = std::make_unique<absl::Notification>();
  thread_ = std::thread([this, stop = stop_.get()] { Run(stop); });
}

void PowerMonitor::Run(absl::Notification* stop) {
  do {
    unsigned mw = 0, mhz = 0;
    unsigned long long reasons = 0;
    if (api_->power_mw(device_, &mw) != kNvmlSuccess ||
        api_->clock_mhz(device_, kNvmlClockSm, &mhz) != kNvmlSuccess ||
        api_->reasons(device_, &reasons) != kNvmlSuccess) {
      continue;
    }
    absl::MutexLock lock(&mu_);
    samples_.push_back({mw * 1e-3, static_cast<double>(mhz), (reasons & kLimitReasons) != 0});
  } while (!stop->WaitForNotificationWithTimeout(period_));
}

PowerMonitor::Summary PowerMonitor::Stop() {
  Summary s;
  if (!thread_.joinable()) return s;
  stop_->Notify();
  thread_.join();
  unsigned long long energy_end_mj = 0;
  if (api_->energy_mj(device_, &energy_end_mj) == kNvmlSuccess &&
      energy_end_mj >= energy_start_mj_ && energy_start_mj_ > 0) {
    s.joules = (energy_end_mj - energy_start_mj_) * 1e-3;
  }
  absl::MutexLock lock(&mu_);
  s.samples = static_cast<int>(samples_.size());
  if (s.samples == 0) return s;
  s.min_sm_mhz = samples_.front().sm_mhz;
  int limited = 0;
  for (const Sample& x : samples_) {
    s.mean_watts += x.watts;
    s.mean_sm_mhz += x.sm_mhz;
    s.min_sm_mhz = std::min(s.min_sm_mhz, x.sm_mhz);
    limited += x.limited ? 1 : 0;
  }
  s.mean_watts /= s.samples;
  s.mean_sm_mhz /= s.samples;
  s.limited_fraction = static_cast<double>(limited) / s.samples;
  return s;
}

}  // namespace onecard::bench
