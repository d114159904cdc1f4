// The device side of L2Prefetch (l2_prefetch.h): one warp of each block asks
// for its block's share of every range.
#ifndef ONECARD_ENGINE_KERNELS_L2_PREFETCH_CUH_
#define ONECARD_ENGINE_KERNELS_L2_PREFETCH_CUH_

#include <cuda_runtime.h>

#include <cstdint>

#include "engine/kernels/l2_prefetch.h"

namespace onecard::engine::cuda {

// Block `block` of `blocks` asks the L2 cache for its part of each range of
// `p`: 16-byte units [block * per, (block + 1) * per) of the range, per =
// ceil(units / blocks), lane i of the calling warp piece i, i + 32, ...
__device__ __forceinline__ void IssueL2Prefetch(const L2Prefetch& p, int64_t block, int64_t blocks,
                                                int lane) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  constexpr int64_t kPieceUnits = kL2PrefetchPieceBytes / 16;
#pragma unroll
  for (int i = 0; i < kL2PrefetchRanges; ++i) {
    const int64_t units = p.range[i].bytes / 16;
    if (units <= 0) continue;
    const int64_t per = (units + blocks - 1) / blocks;
    const int64_t begin = block * per, end = min(units, begin + per);
    const char* base = static_cast<const char*>(p.range[i].ptr);
    for (int64_t u = begin + lane * kPieceUnits; u < end; u += 32 * kPieceUnits) {
      const uint32_t bytes = static_cast<uint32_t>(min(kPieceUnits, end - u) * 16);
      asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(base + u * 16), "r"(bytes)
                   : "memory");
    }
  }
#endif
}

}  // namespace onecard::engine::cuda

#endif  // ONECARD_ENGINE_KERNELS_L2_PREFETCH_CUH_
