// L2Prefetch: ranges of global memory that a kernel asks the L2 cache to
// fetch while it runs, for a kernel after it that will read them (a
// projection's weights, fetched while the attention before it leaves the HBM
// idle). A hint: no result depends on it, and a range may be dropped. Ranges
// start 16-byte aligned; a range's last bytes past a multiple of 16 are not
// fetched. The kernel that takes them (PagedAttentionSplitOptions::prefetch)
// splits each range evenly over its blocks, each block asking for its part in
// pieces of up to kL2PrefetchPieceBytes (cp.async.bulk.prefetch.L2, sm_90;
// nothing on older cards): l2_prefetch.cuh.
#ifndef ONECARD_ENGINE_KERNELS_L2_PREFETCH_H_
#define ONECARD_ENGINE_KERNELS_L2_PREFETCH_H_

#include <cstdint>

#include "engine/common/host_device.h"

namespace onecard::engine {

struct L2Range {
  const void* ptr = nullptr;
  int64_t bytes = 0;
};

// A weight's codes, scales and offsets (any of them empty).
inline constexpr int kL2PrefetchRanges = 3;
inline constexpr int64_t kL2PrefetchPieceBytes = 64 << 10;

struct L2Prefetch {
  L2Range range[kL2PrefetchRanges];
  ONECARD_HOST_DEVICE int64_t Bytes() const {
    int64_t total = 0;
    for (const L2Range& r : range) total += r.bytes > 0 ? r.bytes : 0;
    return total;
  }
};

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_KERNELS_L2_PREFETCH_H_
