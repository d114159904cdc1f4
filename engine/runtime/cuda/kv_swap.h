// KvSwap: the cuda backend's KV swap space (issue 19; ModelRunner's
// AllocateSwapSpace / SwapOut / SwapIn, the scheduler's "Swap ordering").
// Pinned host memory (cudaHostAlloc) laid out as swap_copy.h says (every
// layer's K pool and V pool in turn, [host block][block bytes]), and a
// swap's copies queued on a copy stream of its own, moved one of two ways:
//   copy engines: a run of consecutive blocks (KvBlockRuns) a part (a
//     layer's K pool or V pool), every run of the swap in one
//     cudaMemcpyBatchAsync; the engines reach the link's rate on long runs,
//     but pay a submission a copy, so single scattered blocks (32 KiB a
//     part at 70B) fall well short of it;
//   SMs: CopyKvBlocks (engine/kernels/kv_block_copy.h), one launch for the
//     whole swap, loads and stores to the pinned memory's device addresses.
// KvSwapCopy::kAuto takes the copy engines when the swap's runs average at
// least kEngineRunBlocks blocks, else the SMs (bench/results/offload.md,
// "KV swap", measured both).
//
//   compute stream:  ... step N-1 ... | wait(done) | step N's kernels ...
//                                   \      ^
//   copy stream:              wait(ready) -> swap-out copies -> swap-in copies -> done
//
// - Before a swap's copies the copy stream waits for the compute stream's
//   work so far (the blocks hold what the earlier steps wrote).
// - After them the compute stream waits for the copies: whatever it runs
//   next (the step's forward pass, graph or eager) reads a swapped-in block
//   only once it is there, and writes a swapped-out block (freed, given to
//   another sequence) only once it has been read. A step's SwapOut and
//   SwapIn share the copy stream, so the outs complete before the ins write.
// - The host does not wait: SwapOut / SwapIn return once the copies are
//   queued; they overlap the host's work of the step (scheduling, packing)
//   until the forward pass's first kernel.
// The runner's AllocateSwapSpace, SwapOut and SwapIn (CudaRunnerImpl) are
// defined in kv_swap.cc too. Tested by tests/gpu/cuda_kv_swap_test.cc;
// measured by onecard-bench-cuda kv-swap (tools/bench/cuda/kv_swap.cc).
#ifndef ONECARD_ENGINE_RUNTIME_CUDA_KV_SWAP_H_
#define ONECARD_ENGINE_RUNTIME_CUDA_KV_SWAP_H_

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/kernels/kv_block_copy.h"
#include "engine/kv_cache/swap_copy.h"
#include "engine/runtime/cuda/cuda_model_runner.h"
#include "engine/runtime/model_runner.h"

namespace onecard::engine {

class KvSwap {
 public:
  // As many blocks of the parts' shape (`parts`: every layer's K pool and V
  // pool in device memory, num_device_blocks blocks each) as `bytes` holds,
  // in pinned host memory. InvalidArgument when that is none;
  // ResourceExhausted when `bytes` exceed the host's available memory
  // (pinned pages cannot be swapped: more would take the machine down) or
  // the pinning fails. `copy` and `sm_blocks`: CudaRunnerOptions'
  // kv_swap_copy and kv_swap_sm_blocks.
  static absl::StatusOr<std::unique_ptr<KvSwap>> Create(std::vector<KvPoolPart> parts,
                                                        int32_t num_device_blocks, int64_t bytes,
                                                        KvSwapCopy copy = KvSwapCopy::kAuto,
                                                        int32_t sm_blocks = 0);
  // kAuto: the copy engines for swaps whose runs average this many blocks.
  static constexpr int64_t kEngineRunBlocks = 8;
  ~KvSwap();
  KvSwap(const KvSwap&) = delete;
  KvSwap& operator=(const KvSwap&) = delete;

  KvSwapSpace space() const { return {copier_.num_host_blocks(), copier_.block_bytes()}; }
  // Queues the copies on the copy stream after `compute`'s work so far, and
  // makes `compute` wait for them (above). No copies: nothing happens.
  absl::Status Copy(std::span<const KvBlockCopy> copies, KvSwapDirection direction,
                    cudaStream_t compute);
  // The copy stream's queued copies done (benchmarks time the copies alone).
  absl::Status Synchronize();
  // The pinned host memory, [part][host block][block bytes] (tests, benchmarks).
  char* host() const { return host_; }
  // Whether kAuto (or the fixed choice) moves a swap of num_copies copies in
  // num_runs runs (KvBlockRuns) with the SMs.
  bool UsesSms(int64_t num_copies, int64_t num_runs) const;

 private:
  KvSwap() = default;
  char* host_ = nullptr;
  KvSwapCopier copier_;
  cudaStream_t copy_ = nullptr;
  cudaEvent_t ready_ = nullptr;  // the compute stream before the copies
  cudaEvent_t done_ = nullptr;   // the copies
  KvSwapCopy method_ = KvSwapCopy::kAuto;
  int32_t sm_blocks_ = 0;
  // CopyKvBlocks' parts: in host memory, and in device memory for the kernel.
  std::vector<KvCopyPart> copy_parts_;
  KvCopyPart* device_parts_ = nullptr;
  std::vector<KvBlockPair> pairs_;  // one swap's, for CopyKvBlocks
  // One swap's runs, for cudaMemcpyBatchAsync (kept to reuse their storage).
  std::vector<void*> dsts_;
  std::vector<const void*> srcs_;
  std::vector<size_t> sizes_;
};

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_RUNTIME_CUDA_KV_SWAP_H_
