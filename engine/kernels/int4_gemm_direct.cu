// Int4Gemm's direct-load kernel: 1..8 rows without a prologue, the decode
// steps, where a step reads every weight once and the HBM is the floor
// (int4_gemm.h; layout in int4_layout.h). At one row the tensor cores idle
// and the kernel is bound by instruction issue, so every choice below
// saves instructions a 512-byte tile:
// - No producer warp and no block barrier. Each of a block's 8 warps owns
//   one 16-row tile of the row group being walked and copies its own codes
//   (16 bytes a lane a 64-column tile: the layout puts a lane's A fragments
//   of a tile together) and its rows' scale words, one a group, into a
//   private ring of kStages stages in shared memory with cp.async,
//   kStages - 1 subs of kTpu tiles ahead. A lane reads back only what it
//   copied itself, so cp.async.wait_group is the loop's only
//   synchronization. Addresses advance by constant strides within a sub.
// - Dequantization is one shift and one lop3 a register: the mma sums
//   P = sum (128 + q) x over the exact bf16 128 + q, a second mma with
//   A = 1 sums S = sum x, and once a group acc += s P + c S, with
//   c = -136 s (symmetric), -(128 + z) s (zero points) or m - 128 s (mins).
// - x comes straight from global memory through L1 (the block's 8 warps
//   read the same columns): 8 bytes a lane a 16-column slice, the mma's B
//   fragment; lanes of the rows past `rows` use zeros. The step's rows are
//   the mma's n, so 1..8 rows cost the same issue slots.
// - The stream-K split and the segment ends are the pipelined kernel's
//   (int4_gemm_internal.cuh); a row's result is the same bits for any of
//   1..8 rows.
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

constexpr int kTpu = 4;                                          // k tiles a sub
constexpr int kMaxSpans = kTpu * kInt4TileCols / kInt4MinGroup;  // groups a sub touches
constexpr int kDirectBlocksPerSm = 2;

template <Int4Offsets kKind>
struct DirectCfg {
  static constexpr bool kOffsets = kKind != Int4Offsets::kSymmetric;
  static constexpr int kStages = kOffsets ? 3 : 4;
};

// One warp's stage: the lane's 16 bytes of codes of each of the sub's
// tiles, and the scale (offset) words of its rows gr, gr + 8 for each group
// the sub touches.
template <Int4Offsets kKind>
struct WarpStage {
  uint4 codes[kTpu][32];
  uint32_t scales[kMaxSpans][32];
  uint32_t offsets[DirectCfg<kKind>::kOffsets ? kMaxSpans : 1][32];
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
                                      float inv_group) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int32_t rt = s.rg * kWarps + warp;
  if (rt >= a.n_tiles) return;
  const uint4* codes = a.codes + Int4TileIndex(rt, s.kt, a.k_tiles, a.n_tiles) * 32 + lane;
#pragma unroll
  for (int t = 0; t < kTpu; ++t) {
    if (t >= s.ntiles) break;
    cuda::CpAsync16(&st.codes[t][lane], codes + t * s.g * 32, true);
  }
  // Scale word of group gi: (rg * 8 * groups + gi * g + warp) * 8 + gr.
  const int32_t first = GroupOf(s.kt * kInt4TileCols, inv_group);
  const int32_t spans = GroupOf((s.kt + s.ntiles) * kInt4TileCols - 1, inv_group) - first + 1;
  const int64_t word =
      (int64_t{s.rg} * kWarps * a.num_groups + int64_t{first} * s.g + warp) * 8 + (lane >> 2);
  const uint32_t* scales = a.scales + word;
  const uint32_t* offsets = a.offsets + word;
#pragma unroll
  for (int sp = 0; sp < kMaxSpans; ++sp) {
    if (sp >= spans) break;
    cuda::CpAsync4(&st.scales[sp][lane], scales + sp * s.g * 8);
    if constexpr (DirectCfg<kKind>::kOffsets) {
      cuda::CpAsync4(&st.offsets[sp][lane], offsets + sp * s.g * 8);
    }
  }
}

// The B fragments of sub s: x[gr][col .. col + 3] for each 16-column slice
// (zero for lanes whose row gr is past the rows).
__device__ __forceinline__ void LoadX(const cuda::bf16* xrow, const Sub& s, uint2 (&xv)[kTpu][4]) {
  const uint2* x = reinterpret_cast<const uint2*>(xrow + s.kt * kInt4TileCols);
#pragma unroll
  for (int t = 0; t < kTpu; ++t) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      xv[t][i] = xrow != nullptr && t < s.ntiles ? __ldg(x + t * 16 + i * 4) : make_uint2(0, 0);
    }
  }
}

// A group's scales and the factor c of S for rows gr (.x) and gr + 8 (.y).
template <Int4Offsets kKind>
__device__ __forceinline__ Span SumSpan(const WarpStage<kKind>& st, int sp, int lane) {
  Span s;
  s.scale = HalfPair(st.scales[sp][lane]);
  if constexpr (kKind == Int4Offsets::kFloat) {
    const float2 m = HalfPair(st.offsets[sp][lane]);
    s.c = make_float2(m.x - 128.0f * s.scale.x, m.y - 128.0f * s.scale.y);
  } else if constexpr (kKind == Int4Offsets::kZero) {
    const uint32_t z = st.offsets[sp][lane];  // two int16 zero points, 0..127
    s.c = make_float2(-static_cast<float>(128 + (z & 0xFFFF)) * s.scale.x,
                      -static_cast<float>(128 + (z >> 16)) * s.scale.y);
  } else {
    s.c = make_float2(-136.0f * s.scale.x, -136.0f * s.scale.y);
  }
  return s;
}

template <Int4Offsets kKind>
__device__ __forceinline__ void Compute(const WarpStage<kKind>& st, const Sub& s, const Args& a,
                                        const uint2 (&xv)[kTpu][4], float inv_group,
                                        float (&acc)[1][4]) {
  const int lane = threadIdx.x & 31;
  const uint32_t ones[4] = {kOnes, kOnes, kOnes, kOnes};
  const int32_t col0 = s.kt * kInt4TileCols;
  int32_t left = (GroupOf(col0, inv_group) + 1) * a.group - col0;  // in the current group
  int sp = 0;
  Span span = SumSpan<kKind>(st, 0, lane);
  float p[1][4] = {}, sx[1][4] = {};
#pragma unroll
  for (int t = 0; t < kTpu; ++t) {
    if (t >= s.ntiles) break;
    const uint4 v = st.codes[t][lane];
    const uint32_t words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      uint32_t av[4];
#pragma unroll
      for (int m = 0; m < 4; ++m) av[m] = Dequant128(words[i], m);
      cuda::MmaBf16(p[0], av, xv[t][i].x, xv[t][i].y);
      cuda::MmaBf16(sx[0], ones, xv[t][i].x, xv[t][i].y);
      if (i % 2 == 0) continue;  // groups end on 32-column boundaries
      left -= 32;
      const bool last = t == s.ntiles - 1 && i == 3;
      if (left == 0 || last) {
        Flush<1, Int4Offsets::kFloat>(span, acc, p, sx);
        if (left == 0 && !last) {
          span = SumSpan<kKind>(st, ++sp, lane);
          left = a.group;
        }
      }
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
  Walker<kTpu> issue(begin, end, a);
#pragma unroll
  for (int j = 0; j < S - 1; ++j) {
    if (!issue.done()) Issue<kKind>(ring[j], issue.Next(a), a, inv_group);
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
    if (!issue.done()) Issue<kKind>(ring[(j + S - 1) % S], issue.Next(a), a, inv_group);
    cuda::CpAsyncCommit();
    const Sub s = walk.Next(a);
    uint2 xv[kTpu][4];
    LoadX(xrow, s, xv);
    cuda::CpAsyncWait<S - 1>();  // sub j's copies (this lane's own)
    if (s.rg * kWarps + warp < a.n_tiles) Compute<kKind>(ring[j % S], s, a, xv, inv_group, acc);
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
