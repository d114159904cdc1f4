// Int4Gemm on CUDA (see int4_gemm.h and the layout in int4_layout.h). Design,
// for the HBM floor of decode, where a step reads every weight once:
// - Tensor cores with the weights as the A operand: a warp owns one 16-row
//   tile and streams it along k, 16-byte loads (one 512-byte tile a warp-wide
//   load, skipping L1); the decode rows are the mma's n (8 a tile, padded
//   with zeros), so 1..16 rows cost the same dequantization.
// - Dequantization in registers: (word >> 4 m) & 0x000f000f | 0x43004300 is a
//   bf16 pair 128 + q, exact; the mma sums P = sum (128 + q) x over a group
//   and a second mma with A = 1 sums S = sum x, so that at the group's end
//   acc += s P + (o - 128 s) S (o = -8 s, -z s or m by the offset kind): three
//   instructions a code pair, the scales applied once a group, in fp32.
// - Work split "stream-K": the (row group of 8 tiles) x (64-column k tile)
//   iterations are cut into one equal contiguous share per resident block,
//   so every SM streams to the end whatever n and k are. A row group cut
//   between blocks is summed by the last block to finish its part, in block
//   order from partial slots (deterministic), which also writes y.
// - A block's shares are walked in sub-chunks of up to 8 k tiles: the codes of
//   the next sub-chunk are loaded into registers, and its x columns and the
//   warps' scales copied (cp.async) into shared memory, while this one runs.
// - Launched with programmatic dependent launch: the first codes and scales
//   are requested before griddepcontrol.wait.
// Tested by tests/gpu/int4_gemm_test.cc against Int4GemmRef.
#include <algorithm>

#include "engine/kernels/cuda_check.h"
#include "engine/kernels/cuda_common.cuh"
#include "engine/kernels/cuda_ptx.cuh"
#include "engine/kernels/int4_gemm.h"

namespace onecard::engine {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = 32 * kWarps;
constexpr int kMaxTpu = 8;  // k tiles a sub-chunk
constexpr int kXStride = kMaxTpu * kInt4TileCols + 16;  // bf16 a staged row (+32 bytes: no bank conflicts)
constexpr int kMaxSpans = 8;                             // groups a sub-chunk touches
constexpr uint32_t kOnes = 0x3F803F80u;                  // bf16 pair (1, 1)

enum class YKind : int32_t { kBf16, kBf16Add, kF32, kSiluMul };

struct Args {
  const uint4* codes;
  const uint32_t* scales;
  const uint32_t* offsets;
  int32_t n_tiles;  // n / 16
  int32_t k_tiles;  // k / 64
  int32_t group;
  int32_t num_groups;  // k / group
  Int4Offsets kind;
  const cuda::bf16* x;
  int64_t x_stride;
  const cuda::bf16* norm_w;  // null: no prologue
  float eps;
  void* y;
  YKind y_kind;
  int64_t n;
  int32_t rows;
  int32_t tpu;  // k tiles a sub-chunk (<= kMaxTpu, whole groups of 32 at most kMaxSpans)
  int32_t row_groups;
  int64_t iters;  // row_groups * k_tiles
  float* partials;
  int32_t* counters;
};

template <int NT>
struct Smem {
  cuda::bf16 x[2][8 * NT][kXStride];
  uint32_t scales[2][kWarps][8][kMaxSpans];
  uint32_t offsets[2][kWarps][8][kMaxSpans];
  float inv_rms[kInt4GemmMaxNormRows];
  int32_t last;
};

// First iteration of block b: b * iters / grid.
__device__ __forceinline__ int64_t ShareStart(int64_t b, const Args& a) {
  return b * a.iters / gridDim.x;
}

// The block whose share holds iteration i.
__device__ __forceinline__ int32_t BlockOf(int64_t i, const Args& a) {
  int64_t b = i * gridDim.x / a.iters;
  while (b + 1 < gridDim.x && ShareStart(b + 1, a) <= i) ++b;
  while (b > 0 && ShareStart(b, a) > i) --b;
  return static_cast<int32_t>(b);
}

// A sub-chunk: row group rg, k tiles [kt, kt + ntiles) of a segment (the
// part of one row group in this block's share).
struct Sub {
  int64_t it;  // first iteration
  int32_t rg, kt, ntiles;
  bool seg_last;  // ends its segment
  bool whole;     // its segment is the whole row group
};

__device__ __forceinline__ Sub MakeSub(int64_t it, int64_t share_begin, int64_t share_end,
                                       const Args& a) {
  Sub s;
  s.it = it;
  s.rg = static_cast<int32_t>(it / a.k_tiles);
  s.kt = static_cast<int32_t>(it % a.k_tiles);
  const int64_t row_begin = int64_t{s.rg} * a.k_tiles;
  const int64_t seg_end = share_end < row_begin + a.k_tiles ? share_end : row_begin + a.k_tiles;
  s.ntiles = static_cast<int32_t>(seg_end - it < a.tpu ? seg_end - it : a.tpu);
  s.seg_last = it + s.ntiles == seg_end;
  s.whole = share_begin <= row_begin && seg_end == row_begin + a.k_tiles;
  return s;
}

// The bf16 pair 128 + q of nibbles m and m + 4 of a code word.
__device__ __forceinline__ uint32_t Dequant128(uint32_t word, int m) {
  uint32_t out;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;\n"
      : "=r"(out)
      : "r"(word >> (4 * m)), "n"(0x000f000f), "n"(0x43004300));
  return out;
}

__device__ __forceinline__ void LoadCodes(uint4* buf, const Sub& s, const Args& a) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int32_t rt = s.rg * kWarps + warp;
  const uint4* tile = a.codes + (int64_t{rt} * a.k_tiles + s.kt) * 32 + lane;
#pragma unroll
  for (int t = 0; t < kMaxTpu; ++t) {
    if (t < s.ntiles && rt < a.n_tiles) buf[t] = cuda::LoadStreaming(tile + t * 32);
  }
}

// This warp's scale (and offset) words of the groups sub-chunk s touches.
template <int NT>
__device__ __forceinline__ void CopyScales(Smem<NT>& sm, int b, const Sub& s, const Args& a) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int32_t rt = s.rg * kWarps + warp;
  if (rt >= a.n_tiles) return;
  const int32_t g0 = s.kt * kInt4TileCols / a.group;
  const int32_t spans = ((s.kt + s.ntiles) * kInt4TileCols - 1) / a.group - g0 + 1;
  for (int i = lane; i < 8 * spans; i += 32) {
    const int gr = i / spans, sp = i % spans;
    const int64_t word = (int64_t{rt} * 8 + gr) * a.num_groups + g0 + sp;
    cuda::CpAsync4(&sm.scales[b][warp][gr][sp], a.scales + word);
    if (a.kind != Int4Offsets::kSymmetric) {
      cuda::CpAsync4(&sm.offsets[b][warp][gr][sp], a.offsets + word);
    }
  }
}

// x [rows, ntiles * 64 columns] of sub-chunk s into sm.x[b], rows past
// a.rows zero.
template <int NT>
__device__ __forceinline__ void CopyX(Smem<NT>& sm, int b, const Sub& s, const Args& a) {
  const int chunks_per_row = s.ntiles * (kInt4TileCols / 8);
  const int64_t col0 = int64_t{s.kt} * kInt4TileCols;
  for (int i = threadIdx.x; i < 8 * NT * chunks_per_row; i += kThreads) {
    const int row = i / chunks_per_row, c = i % chunks_per_row;
    const bool valid = row < a.rows;
    const cuda::bf16* src = valid ? a.x + row * a.x_stride + col0 + c * 8 : a.x;
    cuda::CpAsync16(&sm.x[b][row][c * 8], src, valid);
  }
}

// kRmsNorm: x' = bf16(w * (x * inv_rms)) in place (rms_norm.h's rounding).
template <int NT>
__device__ __forceinline__ void NormalizeX(Smem<NT>& sm, int b, const Sub& s, const Args& a) {
  const int chunks_per_row = s.ntiles * (kInt4TileCols / 8);
  const int64_t col0 = int64_t{s.kt} * kInt4TileCols;
  for (int i = threadIdx.x; i < a.rows * chunks_per_row; i += kThreads) {
    const int row = i / chunks_per_row, c = i % chunks_per_row;
    uint4* v = reinterpret_cast<uint4*>(&sm.x[b][row][c * 8]);
    float xf[8], wf[8];
    cuda::Unpack8(*v, xf);
    cuda::Unpack8(*reinterpret_cast<const uint4*>(a.norm_w + col0 + c * 8), wf);
#pragma unroll
    for (int e = 0; e < 8; ++e) xf[e] = wf[e] * (xf[e] * sm.inv_rms[row]);
    *v = cuda::Pack8(xf);
  }
}

__device__ __forceinline__ float2 HalfPair(uint32_t w) {
  return __half22float2(*reinterpret_cast<const __half2*>(&w));
}

// acc += s P + (o - 128 s) S for the group that just ended (span sp), rows
// gr and gr + 8 of the warp's tile; P and S start again from zero.
template <int NT>
__device__ __forceinline__ void Flush(const Smem<NT>& sm, int b, int sp, const Args& a,
                                      float (&acc)[NT][4], float (&p)[NT][4], float (&s)[NT][4]) {
  const int warp = threadIdx.x >> 5, gr = (threadIdx.x & 31) >> 2;
  const float2 scale = HalfPair(sm.scales[b][warp][gr][sp]);
  float2 c;  // o - 128 s
  if (a.kind == Int4Offsets::kSymmetric) {
    c = make_float2(-136.0f * scale.x, -136.0f * scale.y);
  } else {
    const uint32_t o = sm.offsets[b][warp][gr][sp];
    if (a.kind == Int4Offsets::kZero) {
      const float z_lo = static_cast<float>(static_cast<int16_t>(o & 0xFFFF));
      const float z_hi = static_cast<float>(static_cast<int16_t>(o >> 16));
      c = make_float2(-(z_lo + 128.0f) * scale.x, -(z_hi + 128.0f) * scale.y);
    } else {
      const float2 m = HalfPair(o);
      c = make_float2(m.x - 128.0f * scale.x, m.y - 128.0f * scale.y);
    }
  }
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float sc = e < 2 ? scale.x : scale.y, cc = e < 2 ? c.x : c.y;
      acc[nt][e] = fmaf(sc, p[nt][e], fmaf(cc, s[nt][e], acc[nt][e]));
      p[nt][e] = s[nt][e] = 0.0f;
    }
  }
}

// The tensor-core work of sub-chunk s: codes in `buf`, x and scales in sm[b].
template <int NT>
__device__ __forceinline__ void Compute(const Smem<NT>& sm, int b, const uint4* buf, const Sub& s,
                                        const Args& a, float (&acc)[NT][4]) {
  const int lane = threadIdx.x & 31, gr = lane >> 2, t4 = lane & 3;
  const uint32_t ones[4] = {kOnes, kOnes, kOnes, kOnes};
  float p[NT][4], sx[NT][4];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
    for (int e = 0; e < 4; ++e) p[nt][e] = sx[nt][e] = 0.0f;
  }
  const int32_t col0 = s.kt * kInt4TileCols;
  const int32_t g0 = col0 / a.group;
  int32_t boundary = (g0 + 1) * a.group;  // the next group's first column
  int sp = 0;
#pragma unroll
  for (int t = 0; t < kMaxTpu; ++t) {
    if (t >= s.ntiles) break;
    const uint32_t words[4] = {buf[t].x, buf[t].y, buf[t].z, buf[t].w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint32_t av[4] = {Dequant128(words[i], 0), Dequant128(words[i], 1),
                              Dequant128(words[i], 2), Dequant128(words[i], 3)};
      const int col = t * kInt4TileCols + 16 * i + 4 * t4;
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const uint2 bv = *reinterpret_cast<const uint2*>(&sm.x[b][nt * 8 + gr][col]);
        cuda::MmaBf16(p[nt], av, bv.x, bv.y);
        cuda::MmaBf16(sx[nt], ones, bv.x, bv.y);
      }
      const int32_t next_col = col0 + t * kInt4TileCols + 16 * i + 16;
      if (next_col == boundary || (t == s.ntiles - 1 && i == 3)) {
        Flush<NT>(sm, b, sp, a, acc, p, sx);
        if (next_col == boundary) boundary += a.group, ++sp;
      }
    }
  }
}

// Writes the outputs of the warp's tile rt from its sums v (rows gr, gr + 8;
// x rows nt * 8 + 2 t4 + {0, 1}).
template <int NT>
__device__ __forceinline__ void Epilogue(const Args& a, int32_t rt, const float (&v)[NT][4]) {
  const int lane = threadIdx.x & 31, gr = lane >> 2, t4 = lane & 3;
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const int m = nt * 8 + 2 * t4 + e;
      if (m >= a.rows) continue;
      if (a.y_kind == YKind::kSiluMul) {
        const float g = cuda::RoundTo<cuda::bf16>(v[nt][e]);
        const float u = cuda::RoundTo<cuda::bf16>(v[nt][e + 2]);
        static_cast<cuda::bf16*>(a.y)[m * (a.n / 2) + int64_t{rt} * 8 + gr] =
            __float2bfloat16_rn(g / (1.0f + expf(-g)) * u);
        continue;
      }
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int64_t o = m * a.n + int64_t{rt} * 16 + gr + 8 * half;
        const float val = v[nt][e + 2 * half];
        if (a.y_kind == YKind::kF32) {
          static_cast<float*>(a.y)[o] = val;
        } else if (a.y_kind == YKind::kBf16Add) {
          cuda::bf16* y = static_cast<cuda::bf16*>(a.y);
          y[o] = __float2bfloat16_rn(cuda::RoundTo<cuda::bf16>(val) + __bfloat162float(y[o]));
        } else {
          static_cast<cuda::bf16*>(a.y)[o] = __float2bfloat16_rn(val);
        }
      }
    }
  }
}

// Ends a segment: a whole row group writes y; a part leaves its sums in its
// slot, and the block that brings the last part sums the slots in order.
template <int NT>
__device__ void FinishSegment(Smem<NT>& sm, const Sub& s, const Args& a, float (&acc)[NT][4]) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int32_t rt = s.rg * kWarps + warp;
  if (s.whole) {
    if (rt < a.n_tiles) Epilogue<NT>(a, rt, acc);
    return;
  }
  constexpr int kSlotFloats = kThreads * NT * 4;
  float4* mine = reinterpret_cast<float4*>(a.partials + (int64_t{s.rg} + blockIdx.x) * kSlotFloats) +
                 threadIdx.x * NT;
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    __stcg(mine + nt, make_float4(acc[nt][0], acc[nt][1], acc[nt][2], acc[nt][3]));
  }
  __threadfence();
  __syncthreads();
  const int64_t row_begin = int64_t{s.rg} * a.k_tiles;
  const int32_t first = BlockOf(row_begin, a), last = BlockOf(row_begin + a.k_tiles - 1, a);
  if (threadIdx.x == 0) {
    sm.last = atomicAdd(&a.counters[s.rg], 1) == last - first;
  }
  __syncthreads();
  if (!sm.last) return;
  __threadfence();
  float sum[NT][4] = {};
  for (int32_t blk = first; blk <= last; ++blk) {
    const float4* slot =
        reinterpret_cast<const float4*>(a.partials + (int64_t{s.rg} + blk) * kSlotFloats) +
        threadIdx.x * NT;
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      const float4 v = __ldcg(slot + nt);
      sum[nt][0] += v.x, sum[nt][1] += v.y, sum[nt][2] += v.z, sum[nt][3] += v.w;
    }
  }
  if (rt < a.n_tiles) Epilogue<NT>(a, rt, sum);
  if (threadIdx.x == 0) a.counters[s.rg] = 0;
  (void)lane;
}

// inv_rms of every row (kRmsNorm), over all of k.
template <int NT>
__device__ __forceinline__ void RowNorms(Smem<NT>& sm, const Args& a, float* scratch) {
  const int k = a.k_tiles * kInt4TileCols;
  for (int row = 0; row < a.rows; ++row) {
    const uint4* x = reinterpret_cast<const uint4*>(a.x + row * a.x_stride);
    float sum_sq = 0.0f;
    for (int i = threadIdx.x; i < k / 8; i += kThreads) {
      float v[8];
      cuda::Unpack8(x[i], v);
#pragma unroll
      for (int e = 0; e < 8; ++e) sum_sq += v[e] * v[e];
    }
    const float total = cuda::BlockSum(sum_sq, scratch);
    if (threadIdx.x == 0) sm.inv_rms[row] = rsqrtf(total / static_cast<float>(k) + a.eps);
  }
}

// One sub-chunk with codes in `cur` while the next one's loads go to `next`.
template <int NT, int kBuf>
__device__ __forceinline__ Sub Step(Smem<NT>& sm, const Sub& s, int64_t share_begin,
                                    int64_t share_end, const Args& a, uint4* cur, uint4* next,
                                    float (&acc)[NT][4]) {
  const int64_t after = s.it + s.ntiles;
  Sub nx = after < share_end ? MakeSub(after, share_begin, share_end, a) : Sub{};
  const bool more = after < share_end;
  if (more) {
    LoadCodes(next, nx, a);
    CopyScales<NT>(sm, kBuf ^ 1, nx, a);
    CopyX<NT>(sm, kBuf ^ 1, nx, a);
  }
  cuda::CpAsyncCommit();
  cuda::CpAsyncWait<1>();  // everything but the group just committed
  __syncthreads();
  if (a.norm_w != nullptr) {
    NormalizeX<NT>(sm, kBuf, s, a);
    __syncthreads();
  }
  if (s.rg * kWarps + (threadIdx.x >> 5) < a.n_tiles) Compute<NT>(sm, kBuf, cur, s, a, acc);
  if (s.seg_last) {
    FinishSegment<NT>(sm, s, a, acc);
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.0f;
  }
  __syncthreads();  // sm[kBuf] is free for the sub-chunk after next
  if (!more) nx.ntiles = 0;
  return nx;
}

template <int NT>
__global__ void __launch_bounds__(kThreads, 2) Int4GemmKernel(Args a) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  Smem<NT>& sm = *reinterpret_cast<Smem<NT>*>(smem_raw);
  __shared__ float scratch[32];
  const int64_t share_begin = ShareStart(blockIdx.x, a);
  const int64_t share_end = ShareStart(int64_t{blockIdx.x} + 1, a);
  if (share_begin >= share_end) return;
  uint4 buf0[kMaxTpu], buf1[kMaxTpu];
  Sub s = MakeSub(share_begin, share_begin, share_end, a);
  LoadCodes(buf0, s, a);  // constants: before the wait
  CopyScales<NT>(sm, 0, s, a);
  cuda::GridDependencyWait();  // x and y come from the previous kernel
  cuda::LaunchDependents();
  CopyX<NT>(sm, 0, s, a);
  cuda::CpAsyncCommit();
  if (a.norm_w != nullptr) RowNorms<NT>(sm, a, scratch);
  float acc[NT][4] = {};
  while (true) {
    s = Step<NT, 0>(sm, s, share_begin, share_end, a, buf0, buf1, acc);
    if (s.ntiles == 0) break;
    s = Step<NT, 1>(sm, s, share_begin, share_end, a, buf1, buf0, acc);
    if (s.ntiles == 0) break;
  }
}

int NumSms() {
  static const int sms = [] {
    int device = 0, count = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
      return 132;
    }
    return count;
  }();
  return sms;
}

constexpr int kMaxNt = 2;
static_assert(kInt4GemmSlotBytes == int64_t{kThreads} * kMaxNt * 4 * 4, "a slot holds acc");
static_assert(kInt4GemmRowGroup == kWarps * kInt4TileRows, "a row group is a block's tiles");

template <int NT>
absl::Status Launch(const Args& base, cudaStream_t stream) {
  static const absl::StatusOr<int> per_sm = []() -> absl::StatusOr<int> {
    CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(
        Int4GemmKernel<NT>, cudaFuncAttributeMaxDynamicSharedMemorySize, sizeof(Smem<NT>)));
    int blocks = 0;
    CUDA_RETURN_IF_ERROR(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &blocks, Int4GemmKernel<NT>, kThreads, sizeof(Smem<NT>)));
    return std::clamp(blocks, 1, kInt4GemmMaxBlocksPerSm);
  }();
  RETURN_IF_ERROR(per_sm.status());
  Args a = base;
  const int64_t grid = std::min<int64_t>(a.iters, int64_t{NumSms()} * *per_sm);
  CUDA_RETURN_IF_ERROR(cuda::LaunchPdl(Int4GemmKernel<NT>, dim3(static_cast<int>(grid)),
                                       dim3(kThreads), sizeof(Smem<NT>), stream, a));
  return absl::OkStatus();
}

}  // namespace

absl::Status Int4Gemm(const Int4GemmParams& p, cudaStream_t stream) {
  RETURN_IF_ERROR(CheckInt4GemmParams(p, "Int4Gemm"));
  Args a{};
  a.codes = static_cast<const uint4*>(p.w.codes);
  a.scales = static_cast<const uint32_t*>(p.w.scales);
  a.offsets = static_cast<const uint32_t*>(p.w.offsets);
  a.n_tiles = static_cast<int32_t>(p.w.n / kInt4TileRows);
  a.k_tiles = static_cast<int32_t>(p.w.k / kInt4TileCols);
  a.group = p.w.group;
  a.num_groups = static_cast<int32_t>(p.w.k / p.w.group);
  a.kind = p.w.offset_kind;
  a.x = static_cast<const cuda::bf16*>(p.x);
  a.x_stride = p.x_row_stride;
  a.norm_w = p.prologue == GemvPrologue::kRmsNorm ? static_cast<const cuda::bf16*>(p.norm_weight)
                                                  : nullptr;
  a.eps = p.eps;
  a.y = p.y;
  a.y_kind = p.y_dtype == DType::kF32 ? YKind::kF32
             : p.silu_mul_y           ? YKind::kSiluMul
             : p.add_to_y             ? YKind::kBf16Add
                                      : YKind::kBf16;
  a.n = p.w.n;
  a.rows = p.rows;
  // Sub-chunks of whole 64-column tiles touch at most kMaxSpans groups.
  a.tpu = p.w.group == kInt4MinGroup ? kMaxSpans / 2 : kMaxTpu;
  a.row_groups = static_cast<int32_t>(cuda::CeilDiv(a.n_tiles, kWarps));
  a.iters = int64_t{a.row_groups} * a.k_tiles;
  const Int4GemmWorkspaceLayout ws = Int4GemmWorkspace(p.w.n, NumSms());
  if (p.workspace == nullptr || p.workspace_bytes < ws.total_bytes) {
    return absl::InvalidArgumentError(cuda::Cat("Int4Gemm: workspace of ", p.workspace_bytes,
                                                " bytes; n = ", p.w.n, " needs ", ws.total_bytes,
                                                " (Int4GemmWorkspaceBytes)"));
  }
  a.counters = static_cast<int32_t*>(p.workspace);
  a.partials = reinterpret_cast<float*>(static_cast<char*>(p.workspace) + ws.counter_bytes);
  if (p.rows <= 8) return Launch<1>(a, stream);
  return Launch<2>(a, stream);
}

}  // namespace onecard::engine
