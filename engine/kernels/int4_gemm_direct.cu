// Int4Gemm's direct-load kernel: 1..8 rows without a prologue, the decode
// steps, where a step reads every weight once and the HBM is the floor
// (int4_gemm.h; layout in int4_layout.h). Design:
// - No producer warp and no block barrier. Each of a block's 8 warps owns
//   one 16-row tile of the row group being walked and copies its own codes
//   (16 bytes a lane a 64-column tile: the layout puts a lane's A fragments
//   of a tile together) and its rows' scale words into a private ring of
//   kStages stages in shared memory with cp.async, kStages - 1 subs of kTpu
//   tiles ahead. A lane reads back only what it copied itself, so
//   cp.async.wait_group is the loop's only synchronization.
// - x comes straight from global memory through L1 (the block's 8 warps
//   read the same columns): 8 bytes a lane a 16-column slice, the mma's B
//   fragment; lanes of the rows past `rows` use zeros.
// - The step's rows are the mma's n, so 1..8 rows cost the same issue
//   slots; the stream-K split, the arithmetic (32 columns of exact q - z
//   codes a flush) and the segment ends are the pipelined kernel's
//   (int4_gemm_internal.cuh), so a row's result does not depend on which of
//   the two kernels ran it.
// - Launched with programmatic dependent launch: the first kStages - 1
//   subs' codes and scales are requested before griddepcontrol.wait.
// Tested by tests/gpu/int4_gemm_test.cc against Int4GemmRef (1..8 rows).
#include <algorithm>

#include "engine/kernels/cuda_check.h"
#include "engine/kernels/cuda_common.cuh"
#include "engine/kernels/cuda_ptx.cuh"
#include "engine/kernels/int4_gemm.h"
#include "engine/kernels/int4_gemm_internal.cuh"

namespace onecard::engine::int4_gemm_internal {
namespace {

constexpr int kTpu = 4;  // k tiles a sub
constexpr int kDirectBlocksPerSm = 2;

template <Int4Offsets kKind>
struct DirectCfg {
  static constexpr bool kOffsets = kKind != Int4Offsets::kSymmetric;
  static constexpr int kStages = kOffsets ? 3 : 4;
};

// One warp's stage: for each of the sub's tiles, the lane's 16 bytes of
// codes and the scale (offset) words of its rows gr, gr + 8 for the tile's
// two 32-column halves (the second only when groups are not whole tiles).
template <Int4Offsets kKind>
struct WarpStage {
  uint4 codes[kTpu][32];
  uint32_t scales[kTpu][2][32];
  uint32_t offsets[DirectCfg<kKind>::kOffsets ? kTpu : 1][2][32];
};

template <Int4Offsets kKind>
constexpr size_t kDirectSmem = sizeof(WarpStage<kKind>) * DirectCfg<kKind>::kStages* kWarps;

// The group of column c, exact for c < 2^22 - 1 (kInt4MaxK).
__device__ __forceinline__ int32_t GroupOf(int32_t c, float inv_group) {
  return __float2int_rd((static_cast<float>(c) + 0.5f) * inv_group);
}

// Requests sub s of the warp's tile into its stage.
template <Int4Offsets kKind>
__device__ __forceinline__ void Issue(WarpStage<kKind>& st, const Sub& s, const Args& a,
                                      float inv_group, bool split) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int32_t rt = s.rg * kWarps + warp;
  if (rt >= a.n_tiles) return;
  // Scale word of group gi: base + gi * g * 8 (int4_layout.h).
  const int64_t base = (int64_t{s.rg} * kWarps * a.num_groups + warp) * 8 + (lane >> 2);
  const int64_t tile0 = Int4TileIndex(rt, s.kt, a.k_tiles, a.n_tiles);
#pragma unroll
  for (int t = 0; t < kTpu; ++t) {
    if (t >= s.ntiles) break;
    cuda::CpAsync16(&st.codes[t][lane], a.codes + (tile0 + int64_t{t} * s.g) * 32 + lane, true);
    const int32_t c0 = (s.kt + t) * kInt4TileCols;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if (h == 1 && !split) break;
      const int64_t word = base + int64_t{GroupOf(c0 + 32 * h, inv_group)} * s.g * 8;
      cuda::CpAsync4(&st.scales[t][h][lane], a.scales + word);
      if constexpr (DirectCfg<kKind>::kOffsets) {
        cuda::CpAsync4(&st.offsets[t][h][lane], a.offsets + word);
      }
    }
  }
}

// The B fragments of sub s: x[gr][col .. col + 3] for each 16-column slice
// (zero for lanes whose row gr is past the rows).
__device__ __forceinline__ void LoadX(const cuda::bf16* xrow, const Sub& s, uint2 (&xv)[kTpu][4]) {
#pragma unroll
  for (int t = 0; t < kTpu; ++t) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int32_t col = (s.kt + t) * kInt4TileCols + 16 * i;
      xv[t][i] = xrow != nullptr && t < s.ntiles ? __ldg(reinterpret_cast<const uint2*>(xrow + col))
                                                 : make_uint2(0, 0);
    }
  }
}

template <Int4Offsets kKind>
__device__ __forceinline__ void Compute(const WarpStage<kKind>& st, const Sub& s,
                                        const uint2 (&xv)[kTpu][4], bool split,
                                        float (&acc)[1][4]) {
  const int lane = threadIdx.x & 31;
  const uint32_t ones[4] = {kOnes, kOnes, kOnes, kOnes};
#pragma unroll
  for (int t = 0; t < kTpu; ++t) {
    if (t >= s.ntiles) break;
    const uint4 v = st.codes[t][lane];
    const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int hs = split ? h : 0;
      const Span span = MakeSpan<kKind>(st.scales[t][hs][lane],
                                        DirectCfg<kKind>::kOffsets ? st.offsets[t][hs][lane] : 0u);
      float p[1][4] = {}, sx[1][4] = {};
#pragma unroll
      for (int i = 2 * h; i < 2 * h + 2; ++i) {
        uint32_t av[4];
        DequantWord<kKind>(words[i], span, av);
        cuda::MmaBf16(p[0], av, xv[t][i].x, xv[t][i].y);
        if constexpr (kSumX<kKind>) cuda::MmaBf16(sx[0], ones, xv[t][i].x, xv[t][i].y);
      }
      Flush<1, kKind>(span, acc, p, sx);
    }
  }
}

template <Int4Offsets kKind>
__global__ void __launch_bounds__(32 * kWarps, kDirectBlocksPerSm) Int4GemmDirectKernel(Args a) {
  constexpr int S = DirectCfg<kKind>::kStages;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  WarpStage<kKind>* ring = reinterpret_cast<WarpStage<kKind>*>(smem_raw) + warp * S;
  const int64_t begin = ShareStart(blockIdx.x, a);
  const int64_t end = ShareStart(int64_t{blockIdx.x} + 1, a);
  if (begin >= end) return;
  const float inv_group = 1.0f / static_cast<float>(a.group);
  const bool split = a.group % kInt4TileCols != 0;
  Walker<kTpu> issue(begin, end, a);
#pragma unroll
  for (int j = 0; j < S - 1; ++j) {
    if (!issue.done()) Issue<kKind>(ring[j], issue.Next(a), a, inv_group, split);
    cuda::CpAsyncCommit();
  }
  cuda::GridDependencyWait();  // x and y come from the previous kernel
  cuda::LaunchDependents();
  const int gr = lane >> 2;
  const cuda::bf16* xrow = gr < a.rows ? a.x + gr * a.x_stride + 4 * (lane & 3) : nullptr;
  float acc[1][4] = {};
  Walker<kTpu> walk(begin, end, a);
  for (int j = 0; !walk.done(); ++j) {
    // The stage read last iteration takes the sub S - 1 ahead.
    if (!issue.done()) Issue<kKind>(ring[(j + S - 1) % S], issue.Next(a), a, inv_group, split);
    cuda::CpAsyncCommit();
    const Sub s = walk.Next(a);
    uint2 xv[kTpu][4];
    LoadX(xrow, s, xv);
    cuda::CpAsyncWait<S - 1>();  // sub j's copies (this lane's own)
    if (s.rg * kWarps + warp < a.n_tiles) Compute<kKind>(ring[j % S], s, xv, split, acc);
    if (s.seg_last) {
      FinishSegment<1>(s, a, acc);
      acc[0][0] = acc[0][1] = acc[0][2] = acc[0][3] = 0.0f;
    }
  }
}

}  // namespace

template <Int4Offsets kKind>
absl::Status LaunchDirect(const Args& a, cudaStream_t stream) {
  static const absl::StatusOr<int> per_sm = []() -> absl::StatusOr<int> {
    auto* kernel = Int4GemmDirectKernel<kKind>;
    CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                              kDirectSmem<kKind>));
    int blocks = 0;
    CUDA_RETURN_IF_ERROR(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, 32 * kWarps,
                                                                       kDirectSmem<kKind>));
    return std::clamp(blocks, 1, kDirectBlocksPerSm);
  }();
  RETURN_IF_ERROR(per_sm.status());
  const int64_t grid = std::min<int64_t>(a.iters, int64_t{NumSms()} * *per_sm);
  CUDA_RETURN_IF_ERROR(cuda::LaunchPdl(Int4GemmDirectKernel<kKind>, dim3(static_cast<int>(grid)),
                                       dim3(32 * kWarps), kDirectSmem<kKind>, stream, a));
  return absl::OkStatus();
}

template absl::Status LaunchDirect<Int4Offsets::kSymmetric>(const Args&, cudaStream_t);
template absl::Status LaunchDirect<Int4Offsets::kZero>(const Args&, cudaStream_t);
template absl::Status LaunchDirect<Int4Offsets::kFloat>(const Args&, cudaStream_t);

}  // namespace onecard::engine::int4_gemm_internal
