// Scenario "ceilings": the card's measured limits that every other CUDA
// preset holds itself against (../shared/benchmarks.md): device-to-device
// copy bandwidth (2 GiB, bytes read + written), the bf16 GEMM rate at
// 8192^3 through cuBLAS on random data, the E4M3 GEMM rate at 8192^3 through
// cuBLASLt (Fp8Matmul: fp32 sums and output) on random codes (not reported
// on a device without FP8 tensor cores), pinned host->device and
// device->host bandwidth (1 GiB). Medians of 20 / 10 / 10 / 10 / 10 runs.
#include "absl/strings/str_format.h"
#include "engine/common/status_macros.h"
#include "tools/bench/bench_registry.h"
#include "tools/bench/bench_report.h"
#include "tools/bench/cuda/cuda_bench.h"

namespace onecard::bench {
namespace {

absl::Status RunCeilings(const BenchOptions&, BenchReporter& reporter) {
  ASSIGN_OR_RETURN(const Ceilings c, MeasureCeilings());
  reporter.Add({"ceilings", "d2d_copy", "bandwidth", c.copy_bytes_per_s / 1e9, "GB/s", {}});
  reporter.Add({"ceilings", "gemm_bf16_8192", "rate", c.gemm_flops_per_s / 1e12, "TFLOP/s", {}});
  if (c.gemm_fp8_flops_per_s > 0) {
    reporter.Add(
        {"ceilings", "gemm_fp8_8192", "rate", c.gemm_fp8_flops_per_s / 1e12, "TFLOP/s", {}});
  }
  reporter.Add({"ceilings", "pinned_h2d", "bandwidth", c.h2d_bytes_per_s / 1e9, "GB/s", {}});
  reporter.Add({"ceilings", "pinned_d2h", "bandwidth", c.d2h_bytes_per_s / 1e9, "GB/s", {}});
  return absl::OkStatus();
}

const bool kRegistered = RegisterScenario(
    {"ceilings", "CUDA: D2D copy, bf16 and fp8 GEMM 8192^3, pinned H2D/D2H (the floors' inputs)",
     &RunCeilings});

}  // namespace
}  // namespace onecard::bench
