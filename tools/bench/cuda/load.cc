// Scenario "load": a checkpoint from disk to its first token on the GPU
// (issue 16: loading without a float copy; benchmarks.md cold-start): the
// model given by --model (default SmolLM2-135M Q4_1, scripts/fetch-model.sh)
// opened (mapped), its weights filled layer by layer into the device
// formats (4-bit projections kept 4-bit), then one 16-token prompt and one
// greedy token. Reports, in this process: the CUDA context's start, the
// open, the runner's creation (weights, buffers, cuBLAS tuning), the first
// token, the peak host RSS (getrusage; the mapped file's touched pages
// count) before and after the load, and the device bytes of the weights, in
// all and by format (a Q4_K_M file: int4 g32 min and bf16). Qwen2.5-Coder-1.5B
// Q4_K_M: --model models/Qwen2.5-Coder-1.5B-Instruct.Q4_K_M.gguf
// (scripts/fetch-model.sh qwen).
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <string>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/kernels/cuda_check.h"
#include "engine/model/checkpoint.h"
#include "engine/runtime/cuda/cuda_model_runner.h"
#include "tools/bench/bench_registry.h"
#include "tools/bench/bench_report.h"
#include "tools/bench/cuda/cuda_bench.h"

namespace onecard::bench {
namespace {

constexpr char kScenario[] = "load";
constexpr char kDefaultModel[] = "models/SmolLM2-135M-Instruct.Q4_1.gguf";

double PeakRssMib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // kB on Linux
}

double SecondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

absl::Status RunLoad(const BenchOptions& options, BenchReporter& reporter) {
  const std::string path = options.model_path.empty() ? kDefaultModel : options.model_path;
  const std::string name = path.substr(path.find_last_of('/') + 1);
  auto t = std::chrono::steady_clock::now();
  CUDA_RETURN_IF_ERROR(cudaFree(nullptr));  // the context
  reporter.Add({kScenario, name, "cuda_context_s", SecondsSince(t), "s", {}});
  const double rss_before = PeakRssMib();
  t = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(engine::Checkpoint ckpt, engine::OpenCheckpoint(path));
  reporter.Add({kScenario, name, "open_s", SecondsSince(t), "s", {}});
  t = std::chrono::steady_clock::now();
  engine::CudaRunnerOptions o = BenchRunnerOptions();
  o.max_num_seqs = 1;
  o.max_context = 256;
  ASSIGN_OR_RETURN(auto runner, engine::CreateCudaModelRunner(ckpt, o));
  reporter.Add({kScenario, name, "runner_create_s", SecondsSince(t), "s", {}});
  const double rss_after = PeakRssMib();
  t = std::chrono::steady_clock::now();
  BatchDriver driver(runner.get(), 1, 16, 64);
  RETURN_IF_ERROR(driver.Prefill());
  reporter.Add({kScenario, name, "first_token_s", SecondsSince(t), "s", {}});
  reporter.Add({kScenario, name, "peak_rss_before_load", rss_before, "MiB", {}});
  reporter.Add({kScenario, name, "peak_rss_after_load", rss_after, "MiB", {}});
  reporter.Add({kScenario,
                name,
                "weights_device",
                runner->memory_plan().weight_bytes / double(1 << 20),
                "MiB",
                {}});
  // By format ("weights_device_int4_g32_min", "weights_device_bf16").
  for (const auto& [format, bytes] : runner->memory_plan().weights.by_format) {
    std::string metric = absl::StrCat("weights_device_", format);
    std::replace(metric.begin(), metric.end(), ' ', '_');
    reporter.Add({kScenario, name, metric, bytes / double(1 << 20), "MiB", {}});
  }
  return absl::OkStatus();
}

const bool kRegistered =
    RegisterScenario({kScenario,
                      "CUDA: a checkpoint (--model, default SmolLM2 Q4_1) to its first token: "
                      "open, weights to the device, peak host RSS",
                      RunLoad});

}  // namespace
}  // namespace onecard::bench
