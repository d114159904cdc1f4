// The parts of Gemv (gemv.h) that its BF16 kernel (gemv.cu) and its FP8
// kernel (gemv_fp8.cu) share: the launch geometry, a warp's walk over its
// weight rows chunk by chunk, staging x' in shared memory, and the end of an
// output (warp sum, scale, epilogue). Not an API.
#ifndef ONECARD_ENGINE_KERNELS_GEMV_INTERNAL_CUH_
#define ONECARD_ENGINE_KERNELS_GEMV_INTERNAL_CUH_

#include "absl/status/status.h"
#include "engine/kernels/cuda_common.cuh"
#include "engine/kernels/cuda_ptx.cuh"
#include "engine/kernels/gemv.h"

namespace onecard::engine::gemv_internal {

inline constexpr int kThreads = 256;
inline constexpr int kWarps = kThreads / 32;
// x' in shared memory: num_rows * k * 2 bytes, up to the opt-in limit of one
// block an SM less the static scratch (4 rows of 28672: a 70B's down).
inline constexpr int64_t kMaxSmemBytes = 2 * kGemvMaxRows * 28672;

enum class Out { kBf16, kBf16Add, kF32, kSiluMul };

struct GemvArgs {
  const cuda::bf16* x;
  int64_t x_row_stride;
  const uint4* norm_weight;
  float eps;
  const uint4* w;       // BF16 rows (8 values a vector) or FP8 codes (16)
  const float* scales;  // FP8 only (gemv.h: w_scales)
  void* y;
  int64_t n;
  int32_t kvec;           // k / 8: x' vectors a row
  int32_t scale_blocks;   // FP8 kBlock128: ceil(k / 128), scales a 128-row block
  bool early_dependents;  // LaunchSettings::gemv_early_dependents (cuda::PdlEnter)
};

__device__ __forceinline__ float Silu(float g) { return g / (1.0f + expf(-g)); }

// Where a warp's next chunk of weights starts: `base` vectors into part
// `part` (gate 0, up 1 under SiLU·mul) of output j's rows.
struct Chunk {
  int64_t j;
  int part;
  int base;
};

// The chunk after c: `step` vectors on, else the next part, else the warp's
// next output (`total_warps` on).
template <int kParts>
__device__ __forceinline__ Chunk NextChunk(const Chunk& c, int step, int row_vectors,
                                           int64_t total_warps) {
  Chunk n = c;
  n.base += step;
  if (n.base >= row_vectors) {
    n.base = 0;
    if (++n.part == kParts) {
      n.part = 0;
      n.j += total_warps;
    }
  }
  return n;
}

// A lane's kUnroll 16-byte loads of the chunk at `base` of a weight row of
// `row_vectors` vectors (past its end: zeros), lanes 32 vectors apart.
template <int kUnroll>
__device__ __forceinline__ void LoadChunk(uint4* wv, const uint4* row, int base, int row_vectors,
                                          int lane) {
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const int idx = base + u * 32 + lane;
    wv[u] = idx < row_vectors ? cuda::LoadStreaming(row + idx) : make_uint4(0, 0, 0, 0);
  }
}

// Stages x' [M][kvec] (BF16 vectors) in shared memory.
template <int M, GemvPrologue P>
__device__ __forceinline__ void StageX(const GemvArgs& a, uint4* xs, float* scratch) {
  for (int m = 0; m < M; ++m) {
    const uint4* row = reinterpret_cast<const uint4*>(a.x + m * a.x_row_stride);
    if constexpr (P == GemvPrologue::kRmsNorm) {
      float sum_sq = 0.0f;
      for (int i = threadIdx.x; i < a.kvec; i += kThreads) {
        float v[8];
        cuda::Unpack8(row[i], v);
#pragma unroll
        for (int e = 0; e < 8; ++e) sum_sq += v[e] * v[e];
      }
      const float k = static_cast<float>(a.kvec) * 8.0f;
      const float inv_rms = rsqrtf(cuda::BlockSum(sum_sq, scratch) / k + a.eps);
      for (int i = threadIdx.x; i < a.kvec; i += kThreads) {
        float v[8], w[8];
        cuda::Unpack8(row[i], v);
        cuda::Unpack8(a.norm_weight[i], w);
#pragma unroll
        for (int e = 0; e < 8; ++e) v[e] = w[e] * (v[e] * inv_rms);
        xs[m * a.kvec + i] = cuda::Pack8(v);
      }
    } else if constexpr (P == GemvPrologue::kSiluMul) {
      for (int i = threadIdx.x; i < a.kvec; i += kThreads) {
        float g[8], u[8];
        cuda::Unpack8(row[i], g);
        cuda::Unpack8(row[a.kvec + i], u);
#pragma unroll
        for (int e = 0; e < 8; ++e) g[e] = Silu(g[e]) * u[e];
        xs[m * a.kvec + i] = cuda::Pack8(g);
      }
    } else {
      for (int i = threadIdx.x; i < a.kvec; i += kThreads) {
        cuda::CpAsync16(&xs[m * a.kvec + i], row + i, true);
      }
    }
  }
  if constexpr (P == GemvPrologue::kNone) {
    cuda::CpAsyncCommit();
    cuda::CpAsyncWait<0>();
  }
}

// Ends output `j` of every row: acc holds the lanes' partial dots (of the
// up row for kSiluMul, whose gate dots are already summed and scaled in
// `gate`); the sum is multiplied by `scale` (the weight row's FP8 scale; the
// BF16 kernel passes the literal 1).
template <int M, Out kOut>
__device__ __forceinline__ void Finish(const GemvArgs& a, float* acc, const float* gate, int64_t j,
                                       int lane, float scale) {
#pragma unroll
  for (int m = 0; m < M; ++m) {
    const float v = cuda::WarpSum(acc[m]) * scale;
    acc[m] = 0.0f;
    if (lane != 0) continue;
    const int64_t o = m * a.n + j;
    if constexpr (kOut == Out::kF32) {
      static_cast<float*>(a.y)[o] = v;
    } else if constexpr (kOut == Out::kBf16Add) {
      cuda::bf16* y = static_cast<cuda::bf16*>(a.y);
      y[o] = __float2bfloat16_rn(cuda::RoundTo<cuda::bf16>(v) + __bfloat162float(y[o]));
    } else if constexpr (kOut == Out::kSiluMul) {
      const float g = cuda::RoundTo<cuda::bf16>(gate[m]);
      static_cast<cuda::bf16*>(a.y)[o] =
          __float2bfloat16_rn(Silu(g) * cuda::RoundTo<cuda::bf16>(v));
    } else {
      static_cast<cuda::bf16*>(a.y)[o] = __float2bfloat16_rn(v);
    }
  }
}

int NumSms();

// Blocks of `smem` dynamic bytes to launch for n outputs: one warp an output
// row, at most LaunchSettings::gemv_blocks_per_sm an SM.
int64_t GridBlocks(int64_t n, int smem);

// Gemv with FP8 weights (gemv_fp8.cu); params already validated.
absl::Status GemvFp8(const GemvParams& params, cudaStream_t stream);

}  // namespace onecard::engine::gemv_internal

#endif  // ONECARD_ENGINE_KERNELS_GEMV_INTERNAL_CUH_
