// KvSwap: the cuda backend's KV swap space (issue 19; ModelRunner's
// AllocateSwapSpace / SwapOut / SwapIn, the scheduler's "Swap ordering").
// Pinned host memory (cudaHostAlloc) laid out as swap_copy.h says (every
// layer's K pool and V pool in turn, [host block][block bytes]), and a
// swap's copies queued on a copy stream of its own: a run of consecutive
// blocks (KvBlockRuns) a layer for K and one for V, every run of the swap in
// one cudaMemcpyBatchAsync.
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
#include "engine/kv_cache/swap_copy.h"
#include "engine/runtime/model_runner.h"

namespace onecard::engine {

class KvSwap {
 public:
  // As many blocks of the parts' shape (`parts`: every layer's K pool and V
  // pool in device memory, num_device_blocks blocks each) as `bytes` holds,
  // in pinned host memory. InvalidArgument when that is none;
  // ResourceExhausted when `bytes` exceed the host's available memory
  // (pinned pages cannot be swapped: more would take the machine down) or
  // the pinning fails.
  static absl::StatusOr<std::unique_ptr<KvSwap>> Create(std::vector<KvPoolPart> parts,
                                                        int32_t num_device_blocks, int64_t bytes);
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

 private:
  KvSwap() = default;
  char* host_ = nullptr;
  KvSwapCopier copier_;
  cudaStream_t copy_ = nullptr;
  cudaEvent_t ready_ = nullptr;  // the compute stream before the copies
  cudaEvent_t done_ = nullptr;   // the copies
  // One swap's runs, for cudaMemcpyBatchAsync (kept to reuse their storage).
  std::vector<void*> dsts_;
  std::vector<const void*> srcs_;
  std::vector<size_t> sizes_;
};

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_RUNTIME_CUDA_KV_SWAP_H_
