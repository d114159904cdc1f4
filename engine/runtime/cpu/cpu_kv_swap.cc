// CpuKvSwap (see cpu_kv_swap.h).
// Tested by tests/engine/runtime/cpu/cpu_kv_swap_test.cc.
#include "engine/runtime/cpu/cpu_kv_swap.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/common/host_info.h"

namespace onecard::engine {

absl::StatusOr<std::unique_ptr<CpuKvSwap>> CpuKvSwap::Create(std::span<float* const> pools,
                                                             const KvLayout& layout,
                                                             int64_t bytes) {
  std::vector<KvPoolPart> parts;
  for (float* pool : pools) {
    parts.push_back({reinterpret_cast<char*>(pool),
                     layout.BlockStride() * static_cast<int64_t>(sizeof(float))});
  }
  const int64_t block_bytes = KvSwapCopier::BlockBytes(parts);
  const int64_t num_blocks = block_bytes > 0 ? bytes / block_bytes : 0;
  if (num_blocks < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(bytes, " bytes hold no KV block of ", block_bytes, " bytes"));
  }
  const int64_t available = HostAvailableMemoryBytes();
  if (available > 0 && bytes > available) {
    return absl::ResourceExhaustedError(absl::StrCat("a swap space of ", bytes,
                                                     " bytes is more than the host has available (",
                                                     available, " bytes)"));
  }
  std::unique_ptr<CpuKvSwap> swap(new CpuKvSwap());
  const int32_t host_blocks =
      static_cast<int32_t>(std::min<int64_t>(num_blocks, std::numeric_limits<int32_t>::max()));
  swap->host_bytes_ = static_cast<size_t>(host_blocks * block_bytes);
  void* p =
      mmap(nullptr, swap->host_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot map a swap space of ", swap->host_bytes_, " bytes"));
  }
  swap->host_ = p;
  swap->copier_ =
      KvSwapCopier(std::move(parts), layout.num_blocks, static_cast<char*>(p), host_blocks);
  return swap;
}

CpuKvSwap::~CpuKvSwap() {
  if (host_ != nullptr) munmap(host_, host_bytes_);
}

absl::Status CpuKvSwap::Copy(std::span<const KvBlockCopy> copies, KvSwapDirection direction) const {
  return copier_.ForEachRun(copies, direction, [](char* dst, const char* src, int64_t bytes) {
    std::memcpy(dst, src, static_cast<size_t>(bytes));
    return absl::OkStatus();
  });
}

}  // namespace onecard::engine
