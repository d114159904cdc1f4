// CpuModelRunner, the cpu backend's ModelRunner, and
// CreateCpuModelRunnerFromWeights / FromCpuWeights (see cpu_model_runner.h):
// sizes the KV pool, sets an fp8 cache's scales (the checkpoint's, or one
// calibration batch), then each Forward checks and flattens the batch
// (cpu_batch.h) and runs the decoder (cpu_forward.h); KV swap copies between
// the pools and a CpuKvSwap (cpu_kv_swap.h).
// Tested by tests/engine/runtime/cpu/cpu_model_runner_test.cc.
#include <algorithm>
#include <chrono>
#include <limits>
#include <mutex>
#include <new>
#include <optional>

#include "absl/strings/str_cat.h"
#include "engine/common/host_info.h"
#include "engine/common/log.h"
#include "engine/common/status_macros.h"
#include "engine/runtime/cpu/cpu_batch.h"
#include "engine/runtime/cpu/cpu_forward.h"
#include "engine/runtime/cpu/cpu_kv_swap.h"
#include "engine/runtime/cpu/cpu_model_runner.h"
#include "engine/runtime/cpu/cpu_weights.h"
#include "engine/runtime/kv_scales.h"

namespace onecard::engine {
namespace {

class CpuModelRunner : public ModelRunner {
 public:
  CpuModelRunner(const ModelConfig& config, CpuWeights weights, const KvLayout& layout,
                 int num_threads, LinearInputObserver observer, KvCacheDtype kv_dtype)
      : config_(config),
        layout_(layout),
        forward_(config, std::move(weights), layout, num_threads, std::move(observer), kv_dtype) {
    limits_.vocab_size = config.vocab_size;
    limits_.max_context = config.max_position_embeddings;
    limits_.layout = layout;
  }

  const ModelConfig& config() const override { return config_; }
  const KvLayout& kv_layout() const override { return layout_; }
  std::string name() const override { return "cpu"; }
  const KvScales* kv_scales() const override {
    return forward_.kv_scales().k.empty() ? nullptr : &forward_.kv_scales();
  }
  int num_threads() const { return forward_.num_threads(); }

  // An fp8 cache's scales: the checkpoint's, else calibrated (cpu_model_runner.h).
  absl::Status SetUpKvScales(const Checkpoint* checkpoint, const std::optional<KvScales>& given) {
    if (given.has_value()) {
      RETURN_IF_ERROR(
          given->CheckFits(config_.num_layers, config_.num_kv_heads, "CpuRunnerOptions.kv_scales"));
      forward_.SetKvScales(*given);
      return absl::OkStatus();
    }
    if (checkpoint != nullptr) {
      ASSIGN_OR_RETURN(std::optional<KvScales> scales, ReadCheckpointKvScales(*checkpoint));
      if (scales.has_value()) {
        forward_.SetKvScales(*std::move(scales));
        return absl::OkStatus();
      }
    }
    const int64_t capacity = static_cast<int64_t>(layout_.num_blocks) * layout_.block_size;
    absl::StatusOr<std::vector<std::vector<int32_t>>> prompts = KvCalibrationPrompts(
        checkpoint, config_,
        static_cast<int32_t>(std::min<int64_t>(kKvCalibrationTokens, capacity)));
    if (!prompts.ok()) {
      return absl::Status(prompts.status().code(),
                          absl::StrCat("KV cache calibration: ", prompts.status().message()));
    }
    const KvCalibrationBatch calibration(*prompts, layout_, {.max_context = limits_.max_context});
    ASSIGN_OR_RETURN(const FlatBatch flat, FlattenBatch(calibration.batch(), limits_));
    return forward_.CalibrateKvScales(flat, calibration.Source());
  }

  absl::Status Forward(const BatchInput& batch, std::vector<float>* logits) override {
    std::lock_guard<std::mutex> lock(mu_);
    ASSIGN_OR_RETURN(const FlatBatch flat, FlattenBatch(batch, limits_));
    return forward_.Run(flat, logits);
  }

  absl::StatusOr<KvSwapSpace> AllocateSwapSpace(int64_t bytes) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (swap_ != nullptr) return absl::FailedPreconditionError("cpu runner: swap space exists");
    std::vector<float*> pools;
    for (int64_t l = 0; l < config_.num_layers; ++l) {
      pools.push_back(forward_.KvPool(l, /*v=*/false));
      pools.push_back(forward_.KvPool(l, /*v=*/true));
    }
    ASSIGN_OR_RETURN(swap_, CpuKvSwap::Create(pools, layout_, bytes));
    return swap_->space();
  }
  absl::Status SwapOut(std::span<const KvBlockCopy> copies) override {
    return Swap(copies, KvSwapDirection::kOut);
  }
  absl::Status SwapIn(std::span<const KvBlockCopy> copies) override {
    return Swap(copies, KvSwapDirection::kIn);
  }

 private:
  absl::Status Swap(std::span<const KvBlockCopy> copies, KvSwapDirection direction) {
    std::lock_guard<std::mutex> lock(mu_);
    if (swap_ == nullptr) {
      return copies.empty() ? absl::OkStatus()
                            : absl::FailedPreconditionError("cpu runner: no swap space");
    }
    return swap_->Copy(copies, direction);
  }

  const ModelConfig config_;
  const KvLayout layout_;
  BatchLimits limits_;
  std::mutex mu_;  // one Forward (or swap) at a time
  CpuForward forward_;
  std::unique_ptr<CpuKvSwap> swap_;  // null until AllocateSwapSpace
};

absl::StatusOr<KvLayout> PlanKvLayout(const ModelConfig& config, const CpuRunnerOptions& o) {
  if (o.kv_block_size <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("kv_block_size = ", o.kv_block_size, " <= 0"));
  }
  KvLayout layout;
  layout.block_size = o.kv_block_size;
  layout.num_kv_heads = static_cast<int32_t>(config.num_kv_heads);
  layout.head_dim = static_cast<int32_t>(config.head_dim);
  const int64_t block_bytes =
      2 * config.num_layers * layout.BlockStride() * static_cast<int64_t>(sizeof(float));
  const int64_t num_blocks = o.num_kv_blocks > 0 ? o.num_kv_blocks : o.kv_cache_bytes / block_bytes;
  // K and V pools of num_blocks * block_bytes: never more than the host has.
  if (num_blocks > HostMemoryBytes() / block_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the KV pool of ", num_blocks, " blocks of ", block_bytes,
                     " bytes is more than the host's memory (", HostMemoryBytes(), " bytes)"));
  }
  if (num_blocks < 1 || num_blocks > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the KV pool would have ", num_blocks, " blocks (num_kv_blocks ", o.num_kv_blocks,
        ", kv_cache_bytes ", o.kv_cache_bytes, ", ", block_bytes, " bytes a block)"));
  }
  layout.num_blocks = static_cast<int32_t>(num_blocks);
  return layout;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ModelRunner>> CreateCpuModelRunnerFromWeights(
    const ModelConfig& config, ModelWeightsF32 weights, const CpuRunnerOptions& options) {
  RETURN_IF_ERROR(CheckCpuConfig(config));
  RETURN_IF_ERROR(PlanKvLayout(config, options).status());  // before any work on the weights
  ASSIGN_OR_RETURN(CpuWeights packed, PackCpuWeights(config, std::move(weights)));
  return CreateCpuModelRunnerFromCpuWeights(config, std::move(packed), options);
}

absl::StatusOr<std::unique_ptr<ModelRunner>> CreateCpuModelRunnerFromCpuWeights(
    const ModelConfig& config, CpuWeights packed, const CpuRunnerOptions& options,
    const Checkpoint* checkpoint) {
  RETURN_IF_ERROR(CheckCpuConfig(config));
  ASSIGN_OR_RETURN(const KvLayout layout, PlanKvLayout(config, options));
  const CpuWeightFormat format = packed.format;
  const int64_t weight_bytes = packed.bytes();
  std::unique_ptr<CpuModelRunner> runner;
  // The KV pools and activations are std::vectors: a failed allocation
  // throws, and becomes a status here.
  try {
    runner =
        std::make_unique<CpuModelRunner>(config, std::move(packed), layout, options.num_threads,
                                         options.linear_input_observer, options.kv_cache_dtype);
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot allocate the KV pool of ", layout.num_blocks, " blocks"));
  }
  Log(LogLevel::kInfo, "cpu",
      "model %s: %d layers, %s weights (%.1f MiB), %s kernels, %d KV blocks of %d tokens (%s), "
      "%d threads",
      config.name, config.num_layers, CpuWeightFormatName(format),
      static_cast<double>(weight_bytes) / (1 << 20), CpuIsaName(DetectCpuIsa()), layout.num_blocks,
      layout.block_size, KvCacheDtypeName(options.kv_cache_dtype), runner->num_threads());
  if (options.kv_cache_dtype == KvCacheDtype::kFp8E4m3) {
    const auto start = std::chrono::steady_clock::now();
    RETURN_IF_ERROR(runner->SetUpKvScales(checkpoint, options.kv_scales));
    const std::chrono::duration<double> seconds = std::chrono::steady_clock::now() - start;
    Log(LogLevel::kInfo, "cpu", "%s (%.2f s)", runner->kv_scales()->Describe(), seconds.count());
  }
  return runner;
}

}  // namespace onecard::engine
