// CopyKvBlocks: whole KV blocks between the device KV pools and a swap space
// in pinned host memory, moved by the SMs (loads and stores over PCIe to the
// host memory's device-visible addresses) rather than by the copy engines:
// a swap of scattered blocks is one launch however many blocks it moves,
// where the copy engines pay a submission per contiguous run (KvSwap,
// engine/runtime/cuda/kv_swap.h, picks between the two).
//
//   part p (a layer's K pool or V pool):
//     device: parts[p].device  [num_device_blocks][parts[p].block_bytes]
//     host:   parts[p].host    [num_host_blocks][parts[p].block_bytes]
//   pair (device_block d, host_block h): for every part p,
//     to host:   host block h of p  <- device block d of p
//     to device: device block d of p <- host block h of p
//
// The pairs' destinations must not overlap one another (KvSwap's copies
// never do: distinct blocks on either side), nor a source.
// Reference: CopyKvBlocksRef (kv_block_copy_ref.cc). CUDA: CopyKvBlocks
// (kv_block_copy.cu). Tested by tests/engine/kernels/kv_block_copy_ref_test.cc
// and tests/gpu/kv_block_copy_test.cc.
#ifndef ONECARD_ENGINE_KERNELS_KV_BLOCK_COPY_H_
#define ONECARD_ENGINE_KERNELS_KV_BLOCK_COPY_H_

#include <cstdint>
#include <span>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "engine/kernels/stream.h"

namespace onecard::engine {

struct KvCopyPart {
  char* device = nullptr;  // [num_device_blocks][block_bytes]
  char* host = nullptr;    // [num_host_blocks][block_bytes]
  int64_t block_bytes = 0;
};

struct KvBlockPair {
  int32_t device_block = 0;
  int32_t host_block = 0;
};

enum class KvCopyDirection { kToHost, kToDevice };

struct CopyKvBlocksParams {
  std::span<const KvCopyPart> parts;  // in host memory (the checks, the reference)
  // CUDA: the same parts in device memory, which the kernel reads.
  const KvCopyPart* device_parts = nullptr;
  std::span<const KvBlockPair> pairs;  // in host memory
  int32_t num_device_blocks = 0;
  int32_t num_host_blocks = 0;
  KvCopyDirection direction = KvCopyDirection::kToHost;
  // CUDA: blocks of the grid; 0 = 32 (kv_block_copy.cu says why).
  int32_t grid_blocks = 0;
};

// The checks of both implementations: parts set (pointers, block bytes > 0),
// and every pair's blocks in range (InvalidArgument naming the pair).
absl::Status CheckCopyKvBlocksParams(const CopyKvBlocksParams& params, absl::string_view op);

// memcpy a pair and a part (params.parts' device pointers must be host
// memory here).
absl::Status CopyKvBlocksRef(const CopyKvBlocksParams& params);
// Queued on `stream`; the host may reuse params.pairs once it returns (the
// pairs travel in the launches' parameters).
absl::Status CopyKvBlocks(const CopyKvBlocksParams& params, cudaStream_t stream);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_KERNELS_KV_BLOCK_COPY_H_
