// Scenario "kv-swap" (issue 19 item 4; acceptance: >= 40 GB/s each way):
// KV swap's copies (engine/runtime/cuda/kv_swap.h, what the CUDA runner's
// SwapOut / SwapIn run) for a llama3-70b-like KV cache: 80 layers, 8 kv
// heads, head_dim 128, BF16, blocks of 16 tokens (32 KiB a layer for K and
// as much for V, 5 MiB a block over the 160 pools). Device pools of 8 GiB
// of seeded random values and a pinned swap space of 8 GiB. Cases
// "<size>gib-<pattern>": 2 and 8 GiB of blocks swapped out, then in, with
// the device blocks
//   contiguous: one run (the best case: 160 copies a swap),
//   runs8:      runs of 8 blocks (a 128-token sequence's), shuffled,
//   scattered:  every block its own run (a random permutation: 160 copies a
//               block, the worst case).
// Each swap is checked first (sampled blocks compared byte for byte after a
// swap-out, and after a swap-in into zeroed pools), then timed: the median
// of 5 after one untimed, CUDA events on the stream the copies are ordered
// after (kv_swap.h), so the figure includes the host's queueing of the
// copies. Reports GB/s out and in against the pinned D2H / H2D ceilings of
// this run, the copies a swap queues on the copy engines, and whether it
// moved by the SMs instead (--kv_swap_copy: auto, engines or sms;
// --kv_swap_sm_blocks).
#include "engine/runtime/cuda/kv_swap.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/kernels/cuda_check.h"
#include "tools/bench/bench_registry.h"
#include "tools/bench/bench_report.h"
#include "tools/bench/cuda/cuda_bench.h"

namespace onecard::bench {
namespace {

constexpr char kScenario[] = "kv-swap";
constexpr int64_t kLayers = 80;
constexpr int64_t kPartBlockBytes = 16 * 8 * 128 * 2;  // a layer's K (or V) of a block, BF16
constexpr int64_t kBlockBytes = 2 * kLayers * kPartBlockBytes;
constexpr int64_t kPoolBytes = 8LL << 30;
constexpr int32_t kBlocks = static_cast<int32_t>(kPoolBytes / kBlockBytes);

// The device blocks of `n` swapped blocks (host blocks 0..n-1) in a pattern.
std::vector<engine::KvBlockCopy> Pattern(const std::string& pattern, int32_t n, uint64_t seed) {
  std::vector<int32_t> device(n);
  std::iota(device.begin(), device.end(), 0);
  std::mt19937_64 rng(seed);
  if (pattern == "scattered") {
    std::vector<int32_t> all(kBlocks);
    std::iota(all.begin(), all.end(), 0);
    std::shuffle(all.begin(), all.end(), rng);
    device.assign(all.begin(), all.begin() + n);
  } else if (pattern == "runs8") {
    std::vector<int32_t> runs(kBlocks / 8);
    std::iota(runs.begin(), runs.end(), 0);
    std::shuffle(runs.begin(), runs.end(), rng);
    for (int32_t i = 0; i < n; ++i) device[i] = runs[i / 8] * 8 + i % 8;
  }
  std::vector<engine::KvBlockCopy> copies(n);
  for (int32_t i = 0; i < n; ++i) copies[i] = {.device_block = device[i], .host_block = i};
  return copies;
}

// Sampled blocks and parts of the swap space against the device pools.
absl::Status CheckCopies(const engine::KvSwap& swap, char* pools,
                         const std::vector<engine::KvBlockCopy>& copies) {
  std::vector<char> device(kPartBlockBytes);
  std::mt19937_64 rng(11);
  for (int i = 0; i < 16; ++i) {
    const engine::KvBlockCopy& c = copies[rng() % copies.size()];
    const int64_t part = static_cast<int64_t>(rng() % (2 * kLayers));
    const char* d = pools + (part * kBlocks + c.device_block) * kPartBlockBytes;
    const char* h = swap.host() + (part * kBlocks + c.host_block) * kPartBlockBytes;
    CUDA_RETURN_IF_ERROR(cudaMemcpy(device.data(), d, kPartBlockBytes, cudaMemcpyDeviceToHost));
    if (std::memcmp(device.data(), h, kPartBlockBytes) != 0) {
      return absl::InternalError(absl::StrCat(kScenario, ": block ", c.device_block, " part ", part,
                                              " differs from its host copy ", c.host_block));
    }
  }
  return absl::OkStatus();
}

struct Swapped {
  double out_gb_s = 0;
  double in_gb_s = 0;
};

absl::StatusOr<Swapped> RunCase(engine::KvSwap& swap, char* pools, cudaStream_t stream,
                                const std::vector<engine::KvBlockCopy>& copies) {
  const double bytes = static_cast<double>(copies.size()) * kBlockBytes;
  using engine::KvSwapDirection;
  RETURN_IF_ERROR(swap.Copy(copies, KvSwapDirection::kOut, stream));
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  RETURN_IF_ERROR(CheckCopies(swap, pools, copies));
  ASSIGN_OR_RETURN(const double out_ms, MedianMs(stream, 1, 5, [&]() {
                     return swap.Copy(copies, KvSwapDirection::kOut, stream);
                   }));
  CUDA_RETURN_IF_ERROR(cudaMemsetAsync(pools, 0, kPoolBytes, stream));
  RETURN_IF_ERROR(swap.Copy(copies, KvSwapDirection::kIn, stream));
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
  RETURN_IF_ERROR(CheckCopies(swap, pools, copies));
  ASSIGN_OR_RETURN(const double in_ms, MedianMs(stream, 1, 5, [&]() {
                     return swap.Copy(copies, KvSwapDirection::kIn, stream);
                   }));
  return Swapped{.out_gb_s = bytes / (out_ms * 1e-3) / 1e9,
                 .in_gb_s = bytes / (in_ms * 1e-3) / 1e9};
}

absl::Status RunKvSwap(const BenchOptions&, BenchReporter& reporter) {
  ASSIGN_OR_RETURN(const Ceilings ceil, MeasureCeilings());
  cudaStream_t stream;
  CUDA_RETURN_IF_ERROR(cudaStreamCreate(&stream));
  ASSIGN_OR_RETURN(DeviceMem pools, DeviceMem::Random(kPoolBytes, 5, stream));
  std::vector<engine::KvPoolPart> parts;
  for (int64_t p = 0; p < 2 * kLayers; ++p) {
    parts.push_back({pools.get() + p * kBlocks * kPartBlockBytes, kPartBlockBytes});
  }
  const engine::CudaRunnerOptions& o = BenchRunnerOptions();
  ASSIGN_OR_RETURN(
      std::unique_ptr<engine::KvSwap> swap,
      engine::KvSwap::Create(parts, kBlocks, kPoolBytes, o.kv_swap_copy, o.kv_swap_sm_blocks));
  reporter.Add({kScenario, "layout", "block_bytes", static_cast<double>(kBlockBytes), "B", {}});
  for (const int64_t gib : {2, 8}) {
    // Whole runs of 8 (runs8 shuffles them among the pools' whole runs).
    const int32_t n =
        static_cast<int32_t>(std::min<int64_t>((gib << 30) / kBlockBytes, kBlocks) / 8 * 8);
    for (const std::string pattern : {"contiguous", "runs8", "scattered"}) {
      const std::vector<engine::KvBlockCopy> copies = Pattern(pattern, n, 17);
      // Pools of random values again (the swap-in case zeroed them).
      RETURN_IF_ERROR(engine::FillUniformBf16(pools.get(), kPoolBytes / 2, 5, 0.0f, 0.05f, stream));
      ASSIGN_OR_RETURN(const Swapped s, RunCase(*swap, pools.get(), stream, copies));
      const std::string name = absl::StrCat(gib, "gib-", pattern);
      reporter.Add(
          {kScenario, name, "swap_out_rate", s.out_gb_s, "GB/s", ceil.d2h_bytes_per_s / 1e9});
      reporter.Add(
          {kScenario, name, "swap_in_rate", s.in_gb_s, "GB/s", ceil.h2d_bytes_per_s / 1e9});
      const int64_t runs = static_cast<int64_t>(engine::KvBlockRuns(copies).size());
      reporter.Add({kScenario,
                    name,
                    "copies_a_swap",
                    static_cast<double>(runs * 2 * kLayers),
                    "copies",
                    {}});
      const bool sms = swap->UsesSms(static_cast<int64_t>(copies.size()), runs);
      reporter.Add({kScenario, name, "moved_by_sms", sms ? 1.0 : 0.0, "bool", {}});
    }
  }
  swap.reset();
  CUDA_RETURN_IF_ERROR(cudaStreamDestroy(stream));
  return absl::OkStatus();
}

const bool kRegistered = RegisterScenario(
    {kScenario,
     "CUDA: KV swap of a 70B-like cache (80 layers, 8x128 BF16, blocks of 16), 2 and 8 GiB out "
     "and in, contiguous / runs of 8 / scattered blocks, vs pinned D2H / H2D",
     &RunKvSwap});

}  // namespace
}  // namespace onecard::bench
