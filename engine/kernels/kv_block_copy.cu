// CopyKvBlocks on CUDA (see kv_block_copy.h). A grid of 32 512-thread blocks
// (or params.grid_blocks) walks the (pair, part) items of a launch, a
// block an item: the item's block bytes in words of the widest type that
// every part's pointers and block bytes are aligned to (16, 4 or 1 bytes),
// four loads of every thread issued before their stores, so a block keeps
// 32 KiB in flight: what reads across PCIe need to reach the link's rate
// (about 1-2 us from load to data). The pairs travel in the launch's
// parameters (__grid_constant__, up to kPairsPerLaunch a launch; more take
// more launches), so the host needs no device buffer for them and may reuse
// its own at once. Tested by tests/gpu/kv_block_copy_test.cc against
// CopyKvBlocksRef.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <memory>

#include "engine/common/status_macros.h"
#include "engine/kernels/cuda_check.h"
#include "engine/kernels/kv_block_copy.h"

namespace onecard::engine {
namespace {

constexpr int kThreads = 512;
constexpr int kUnroll = 4;
// Parameters up to 32 KiB (CUDA 12.1+ on Volta and later): 28 KiB of pairs.
constexpr int kPairsPerLaunch = 3584;
// 1 MiB in flight: on the H200 32 blocks move scattered blocks at the same
// rate as one an SM (52.6 GB/s out, 51.4 in: bench/results/offload.md), and
// leave the other SMs to the compute stream's kernels.
constexpr int kDefaultGridBlocks = 32;

struct CopyArgs {
  const KvCopyPart* parts;
  int32_t num_parts;
  int32_t num_pairs;
  int32_t to_host;
  KvBlockPair pairs[kPairsPerLaunch];
};
static_assert(sizeof(CopyArgs) <= 32764, "kernel parameters are at most 32764 bytes");

template <typename V>
__global__ void __launch_bounds__(kThreads) CopyKvBlocksKernel(const __grid_constant__ CopyArgs a) {
  const int64_t items = static_cast<int64_t>(a.num_pairs) * a.num_parts;
  for (int64_t item = blockIdx.x; item < items; item += gridDim.x) {
    // A pair's parts on neighbouring blocks.
    const int pair = static_cast<int>(item / a.num_parts);
    const int p = static_cast<int>(item - static_cast<int64_t>(pair) * a.num_parts);
    const KvCopyPart part = a.parts[p];
    char* device = part.device + a.pairs[pair].device_block * part.block_bytes;
    char* host = part.host + a.pairs[pair].host_block * part.block_bytes;
    const V* src = reinterpret_cast<const V*>(a.to_host ? device : host);
    V* dst = reinterpret_cast<V*>(a.to_host ? host : device);
    const int64_t n = part.block_bytes / static_cast<int64_t>(sizeof(V));
    int64_t i = threadIdx.x;
    for (; i + (kUnroll - 1) * kThreads < n; i += kUnroll * kThreads) {
      V v[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) v[u] = src[i + u * kThreads];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) dst[i + u * kThreads] = v[u];
    }
    for (; i < n; i += kThreads) dst[i] = src[i];
  }
}

template <typename V>
absl::Status Launch(const CopyKvBlocksParams& p, int grid, cudaStream_t stream) {
  // The launches' arguments, 28 KiB: on the heap (the launch copies them).
  // Not thread_local: 28 KiB of static TLS in every thread of the process
  // leaves no room in threads made with small stacks (civetweb's, which then
  // fail to start).
  auto args_storage = std::make_unique<CopyArgs>();
  CopyArgs& args = *args_storage;
  args.parts = p.device_parts;
  args.num_parts = static_cast<int32_t>(p.parts.size());
  args.to_host = p.direction == KvCopyDirection::kToHost ? 1 : 0;
  for (size_t first = 0; first < p.pairs.size(); first += kPairsPerLaunch) {
    const size_t n = std::min<size_t>(kPairsPerLaunch, p.pairs.size() - first);
    std::copy_n(p.pairs.begin() + first, n, args.pairs);
    args.num_pairs = static_cast<int32_t>(n);
    const int64_t items = static_cast<int64_t>(n) * args.num_parts;
    const int blocks = static_cast<int>(std::min<int64_t>(grid, items));
    CopyKvBlocksKernel<V><<<blocks, kThreads, 0, stream>>>(args);
    CUDA_RETURN_IF_ERROR(cudaGetLastError());
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CopyKvBlocks(const CopyKvBlocksParams& p, cudaStream_t stream) {
  RETURN_IF_ERROR(CheckCopyKvBlocksParams(p, "CopyKvBlocks"));
  if (p.device_parts == nullptr) {
    return absl::InvalidArgumentError("CopyKvBlocks: device_parts must be set");
  }
  if (p.pairs.empty()) return absl::OkStatus();
  uint64_t align = 0;
  for (const KvCopyPart& part : p.parts) {
    align |= reinterpret_cast<uintptr_t>(part.device) | reinterpret_cast<uintptr_t>(part.host) |
             static_cast<uint64_t>(part.block_bytes);
  }
  const int grid = p.grid_blocks > 0 ? p.grid_blocks : kDefaultGridBlocks;
  if (align % 16 == 0) return Launch<uint4>(p, grid, stream);
  if (align % 4 == 0) return Launch<uint32_t>(p, grid, stream);
  return Launch<unsigned char>(p, grid, stream);
}

}  // namespace onecard::engine
