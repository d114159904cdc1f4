// Int4Gemm's kStream kernel (int4_gemm.cu, which alone includes this): the end
// of a consumer warp's segment. Its epilogue writes y from the row tile's
// sums (a residual add's y read ahead of the sums: LoadResidual), scaled by
// x_sum_sq's r first, and a folded RMSNorm's outputs (StoreFoldSums). Where the
// row group's k tiles were cut between blocks, the parts are summed first, in
// k order (deterministic), one of two ways:
//   stream-K (FinishSegment): through L2: a part's sums in a slot of the
//     workspace and an arrival counter a row tile; the warp that arrives last,
//     or finds the others in, sums the slots;
//   in a cluster (FinishInCluster; a cluster split's kernel): the row
//     group's parts are the blocks of one thread block cluster; each row
//     tile is finished by one of them, to whose shared memory the others send
//     their sums (distributed shared memory, completing on an mbarrier there):
//     no L2 round trip, no counter, no fence, the epilogues spread over the
//     cluster's blocks.
#ifndef ONECARD_ENGINE_KERNELS_INT4_GEMM_FINISH_CUH_
#define ONECARD_ENGINE_KERNELS_INT4_GEMM_FINISH_CUH_

#include <cstdint>

#include "engine/kernels/cuda_common.cuh"
#include "engine/kernels/cuda_pipeline.cuh"
#include "engine/kernels/cuda_ptx.cuh"
#include "engine/kernels/int4_codes.cuh"
#include "engine/kernels/int4_gemm_stream.cuh"

namespace onecard::engine::int4_stream {

using int4::YKind;

// Calls f(nt, e, m) for each x row m = nt * 8 + 2 t4 + e (< a.rows) whose
// sums this lane holds (v[nt][e] and v[nt][e + 2]: outputs gr and gr + 8 of
// the tile).
template <int NT, typename F>
__device__ __forceinline__ void ForLaneRows(const Args& a, F&& f) {
  const int t4 = threadIdx.x & 3;
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int m = nt * 8 + 2 * t4 + e;
      if (m < a.rows) f(nt, e, m);
    }
  }
}

// The values of y that a kBf16Add epilogue of the warp's tile rt adds its
// sums to, in the sums' layout (r[nt][e + 2 half]; untouched for other
// kinds): loaded before the split-K sums, so that their round trip to L2
// overlaps the counter's and the slots' instead of following them. Only the
// tile's finishing warp writes these outputs, after every part has read them.
// Up to 16 rows (kPrefetchResidual); past that the registers would spill and
// the epilogue reads y itself.
template <int NT>
inline constexpr bool kPrefetchResidual = NT <= 2;

// With a fold (kFold and Args::fold_w), also the norm weight of the lane's
// two outputs, gamma[half].
template <int NT, bool kFold>
__device__ __forceinline__ void LoadResidual(const Args& a, int32_t rt, float (&r)[NT][4],
                                             float (&gamma)[2]) {
  if (!kPrefetchResidual<NT> || a.y_kind != YKind::kBf16Add) return;
  const int gr = (threadIdx.x & 31) >> 2;
  if (kFold && a.fold_w != nullptr) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      gamma[half] = __bfloat162float(a.fold_w[int64_t{rt} * 16 + gr + 8 * half]);
    }
  }
  const cuda::bf16* y = static_cast<const cuda::bf16*>(a.y);
  ForLaneRows<NT>(a, [&](int nt, int e, int m) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      r[nt][e + 2 * half] = __bfloat162float(y[m * a.n + int64_t{rt} * 16 + gr + 8 * half]);
    }
  });
}

// The fold's sums of squares of tile rt (Args::fold_sum_sq): the lane's
// sq[nt][e] (its two outputs of row nt * 8 + 2 t4 + e) summed over the
// tile's 8 lanes of that row (gr), in a fixed order.
template <int NT>
__device__ __forceinline__ void StoreFoldSums(const Args& a, int32_t rt, float (&sq)[NT][2]) {
  const int lane = threadIdx.x & 31, t4 = lane & 3;
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      float s = sq[nt][e];
      s += __shfl_xor_sync(0xffffffffu, s, 4);
      s += __shfl_xor_sync(0xffffffffu, s, 8);
      s += __shfl_xor_sync(0xffffffffu, s, 16);
      const int m = nt * 8 + 2 * t4 + e;
      if (lane < 4 && m < a.rows) a.fold_sum_sq[int64_t{m} * a.n_tiles + rt] = s;
    }
  }
}

// Writes the outputs of the warp's tile rt from its sums v (rows gr, gr + 8;
// x rows nt * 8 + 2 t4 + {0, 1}); kBf16Add adds them to `residual`
// (LoadResidual) with StoreY's two roundings. kFold (up to 16 rows): each
// row's sums first scaled by row_scale[m] where given (x_sum_sq's r), and
// with Args::fold_w the next product's input and the tile's sums of squares
// written too; every lane of the warp calls it then (the shuffles).
template <int NT, bool kFold>
__device__ __forceinline__ void Epilogue(const Args& a, int32_t rt, const float (&v)[NT][4],
                                         const float (&residual)[NT][4], const float (&gamma)[2],
                                         const float* row_scale) {
  static_assert(!kFold || kPrefetchResidual<NT>, "folds up to 16 rows");
  const int gr = (threadIdx.x & 31) >> 2;
  const bool fold = kFold && a.fold_w != nullptr;
  float sq[NT][2] = {};
  ForLaneRows<NT>(a, [&](int nt, int e, int m) {
    const float scale = kFold && row_scale != nullptr ? row_scale[m] : 1.0f;
    if (a.y_kind == YKind::kSiluMul) {
      int4::StoreSiluMul(a, m, int64_t{rt} * 8 + gr, scale * v[nt][e], scale * v[nt][e + 2]);
      return;
    }
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int64_t o = m * a.n + int64_t{rt} * 16 + gr + 8 * half;
      const float val = scale * v[nt][e + 2 * half];
      if (kPrefetchResidual<NT> && a.y_kind == YKind::kBf16Add) {
        const cuda::bf16 h =
            __float2bfloat16_rn(cuda::RoundTo<cuda::bf16>(val) + residual[nt][e + 2 * half]);
        static_cast<cuda::bf16*>(a.y)[o] = h;
        if (fold) {
          const float hf = __bfloat162float(h);
          a.fold_x[o] = __float2bfloat16_rn(gamma[half] * hf);
          sq[nt][e] = fmaf(hf, hf, sq[nt][e]);
        }
      } else {
        int4::StoreY(a, o, val);
      }
    }
  });
  if (fold) StoreFoldSums<NT>(a, rt, sq);
}

// This lane's NT float4 of the partial slot of block blk's part of the
// warp's tile in row group s.rg.
template <int NT>
__device__ __forceinline__ float4* PartSlot(const Sub& s, const Args& a, int32_t blk) {
  constexpr int kSlotFloats = 32 * NT * 4;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  return reinterpret_cast<float4*>(a.partials +
                                   ((int64_t{s.rg} + blk) * kWarps + warp) * kSlotFloats) +
         lane * NT;
}

// The sum of a split tile's parts, the slots of blocks first..last in block
// order (this block's part from acc, not read back): a chunk of slots' loads
// is issued before any of them is used, so a tile of p parts waits about
// p / kChunk L2 round trips, not p.
template <int NT>
__device__ __forceinline__ void SumParts(const Sub& s, const Args& a, int32_t first, int32_t last,
                                         const float (&acc)[NT][4], float (&sum)[NT][4]) {
  constexpr int kChunk = NT >= 8 ? 1 : 8 / NT;
  const int32_t self = blockIdx.x;
  for (int32_t b0 = first; b0 <= last; b0 += kChunk) {
    float4 v[kChunk][NT];
#pragma unroll
    for (int c = 0; c < kChunk; ++c) {
      const int32_t blk = b0 + c;
      const float4* slot = PartSlot<NT>(s, a, blk);
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        v[c][nt] = blk <= last && blk != self
                       ? __ldcg(slot + nt)
                       : make_float4(acc[nt][0], acc[nt][1], acc[nt][2], acc[nt][3]);
      }
    }
#pragma unroll
    for (int c = 0; c < kChunk; ++c) {
      if (b0 + c > last) break;
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        sum[nt][0] += v[c][nt].x, sum[nt][1] += v[c][nt].y;
        sum[nt][2] += v[c][nt].z, sum[nt][3] += v[c][nt].w;
      }
    }
  }
}

// Ends the warp's segment of tile rt: a whole row group writes y. A part
// whose tile's other parts are all in already (the counter, read with
// acquire: the usual case for the part that ends a block's share, at the
// end of the launch) sums them and writes y without publishing its own;
// otherwise it leaves its sums in its slot and arrives on the counter, and
// the warp that arrives last sums the slots and writes y. Either way the
// parts are summed in block order (deterministic).
template <int NT, bool kFold>
__device__ void FinishSegment(const Sub& s, const Args& a, const float (&acc)[NT][4],
                              const float* row_scale) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int32_t rt = s.rg * kWarps + warp;
  if (rt >= a.n_tiles) return;
  float residual[NT][4] = {}, gamma[2] = {};
  LoadResidual<NT, kFold>(a, rt, residual, gamma);
  if (s.whole) {
    Epilogue<NT, kFold>(a, rt, acc, residual, gamma, row_scale);
    return;
  }
  const int64_t row_begin = int64_t{s.rg} * a.k_tiles;
  const int32_t first = BlockOf(row_begin, a), last = BlockOf(row_begin + a.k_tiles - 1, a);
  int32_t* counter = a.counters_end - 1 - rt;
  // Every lane reads the counter (one transaction), each its own acquire.
  const bool others_in = __all_sync(0xffffffffu, cuda::LoadAcquireGpu(counter) == last - first);
  if (!others_in) {
    float4* slot = PartSlot<NT>(s, a, blockIdx.x);
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      __stcg(slot + nt, make_float4(acc[nt][0], acc[nt][1], acc[nt][2], acc[nt][3]));
    }
    // The warp's barrier orders its lanes' stores before lane 0's release
    // (cumulative), and lane 0's acquire before the lanes' loads after it.
    __syncwarp();
    int is_last = 0;
    if (lane == 0) is_last = cuda::AtomicAddAcqRelGpu(counter, 1) == last - first;
    if (!__shfl_sync(0xffffffffu, is_last, 0)) return;
    __syncwarp();
  }
  float sum[NT][4] = {};
  SumParts<NT>(s, a, first, last, acc, sum);
  Epilogue<NT, kFold>(a, rt, sum, residual, gamma, row_scale);
  if (lane == 0) *counter = 0;
}

// Whether launches of NT row tiles may split in clusters (Int4Gemm's Launch
// asks for one up to 16 rows).
template <int NT>
inline constexpr bool kClusterSplit = NT <= 2;

// What a cluster split's block receives from the cluster's other blocks,
// after its Smem<NT> (ClusterPartsOf): the parts of the row tiles it
// finishes, those of warps w = rank + G i (G = Args::cluster, a power of two
// up to kWarps; i < kWarps / G), from each block s of the cluster at
// part[((s * kWarps / G + i) * 32 + lane) * NT + nt] (its own never), and the
// mbarrier on which they complete.
template <int NT>
struct ClusterParts {
  uint64_t bar;
  float4 part[kWarps * 32 * NT];  // 16-byte aligned (float4's alignment), as st.async needs
};

template <int NT>
inline constexpr size_t kClusterSmemOffset = (sizeof(Smem<NT>) + 15) / 16 * 16;
// The dynamic shared memory of a cluster split's block.
template <int NT>
inline constexpr size_t kClusterSmemBytes = kClusterSmemOffset<NT> + sizeof(ClusterParts<NT>);

template <int NT>
__device__ __forceinline__ ClusterParts<NT>& ClusterPartsOf(Smem<NT>& sm) {
  return *reinterpret_cast<ClusterParts<NT>*>(reinterpret_cast<unsigned char*>(&sm) +
                                              kClusterSmemOffset<NT>);
}

// A cluster split block's setup, by thread 0 with the other barriers (before
// FenceMbarrierInit): the parts' barrier expects the bytes the cluster's
// other blocks send it.
template <int NT>
__device__ __forceinline__ void InitClusterParts(Smem<NT>& sm, const Args& a) {
  ClusterParts<NT>& parts = ClusterPartsOf(sm);
  cuda::MbarrierInit(&parts.bar, 1);
  cuda::MbarrierArriveExpectTx(
      &parts.bar,
      static_cast<uint32_t>((a.cluster - 1) * (kWarps / a.cluster) * 32 * NT * sizeof(float4)));
}

// Ends the warp's segment in a cluster split (its block's whole share, one
// segment). Row tile rt's parts are finished by the cluster's block of rank
// warp % G: the other blocks' warp sends its sums there (st.async into that
// block's ClusterParts, once the cluster barrier, which every thread arrived
// on at its block's start and waits on here, says every block is running)
// and is done; that block's warp waits for them on its parts' barrier, sums
// the G parts in rank (k) order and writes y. Every block finishes
// kWarps / G row tiles, and none exits before the parts sent to it have
// landed (its finishing warps wait for all of them).
template <int NT, bool kFold>
__device__ void FinishInCluster(Smem<NT>& sm, const Sub& s, const Args& a,
                                const float (&acc)[NT][4], const float* row_scale) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int32_t g = a.cluster, per = kWarps / g, rt = s.rg * kWarps + warp;
  const uint32_t rank = cuda::ClusterRank();
  const uint32_t finisher = static_cast<uint32_t>(warp % g);
  ClusterParts<NT>& parts = ClusterPartsOf(sm);
  // Where block `from`'s part of this warp's tile lands in the finisher's ClusterParts.
  const auto part = [&](int32_t from, int nt) -> float4& {
    return parts.part[((from * per + warp / g) * 32 + lane) * NT + nt];
  };
  const auto own = [&](int nt) {
    return make_float4(acc[nt][0], acc[nt][1], acc[nt][2], acc[nt][3]);
  };
  cuda::ClusterWaitAcquire();
  if (finisher != rank) {
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      cuda::StoreAsyncCluster(&part(static_cast<int32_t>(rank), nt), &parts.bar, finisher, own(nt));
    }
    return;
  }
  float residual[NT][4] = {}, gamma[2] = {};
  if (rt < a.n_tiles) LoadResidual<NT, kFold>(a, rt, residual, gamma);
  cuda::MbarrierWait(&parts.bar, 0);
  if (rt >= a.n_tiles) return;
  float sum[NT][4] = {};  // as SumParts: the parts added to zero in rank (k) order
  for (int32_t r = 0; r < g; ++r) {
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      const float4 v = r == static_cast<int32_t>(rank) ? own(nt) : part(r, nt);
      sum[nt][0] += v.x, sum[nt][1] += v.y, sum[nt][2] += v.z, sum[nt][3] += v.w;
    }
  }
  Epilogue<NT, kFold>(a, rt, sum, residual, gamma, row_scale);
}

// Ends the warp's segment: FinishInCluster in a cluster split (kCluster),
// else FinishSegment; kFold: x_sum_sq's r from sm.inv_rms (RowScales).
template <int NT, bool kCluster, bool kFold>
__device__ __forceinline__ void Finish(Smem<NT>& sm, const Sub& s, const Args& a,
                                       const float (&acc)[NT][4]) {
  const float* row_scale = kFold && a.x_sum_sq != nullptr ? sm.inv_rms : nullptr;
  if constexpr (kCluster) {
    FinishInCluster<NT, kFold>(sm, s, a, acc, row_scale);
  } else {
    FinishSegment<NT, kFold>(s, a, acc, row_scale);
  }
}

}  // namespace onecard::engine::int4_stream

#endif  // ONECARD_ENGINE_KERNELS_INT4_GEMM_FINISH_CUH_
