// KvSwap (see kv_swap.h) and the runner's KV swap: CudaRunnerImpl's
// AllocateSwapSpace, SwapOut and SwapIn over the pools of TakeKvPools.
// Tested by tests/gpu/cuda_kv_swap_test.cc.
#include "engine/runtime/cuda/kv_swap.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_format.h"
#include "engine/common/host_info.h"
#include "engine/common/status_macros.h"
#include "engine/kernels/cuda_check.h"
#include "engine/runtime/cuda/cuda_runner_impl.h"

namespace onecard::engine {

absl::StatusOr<std::unique_ptr<KvSwap>> KvSwap::Create(std::vector<KvPoolPart> parts,
                                                       int32_t num_device_blocks, int64_t bytes,
                                                       KvSwapCopy copy, int32_t sm_blocks) {
  const int64_t block_bytes = KvSwapCopier::BlockBytes(parts);
  const int64_t num_blocks = std::min<int64_t>(block_bytes > 0 ? bytes / block_bytes : 0,
                                               std::numeric_limits<int32_t>::max());
  if (num_blocks < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%d bytes hold no KV block of %d bytes", bytes, block_bytes));
  }
  const int64_t host_bytes = num_blocks * block_bytes;
  const int64_t available = HostAvailableMemoryBytes();
  if (available > 0 && host_bytes > available) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "a swap space of %.2f GiB is more than the host's available memory (%.2f GiB): pinned "
        "pages cannot be swapped; lower it",
        static_cast<double>(host_bytes) / (1 << 30), static_cast<double>(available) / (1 << 30)));
  }
  std::unique_ptr<KvSwap> swap(new KvSwap());
  void* host = nullptr;
  const cudaError_t pinned =
      cudaHostAlloc(&host, static_cast<size_t>(host_bytes), cudaHostAllocDefault);
  if (pinned != cudaSuccess) {
    (void)cudaGetLastError();
    return absl::ResourceExhaustedError(absl::StrFormat(
        "pinning a swap space of %d bytes failed (%s)", host_bytes, cudaGetErrorString(pinned)));
  }
  swap->host_ = static_cast<char*>(host);
  swap->method_ = copy;
  swap->sm_blocks_ = sm_blocks;
  swap->copier_ = KvSwapCopier(std::move(parts), num_device_blocks, swap->host_,
                               static_cast<int32_t>(num_blocks));
  // The copier's parts and host layout, for CopyKvBlocks.
  const std::span<const KvPoolPart> copier_parts = swap->copier_.parts();
  for (size_t i = 0; i < copier_parts.size(); ++i) {
    swap->copy_parts_.push_back(
        {copier_parts[i].base, swap->copier_.HostPart(i), copier_parts[i].block_bytes});
  }
  const size_t parts_bytes = swap->copy_parts_.size() * sizeof(KvCopyPart);
  CUDA_RETURN_IF_ERROR(cudaMalloc(&swap->device_parts_, parts_bytes));
  CUDA_RETURN_IF_ERROR(cudaMemcpy(swap->device_parts_, swap->copy_parts_.data(), parts_bytes,
                                  cudaMemcpyHostToDevice));
  CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&swap->copy_, cudaStreamNonBlocking));
  CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&swap->ready_, cudaEventDisableTiming));
  CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&swap->done_, cudaEventDisableTiming));
  return swap;
}

KvSwap::~KvSwap() {
  if (copy_ != nullptr) cudaStreamSynchronize(copy_);  // no copy into freed memory
  if (ready_ != nullptr) cudaEventDestroy(ready_);
  if (done_ != nullptr) cudaEventDestroy(done_);
  if (copy_ != nullptr) cudaStreamDestroy(copy_);
  if (device_parts_ != nullptr) cudaFree(device_parts_);
  if (host_ != nullptr) cudaFreeHost(host_);
}

absl::Status KvSwap::Copy(std::span<const KvBlockCopy> copies, KvSwapDirection direction,
                          cudaStream_t compute) {
  if (copies.empty()) return absl::OkStatus();
  RETURN_IF_ERROR(copier_.Check(copies));  // before the streams are tied
  CUDA_RETURN_IF_ERROR(cudaEventRecord(ready_, compute));
  CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(copy_, ready_, 0));
  // The runs decide kAuto and are the copy engines' copies (kSms needs none).
  std::vector<KvBlockRun> runs;
  if (method_ != KvSwapCopy::kSms) runs = KvBlockRuns(copies);
  if (UsesSms(static_cast<int64_t>(copies.size()), static_cast<int64_t>(runs.size()))) {
    pairs_.clear();
    for (const KvBlockCopy& c : copies) pairs_.push_back({c.device_block, c.host_block});
    RETURN_IF_ERROR(
        CopyKvBlocks({.parts = copy_parts_,
                      .device_parts = device_parts_,
                      .pairs = pairs_,
                      .num_device_blocks = copier_.num_device_blocks(),
                      .num_host_blocks = copier_.num_host_blocks(),
                      .direction = direction == KvSwapDirection::kOut ? KvCopyDirection::kToHost
                                                                      : KvCopyDirection::kToDevice,
                      .grid_blocks = sm_blocks_},
                     copy_));
  } else {
    // Every run in one cudaMemcpyBatchAsync: one call a run costs more than
    // the transfer of short runs.
    dsts_.clear();
    srcs_.clear();
    sizes_.clear();
    RETURN_IF_ERROR(copier_.ForEachPart(
        runs, direction, [&](char* dst, const char* src, int64_t bytes) -> absl::Status {
          dsts_.push_back(dst);
          srcs_.push_back(src);
          sizes_.push_back(static_cast<size_t>(bytes));
          return absl::OkStatus();
        }));
    cudaMemcpyAttributes attrs{};
    attrs.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
    size_t attrs_index = 0;
    CUDA_RETURN_IF_ERROR(cudaMemcpyBatchAsync(dsts_.data(), srcs_.data(), sizes_.data(),
                                              sizes_.size(), &attrs, &attrs_index, 1, copy_));
  }
  CUDA_RETURN_IF_ERROR(cudaEventRecord(done_, copy_));
  CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(compute, done_, 0));
  return absl::OkStatus();
}

bool KvSwap::UsesSms(int64_t num_copies, int64_t num_runs) const {
  switch (method_) {
    case KvSwapCopy::kCopyEngines:
      return false;
    case KvSwapCopy::kSms:
      return true;
    case KvSwapCopy::kAuto:
      break;
  }
  return num_copies < kEngineRunBlocks * num_runs;
}

absl::Status KvSwap::Synchronize() {
  CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(copy_));
  return absl::OkStatus();
}

namespace {

absl::Status NoSwapSpace(std::span<const KvBlockCopy> copies) {
  return copies.empty() ? absl::OkStatus()
                        : absl::FailedPreconditionError("cuda runner: no swap space");
}

}  // namespace

absl::StatusOr<KvSwapSpace> CudaRunnerImpl::AllocateSwapSpace(int64_t bytes) {
  if (kv_swap_ != nullptr) return absl::FailedPreconditionError("cuda runner: swap space exists");
  std::vector<KvPoolPart> parts;
  for (int64_t l = 0; l < config_.num_layers; ++l) {
    const int64_t block_bytes = kv_layout_.BlockStride() * (LayerKvFp8(l) ? 1 : 2);
    parts.push_back({static_cast<char*>(k_cache_[l]), block_bytes});
    parts.push_back({static_cast<char*>(v_cache_[l]), block_bytes});
  }
  ASSIGN_OR_RETURN(kv_swap_, KvSwap::Create(std::move(parts), kv_layout_.num_blocks, bytes,
                                            options_.kv_swap_copy, options_.kv_swap_sm_blocks));
  return kv_swap_->space();
}

absl::Status CudaRunnerImpl::SwapOut(std::span<const KvBlockCopy> copies) {
  if (kv_swap_ == nullptr) return NoSwapSpace(copies);
  return kv_swap_->Copy(copies, KvSwapDirection::kOut, ctx_->stream());
}

absl::Status CudaRunnerImpl::SwapIn(std::span<const KvBlockCopy> copies) {
  if (kv_swap_ == nullptr) return NoSwapSpace(copies);
  return kv_swap_->Copy(copies, KvSwapDirection::kIn, ctx_->stream());
}

}  // namespace onecard::engine
