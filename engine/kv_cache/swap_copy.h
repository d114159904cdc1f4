// KvSwapCopier: the copies of KV swap, shared by the backends
// (ModelRunner::SwapOut / SwapIn). The device KV cache is a list of parts,
// each a pool of num_device_blocks blocks (layer 0's K pool, its V pool,
// layer 1's K pool, ...); the swap space's host memory holds, for each part
// in turn, num_host_blocks blocks of that part's block bytes:
//   host: [part][host block][part's block bytes]
// so that a run of consecutive blocks (KvBlockRuns) is one contiguous range
// on both sides, and a run costs one copy a part whatever the parts' element
// types (a cuda cache may keep some layers in BF16, others in FP8).
// The memory is the caller's (pageable on cpu, pinned on cuda); the copy
// itself too (memcpy, cudaMemcpyAsync).
// Tested by tests/engine/kv_cache/swap_copy_test.cc.
#ifndef ONECARD_ENGINE_KV_CACHE_SWAP_COPY_H_
#define ONECARD_ENGINE_KV_CACHE_SWAP_COPY_H_

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "engine/common/status_macros.h"
#include "engine/kv_cache/swap_space.h"

namespace onecard::engine {

// One part of the device KV cache: [num_device_blocks, block_bytes] at base.
struct KvPoolPart {
  char* base = nullptr;
  int64_t block_bytes = 0;
};

enum class KvSwapDirection { kOut, kIn };  // device -> host, host -> device

class KvSwapCopier {
 public:
  KvSwapCopier() = default;
  // A swap space of num_host_blocks blocks at `host` (HostBytes(parts,
  // num_host_blocks) bytes) for `parts` of num_device_blocks blocks each.
  KvSwapCopier(std::vector<KvPoolPart> parts, int32_t num_device_blocks, char* host,
               int32_t num_host_blocks);

  // Bytes one block holds over every part.
  static int64_t BlockBytes(std::span<const KvPoolPart> parts);

  int64_t block_bytes() const { return BlockBytes(parts_); }
  int32_t num_host_blocks() const { return num_host_blocks_; }
  int32_t num_device_blocks() const { return num_device_blocks_; }
  std::span<const KvPoolPart> parts() const { return parts_; }
  // Where part i's blocks start in the host memory.
  char* HostPart(size_t i) const;

  // InvalidArgument naming the first pair with a block id out of range.
  absl::Status Check(std::span<const KvBlockCopy> copies) const;

  // Checks the copies, then calls copy(dst, src, bytes) -> absl::Status once
  // for each run of them (KvBlockRuns) and each part, in direction's sense;
  // returns the first error.
  template <typename CopyFn>
  absl::Status ForEachRun(std::span<const KvBlockCopy> copies, KvSwapDirection direction,
                          CopyFn copy) const {
    RETURN_IF_ERROR(Check(copies));
    return ForEachPart(KvBlockRuns(copies), direction, copy);
  }

  // The same over runs the caller made (KvBlockRuns of copies it checked).
  template <typename CopyFn>
  absl::Status ForEachPart(std::span<const KvBlockRun> runs, KvSwapDirection direction,
                           CopyFn copy) const {
    for (const KvBlockRun& run : runs) {
      char* host_part = host_;
      for (const KvPoolPart& part : parts_) {
        char* device = part.base + run.device_block * part.block_bytes;
        char* host = host_part + run.host_block * part.block_bytes;
        const int64_t bytes = run.num_blocks * part.block_bytes;
        RETURN_IF_ERROR(direction == KvSwapDirection::kOut ? copy(host, device, bytes)
                                                           : copy(device, host, bytes));
        host_part += num_host_blocks_ * part.block_bytes;
      }
    }
    return absl::OkStatus();
  }

 private:
  std::vector<KvPoolPart> parts_;
  int32_t num_device_blocks_ = 0;
  char* host_ = nullptr;
  int32_t num_host_blocks_ = 0;
};

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_KV_CACHE_SWAP_COPY_H_
