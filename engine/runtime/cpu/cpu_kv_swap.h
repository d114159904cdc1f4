// CpuKvSwap: the cpu backend's KV swap space (ModelRunner::AllocateSwapSpace,
// SwapOut, SwapIn): host memory laid out as swap_copy.h says (each layer's K
// and V pool in turn, [host block][block_size, kv_heads, head_dim] fp32),
// in an anonymous mapping whose pages become resident when first written,
// and memcpy of runs of blocks between it and the runner's pools.
// Tested by tests/engine/runtime/cpu/cpu_kv_swap_test.cc.
#ifndef ONECARD_ENGINE_RUNTIME_CPU_CPU_KV_SWAP_H_
#define ONECARD_ENGINE_RUNTIME_CPU_CPU_KV_SWAP_H_

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/kv_cache/kv_layout.h"
#include "engine/kv_cache/swap_copy.h"
#include "engine/runtime/model_runner.h"

namespace onecard::engine {

class CpuKvSwap {
 public:
  // As many blocks of the pools' shape (`pools`: every layer's K pool and
  // its V pool, in turn, of layout.num_blocks blocks of fp32) as `bytes`
  // holds. ResourceExhausted when bytes exceed the host's available memory
  // (HostAvailableMemoryBytes) or the mapping fails; InvalidArgument when
  // they hold no block.
  static absl::StatusOr<std::unique_ptr<CpuKvSwap>> Create(std::span<float* const> pools,
                                                           const KvLayout& layout, int64_t bytes);
  ~CpuKvSwap();
  CpuKvSwap(const CpuKvSwap&) = delete;
  CpuKvSwap& operator=(const CpuKvSwap&) = delete;

  KvSwapSpace space() const { return {copier_.num_host_blocks(), copier_.block_bytes()}; }
  // The copies (model_runner.h), done when it returns.
  absl::Status Copy(std::span<const KvBlockCopy> copies, KvSwapDirection direction) const;

 private:
  CpuKvSwap() = default;
  void* host_ = nullptr;  // mmap'd
  size_t host_bytes_ = 0;
  KvSwapCopier copier_;
};

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_RUNTIME_CPU_CPU_KV_SWAP_H_
