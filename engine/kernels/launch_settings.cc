#include "engine/kernels/launch_settings.h"

#include <atomic>

#include "absl/strings/str_cat.h"
#include "engine/kernels/int4_gemm.h"

namespace onecard::engine {
namespace {

std::atomic<bool> programmatic_launch{true};
std::atomic<int32_t> gemv_blocks_per_sm{2};
std::atomic<bool> fp8_gemm_cublas_scales{true};
std::atomic<int32_t> fp8_gemm_scaled_min_rows{64};
std::atomic<int32_t> int4_norm_in_gemm_max_rows{4};
std::atomic<bool> prefetch_o_in_attention{false};
std::atomic<int32_t> int4_stream_blocks_per_sm{0};
std::atomic<bool> early_dependents{true};
std::atomic<bool> gemv_early_dependents{false};
std::atomic<bool> int4_cluster_split_k{false};
std::atomic<bool> int4_fold_norm{false};
std::atomic<int32_t> int4_wgmma_from_rows{17};
std::atomic<int32_t> int4_wgmma_split_from_rows{0};
std::atomic<int32_t> int4_gemv_max_rows{4};
std::atomic<int32_t> int4_wgmma_split_max_grid_percent{100};
std::atomic<int32_t> int4_wgmma_cluster{1};
std::atomic<bool> int4_wgmma_overlap{true};
std::atomic<bool> int4_wgmma_double_sums{true};
std::atomic<int32_t> int4_wgmma_scaled_from_rows{128};
std::atomic<int32_t> int4_wgmma_min_split_stages{48};
std::atomic<bool> int4_wgmma_staged_epilogue{true};
std::atomic<bool> int4_wgmma_scaled_wait_first{false};
std::atomic<bool> int4_wgmma_tail_split{true};
std::atomic<bool> int4_wgmma_early_dependents{false};

}  // namespace

absl::Status SetLaunchSettings(const LaunchSettings& settings) {
  if (settings.gemv_blocks_per_sm < 1 || settings.gemv_blocks_per_sm > 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LaunchSettings.gemv_blocks_per_sm = ", settings.gemv_blocks_per_sm, ": must be 1 or 2"));
  }
  if (settings.fp8_gemm_scaled_min_rows < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LaunchSettings.fp8_gemm_scaled_min_rows = ", settings.fp8_gemm_scaled_min_rows,
        ": must be at least 1"));
  }
  if (settings.int4_norm_in_gemm_max_rows < 0 ||
      settings.int4_norm_in_gemm_max_rows > kInt4GemmMaxNormRows) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LaunchSettings.int4_norm_in_gemm_max_rows = ", settings.int4_norm_in_gemm_max_rows,
        ": must be 0 to ", kInt4GemmMaxNormRows));
  }
  if (settings.int4_stream_blocks_per_sm < 0 ||
      settings.int4_stream_blocks_per_sm > kInt4GemmMaxBlocksPerSm) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LaunchSettings.int4_stream_blocks_per_sm = ", settings.int4_stream_blocks_per_sm,
        ": must be 0 to ", kInt4GemmMaxBlocksPerSm));
  }
  if (settings.int4_wgmma_from_rows < 0 || settings.int4_wgmma_from_rows > kInt4GemmMaxRows) {
    return absl::InvalidArgumentError(
        absl::StrCat("LaunchSettings.int4_wgmma_from_rows = ", settings.int4_wgmma_from_rows,
                     ": must be 0 (off) to ", kInt4GemmMaxRows));
  }
  if (settings.int4_wgmma_split_from_rows < 0 ||
      settings.int4_wgmma_split_from_rows > kInt4GemmMaxRows) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LaunchSettings.int4_wgmma_split_from_rows = ", settings.int4_wgmma_split_from_rows,
        ": must be 0 (off) to ", kInt4GemmMaxRows));
  }
  if (settings.int4_wgmma_split_max_grid_percent < 1 ||
      settings.int4_wgmma_split_max_grid_percent > 100) {
    return absl::InvalidArgumentError(
        absl::StrCat("LaunchSettings.int4_wgmma_split_max_grid_percent = ",
                     settings.int4_wgmma_split_max_grid_percent, ": must be 1 to 100"));
  }
  if (settings.int4_wgmma_cluster != 1 && settings.int4_wgmma_cluster != 2 &&
      settings.int4_wgmma_cluster != 4) {
    return absl::InvalidArgumentError(
        absl::StrCat("LaunchSettings.int4_wgmma_cluster = ", settings.int4_wgmma_cluster,
                     ": must be 1, 2 or 4"));
  }
  if (settings.int4_wgmma_scaled_from_rows < 0 ||
      settings.int4_wgmma_scaled_from_rows > kInt4GemmMaxRows) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LaunchSettings.int4_wgmma_scaled_from_rows = ", settings.int4_wgmma_scaled_from_rows,
        ": must be 0 (none) to ", kInt4GemmMaxRows));
  }
  if (settings.int4_wgmma_min_split_stages < 0 ||
      settings.int4_wgmma_min_split_stages > kInt4MaxK / 128) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LaunchSettings.int4_wgmma_min_split_stages = ", settings.int4_wgmma_min_split_stages,
        ": must be 0 (128-row tiles always) to ", kInt4MaxK / 128));
  }
  if (settings.int4_gemv_max_rows < 0 || settings.int4_gemv_max_rows > kInt4GemmGemvMaxRows) {
    return absl::InvalidArgumentError(
        absl::StrCat("LaunchSettings.int4_gemv_max_rows = ", settings.int4_gemv_max_rows,
                     ": must be 0 (off) to ", kInt4GemmGemvMaxRows));
  }
  programmatic_launch.store(settings.programmatic_launch, std::memory_order_relaxed);
  gemv_blocks_per_sm.store(settings.gemv_blocks_per_sm, std::memory_order_relaxed);
  fp8_gemm_cublas_scales.store(settings.fp8_gemm_cublas_scales, std::memory_order_relaxed);
  fp8_gemm_scaled_min_rows.store(settings.fp8_gemm_scaled_min_rows, std::memory_order_relaxed);
  int4_norm_in_gemm_max_rows.store(settings.int4_norm_in_gemm_max_rows, std::memory_order_relaxed);
  prefetch_o_in_attention.store(settings.prefetch_o_in_attention, std::memory_order_relaxed);
  int4_stream_blocks_per_sm.store(settings.int4_stream_blocks_per_sm, std::memory_order_relaxed);
  early_dependents.store(settings.early_dependents, std::memory_order_relaxed);
  gemv_early_dependents.store(settings.gemv_early_dependents, std::memory_order_relaxed);
  int4_cluster_split_k.store(settings.int4_cluster_split_k, std::memory_order_relaxed);
  int4_fold_norm.store(settings.int4_fold_norm, std::memory_order_relaxed);
  int4_wgmma_from_rows.store(settings.int4_wgmma_from_rows, std::memory_order_relaxed);
  int4_wgmma_split_from_rows.store(settings.int4_wgmma_split_from_rows, std::memory_order_relaxed);
  int4_wgmma_split_max_grid_percent.store(settings.int4_wgmma_split_max_grid_percent,
                                          std::memory_order_relaxed);
  int4_wgmma_cluster.store(settings.int4_wgmma_cluster, std::memory_order_relaxed);
  int4_wgmma_overlap.store(settings.int4_wgmma_overlap, std::memory_order_relaxed);
  int4_wgmma_double_sums.store(settings.int4_wgmma_double_sums, std::memory_order_relaxed);
  int4_wgmma_scaled_from_rows.store(settings.int4_wgmma_scaled_from_rows,
                                    std::memory_order_relaxed);
  int4_wgmma_min_split_stages.store(settings.int4_wgmma_min_split_stages,
                                    std::memory_order_relaxed);
  int4_wgmma_staged_epilogue.store(settings.int4_wgmma_staged_epilogue, std::memory_order_relaxed);
  int4_wgmma_scaled_wait_first.store(settings.int4_wgmma_scaled_wait_first,
                                     std::memory_order_relaxed);
  int4_wgmma_tail_split.store(settings.int4_wgmma_tail_split, std::memory_order_relaxed);
  int4_wgmma_early_dependents.store(settings.int4_wgmma_early_dependents,
                                    std::memory_order_relaxed);
  int4_gemv_max_rows.store(settings.int4_gemv_max_rows, std::memory_order_relaxed);
  return absl::OkStatus();
}

LaunchSettings GetLaunchSettings() {
  return {
      .programmatic_launch = programmatic_launch.load(std::memory_order_relaxed),
      .gemv_blocks_per_sm = gemv_blocks_per_sm.load(std::memory_order_relaxed),
      .fp8_gemm_cublas_scales = fp8_gemm_cublas_scales.load(std::memory_order_relaxed),
      .fp8_gemm_scaled_min_rows = fp8_gemm_scaled_min_rows.load(std::memory_order_relaxed),
      .int4_norm_in_gemm_max_rows = int4_norm_in_gemm_max_rows.load(std::memory_order_relaxed),
      .prefetch_o_in_attention = prefetch_o_in_attention.load(std::memory_order_relaxed),
      .int4_stream_blocks_per_sm = int4_stream_blocks_per_sm.load(std::memory_order_relaxed),
      .early_dependents = early_dependents.load(std::memory_order_relaxed),
      .gemv_early_dependents = gemv_early_dependents.load(std::memory_order_relaxed),
      .int4_cluster_split_k = int4_cluster_split_k.load(std::memory_order_relaxed),
      .int4_fold_norm = int4_fold_norm.load(std::memory_order_relaxed),
      .int4_wgmma_from_rows = int4_wgmma_from_rows.load(std::memory_order_relaxed),
      .int4_wgmma_split_from_rows = int4_wgmma_split_from_rows.load(std::memory_order_relaxed),
      .int4_wgmma_split_max_grid_percent =
          int4_wgmma_split_max_grid_percent.load(std::memory_order_relaxed),
      .int4_wgmma_cluster = int4_wgmma_cluster.load(std::memory_order_relaxed),
      .int4_wgmma_overlap = int4_wgmma_overlap.load(std::memory_order_relaxed),
      .int4_wgmma_double_sums = int4_wgmma_double_sums.load(std::memory_order_relaxed),
      .int4_wgmma_scaled_from_rows = int4_wgmma_scaled_from_rows.load(std::memory_order_relaxed),
      .int4_wgmma_min_split_stages = int4_wgmma_min_split_stages.load(std::memory_order_relaxed),
      .int4_wgmma_staged_epilogue = int4_wgmma_staged_epilogue.load(std::memory_order_relaxed),
      .int4_wgmma_scaled_wait_first = int4_wgmma_scaled_wait_first.load(std::memory_order_relaxed),
      .int4_wgmma_tail_split = int4_wgmma_tail_split.load(std::memory_order_relaxed),
      .int4_wgmma_early_dependents = int4_wgmma_early_dependents.load(std::memory_order_relaxed),
      .int4_gemv_max_rows = int4_gemv_max_rows.load(std::memory_order_relaxed)};
}

}  // namespace onecard::engine
