// RmsNorm and FusedAddRmsNorm on CUDA (see rms_norm.h). One block per row:
// a pass that sums squares (fp32, block reduction), then a pass that scales.
// BF16 rows that are multiples of 8 are read 16 bytes a thread, and held in
// registers between the passes up to 16384 wide. The fused
// form rounds x + residual to the storage type before both the store and the
// norm, as the composed references do; with split-K partials instead of x
// (kPartials kernels) their fp32 sum, rounded to the storage type, takes x's
// place. Launched with programmatic dependent
// launch: the block waits for the previous kernel before reading x (the
// register form loads its weights first).
// Tested by tests/gpu/elementwise_test.cc against RmsNormRef / FusedAddRmsNormRef.
#include <cstdint>

#include "engine/kernels/cuda_check.h"
#include "engine/kernels/cuda_common.cuh"
#include "engine/kernels/cuda_ptx.cuh"
#include "engine/kernels/launch_settings.h"
#include "engine/kernels/rms_norm.h"

namespace onecard::engine {
namespace {

constexpr int kThreads = 256;

// The sublayer output as split-K partials: slice `s` of element `e` lies at
// p[s * slice + e] (fp32), summed in slice order.
__device__ __forceinline__ float SumPartials(const float* p, int n, int64_t slice, int64_t e) {
  float v = p[e];
  for (int s = 1; s < n; ++s) v += p[s * slice + e];
  return v;
}

// Eight consecutive elements (16-byte vector `vec` of the BF16 row) of the
// partials; slice4 counts float4s.
__device__ __forceinline__ void SumPartials8(const float4* p, int n, int64_t slice4, int64_t vec,
                                             float v[8]) {
  float4 a = p[2 * vec], b = p[2 * vec + 1];
  for (int s = 1; s < n; ++s) {
    const float4 c = p[s * slice4 + 2 * vec], d = p[s * slice4 + 2 * vec + 1];
    a.x += c.x, a.y += c.y, a.z += c.z, a.w += c.w;
    b.x += d.x, b.y += d.y, b.z += d.z, b.w += d.w;
  }
  v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w;
  v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
}

// Scalar path (any dtype, any hidden). residual == nullptr: plain RmsNorm.
// kPartials: x is replaced by `partials` (see SumPartials).
template <typename T, bool kPartials>
__global__ void __launch_bounds__(kThreads)
    RmsNormKernel(const T* x, const float* partials, int num_partials, T* residual,
                  const T* __restrict__ weight, T* out, int64_t hidden, float eps, bool early) {
  __shared__ float scratch[32];
  cuda::PdlEnter(early);  // x and residual come from the previous kernel
  const int64_t row = blockIdx.x * hidden;
  const int64_t slice = static_cast<int64_t>(gridDim.x) * hidden;
  float sum_sq = 0.0f;
  for (int64_t i = threadIdx.x; i < hidden; i += kThreads) {
    float v = kPartials ? cuda::RoundTo<T>(SumPartials(partials, num_partials, slice, row + i))
                        : cuda::ToFloat(x[row + i]);
    if (residual != nullptr) {
      v = cuda::RoundTo<T>(v + cuda::ToFloat(residual[row + i]));
      residual[row + i] = cuda::FromFloat<T>(v);
    }
    sum_sq += v * v;
  }
  const float inv_rms = rsqrtf(cuda::BlockSum(sum_sq, scratch) / static_cast<float>(hidden) + eps);
  const T* src = residual != nullptr ? residual : x;
  for (int64_t i = threadIdx.x; i < hidden; i += kThreads) {
    out[row + i] =
        cuda::FromFloat<T>(cuda::ToFloat(weight[i]) * (cuda::ToFloat(src[row + i]) * inv_rms));
  }
}

// BF16, hidden % 8 == 0: 16-byte vectors.
template <bool kPartials>
__global__ void __launch_bounds__(kThreads)
    RmsNormBf16x8Kernel(const uint4* x, const float4* partials, int num_partials, uint4* residual,
                        const uint4* __restrict__ weight, uint4* out, int64_t vecs, float eps,
                        int64_t hidden, bool early) {
  __shared__ float scratch[32];
  cuda::PdlEnter(early);
  const int64_t row = blockIdx.x * vecs;
  const int64_t slice4 = static_cast<int64_t>(gridDim.x) * vecs * 2;
  float sum_sq = 0.0f;
  for (int64_t i = threadIdx.x; i < vecs; i += kThreads) {
    float v[8];
    if constexpr (kPartials) {
      SumPartials8(partials, num_partials, slice4, row + i, v);
#pragma unroll
      for (int k = 0; k < 8; ++k) v[k] = cuda::RoundTo<cuda::bf16>(v[k]);
    } else {
      cuda::Unpack8(x[row + i], v);
    }
    if (residual != nullptr) {
      float r[8];
      cuda::Unpack8(residual[row + i], r);
#pragma unroll
      for (int k = 0; k < 8; ++k) r[k] += v[k];
      const uint4 packed = cuda::Pack8(r);
      residual[row + i] = packed;
      cuda::Unpack8(packed, v);
    }
#pragma unroll
    for (int k = 0; k < 8; ++k) sum_sq += v[k] * v[k];
  }
  const float inv_rms = rsqrtf(cuda::BlockSum(sum_sq, scratch) / static_cast<float>(hidden) + eps);
  const uint4* src = residual != nullptr ? residual : x;
  for (int64_t i = threadIdx.x; i < vecs; i += kThreads) {
    float v[8], w[8];
    cuda::Unpack8(src[row + i], v);
    cuda::Unpack8(weight[i], w);
#pragma unroll
    for (int k = 0; k < 8; ++k) v[k] = w[k] * (v[k] * inv_rms);
    out[row + i] = cuda::Pack8(v);
  }
}

// BF16, hidden % 8 == 0, at most kVecs 16-byte vectors a thread: the row
// stays in registers between the two passes, and the weight loads go out
// with the row's (one memory round trip before the reduction, not three).
template <int kVecs, bool kPartials>
__global__ void __launch_bounds__(kThreads)
    RmsNormBf16RegsKernel(const uint4* x, const float4* partials, int num_partials, uint4* residual,
                          const uint4* __restrict__ weight, uint4* out, int64_t vecs, float eps,
                          int64_t hidden, bool early) {
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x * vecs;
  const int64_t slice4 = static_cast<int64_t>(gridDim.x) * vecs * 2;
  uint4 w[kVecs], xv[kVecs], rv[kVecs];
  float pv[kPartials ? kVecs : 1][8];  // the partials' sums (kPartials)
#pragma unroll
  for (int k = 0; k < kVecs; ++k) {
    const int64_t i = threadIdx.x + k * kThreads;
    if (i < vecs) w[k] = weight[i];  // a constant: read while the previous kernel ends
  }
  cuda::PdlEnter(early);
#pragma unroll
  for (int k = 0; k < kVecs; ++k) {
    const int64_t i = threadIdx.x + k * kThreads;
    if (i < vecs) {
      if constexpr (kPartials) {
        SumPartials8(partials, num_partials, slice4, row + i, pv[k]);
      } else {
        xv[k] = x[row + i];
      }
      if (residual != nullptr) rv[k] = residual[row + i];
    }
  }
  float sum_sq = 0.0f;
#pragma unroll
  for (int k = 0; k < kVecs; ++k) {
    const int64_t i = threadIdx.x + k * kThreads;
    if (i < vecs) {
      float v[8];
      if constexpr (kPartials) {
#pragma unroll
        for (int j = 0; j < 8; ++j) v[j] = cuda::RoundTo<cuda::bf16>(pv[k][j]);
      } else {
        cuda::Unpack8(xv[k], v);
      }
      if (residual != nullptr) {
        float r[8];
        cuda::Unpack8(rv[k], r);
#pragma unroll
        for (int j = 0; j < 8; ++j) r[j] += v[j];
        xv[k] = cuda::Pack8(r);
        residual[row + i] = xv[k];
        cuda::Unpack8(xv[k], v);
      }
#pragma unroll
      for (int j = 0; j < 8; ++j) sum_sq += v[j] * v[j];
    }
  }
  const float inv_rms = rsqrtf(cuda::BlockSum(sum_sq, scratch) / static_cast<float>(hidden) + eps);
#pragma unroll
  for (int k = 0; k < kVecs; ++k) {
    const int64_t i = threadIdx.x + k * kThreads;
    if (i < vecs) {
      float v[8], wf[8];
      cuda::Unpack8(xv[k], v);
      cuda::Unpack8(w[k], wf);
#pragma unroll
      for (int j = 0; j < 8; ++j) v[j] = wf[j] * (v[j] * inv_rms);
      out[row + i] = cuda::Pack8(v);
    }
  }
}

template <bool kPartials>
absl::Status Launch(DType dtype, const void* x, const float* partials, int num_partials,
                    void* residual, const void* weight, void* out, int32_t num_tokens,
                    int64_t hidden, float eps, cudaStream_t stream, const char* op) {
  const bool early = GetLaunchSettings().early_dependents;
  return cuda::DispatchFloatDType(op, dtype, [&]<typename T>() -> absl::Status {
    if constexpr (std::is_same_v<T, cuda::bf16>) {
      if (hidden % 8 == 0) {
        const int64_t vecs = hidden / 8;
        auto* kernel = vecs <= 2 * kThreads   ? &RmsNormBf16RegsKernel<2, kPartials>
                       : vecs <= 4 * kThreads ? &RmsNormBf16RegsKernel<4, kPartials>
                       : vecs <= 8 * kThreads ? &RmsNormBf16RegsKernel<8, kPartials>
                                              : &RmsNormBf16x8Kernel<kPartials>;
        CUDA_RETURN_IF_ERROR(cuda::LaunchPdl(
            kernel, dim3(num_tokens), dim3(kThreads), 0, stream, static_cast<const uint4*>(x),
            reinterpret_cast<const float4*>(partials), num_partials, static_cast<uint4*>(residual),
            static_cast<const uint4*>(weight), static_cast<uint4*>(out), vecs, eps, hidden, early));
        return absl::OkStatus();
      }
    }
    CUDA_RETURN_IF_ERROR(
        cuda::LaunchPdl(&RmsNormKernel<T, kPartials>, dim3(num_tokens), dim3(kThreads), 0, stream,
                        static_cast<const T*>(x), partials, num_partials, static_cast<T*>(residual),
                        static_cast<const T*>(weight), static_cast<T*>(out), hidden, eps, early));
    return absl::OkStatus();
  });
}

// partials != nullptr: the sublayer output comes as num_partials fp32 slices.
absl::Status Run(const char* op, DType dtype, const void* x, const float* partials,
                 int num_partials, void* residual, const void* weight, void* out,
                 int32_t num_tokens, int64_t hidden, float eps, cudaStream_t stream) {
  if (num_tokens < 0 || hidden <= 0) {
    return absl::InvalidArgumentError(
        cuda::Cat(op, ": bad sizes num_tokens=", num_tokens, " hidden=", hidden));
  }
  if (num_tokens == 0) return absl::OkStatus();
  if (partials != nullptr) {
    if (num_partials < 1) {  // (FusedAddRmsNorm, the only caller with partials, checks residual)
      return absl::InvalidArgumentError(
          cuda::Cat(op, ": partials need num_partials >= 1, got ", num_partials));
    }
    if (reinterpret_cast<uintptr_t>(partials) % 16 != 0) {
      return absl::InvalidArgumentError(cuda::Cat(op, ": partials are not 16-byte aligned"));
    }
    return Launch<true>(dtype, nullptr, partials, num_partials, residual, weight, out, num_tokens,
                        hidden, eps, stream, op);
  }
  return Launch<false>(dtype, x, nullptr, 0, residual, weight, out, num_tokens, hidden, eps, stream,
                       op);
}

}  // namespace

absl::Status RmsNorm(const RmsNormParams& p, cudaStream_t stream) {
  return Run("RmsNorm", p.dtype, p.x, nullptr, 0, nullptr, p.weight, p.out, p.num_tokens, p.hidden,
             p.eps, stream);
}

absl::Status FusedAddRmsNorm(const FusedAddRmsNormParams& p, cudaStream_t stream) {
  if (p.residual == nullptr && p.num_tokens > 0) {
    return absl::InvalidArgumentError("FusedAddRmsNorm: residual is null");
  }
  const bool from_partials = p.x == nullptr && p.partials != nullptr;
  return Run("FusedAddRmsNorm", p.dtype, p.x, from_partials ? p.partials : nullptr, p.num_partials,
             p.residual, p.weight, p.out, p.num_tokens, p.hidden, p.eps, stream);
}

}  // namespace onecard::engine
