// Device helpers shared by the CUDA kernels (engine/kernels/*.cu): fp32
// load/store of the storage types, 16-byte bf16 vectors, warp and block reductions, and
// the one dtype dispatch of the CUDA side. The CUDA kernels support F32 and
// BF16 storage (attention, GEMV and the fused kernels: BF16 only); anything
// else is an UnimplementedError naming the supported set.
// Tested through every kernel's tests/gpu/*_test.cc.
#ifndef ONECARD_ENGINE_KERNELS_CUDA_COMMON_CUH_
#define ONECARD_ENGINE_KERNELS_CUDA_COMMON_CUH_

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/common/dtype.h"
#include "engine/common/status_macros.h"
#include "engine/kernels/launch_settings.h"

namespace onecard::engine::cuda {

using bf16 = __nv_bfloat16;

__device__ __forceinline__ float ToFloat(float x) { return x; }
__device__ __forceinline__ float ToFloat(bf16 x) { return __bfloat162float(x); }

template <typename T>
__device__ __forceinline__ T FromFloat(float x);
template <>
__device__ __forceinline__ float FromFloat<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ bf16 FromFloat<bf16>(float x) {
  return __float2bfloat16_rn(x);
}

// Rounds through the storage type (what a store followed by a load gives).
template <typename T>
__device__ __forceinline__ float RoundTo(float x) {
  return ToFloat(FromFloat<T>(x));
}

// Eight bf16 in 16 bytes (one vector load), widened to fp32.
__device__ __forceinline__ void Unpack8(const uint4& v, float* out) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    out[2 * i] = __uint_as_float(w[i] << 16);
    out[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
  }
}

__device__ __forceinline__ uint32_t PackBf16x2(float lo, float hi) {
  const uint32_t l = __bfloat16_as_ushort(__float2bfloat16_rn(lo));
  const uint32_t h = __bfloat16_as_ushort(__float2bfloat16_rn(hi));
  return l | (h << 16);
}

__device__ __forceinline__ uint4 Pack8(const float* in) {
  return make_uint4(PackBf16x2(in[0], in[1]), PackBf16x2(in[2], in[3]), PackBf16x2(in[4], in[5]),
                    PackBf16x2(in[6], in[7]));
}

__device__ __forceinline__ float WarpSum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float WarpMax(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum (kMax: maximum) over the block (blockDim.x a multiple of 32, at most
// 1024); every thread gets the result. `scratch` holds 32 floats of shared
// memory. The maximum is of values >= 0 (magnitudes): missing warps count 0.
template <bool kMax>
__device__ __forceinline__ float BlockReduce(float v, float* scratch) {
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  v = kMax ? WarpMax(v) : WarpSum(v);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  const int num_warps = blockDim.x >> 5;
  v = lane < num_warps ? scratch[lane] : 0.0f;
  return kMax ? WarpMax(v) : WarpSum(v);
}
__device__ __forceinline__ float BlockSum(float v, float* scratch) {
  return BlockReduce<false>(v, scratch);
}
__device__ __forceinline__ float BlockMax(float v, float* scratch) {
  return BlockReduce<true>(v, scratch);
}

// absl::StrCat for .cu files: nvcc 13's front end rejects StrCat's variadic
// overload (five or more arguments), so pieces are appended one at a time.
// std::string_view is not absl::string_view in Debian's Abseil, and nvcc does
// not convert it to AlphaNum either: pass it as a std::string.
template <typename T>
const T& CatPiece(const T& a) {
  return a;
}
inline std::string CatPiece(std::string_view a) { return std::string(a); }
template <typename... Args>
std::string Cat(const Args&... args) {
  std::string out;
  (absl::StrAppend(&out, CatPiece(args)), ...);
  return out;
}

// Whether kernels launch with programmatic dependent launch
// (launch_settings.h; on unless a comparison turns it off).
inline bool ProgrammaticLaunchEnabled() { return GetLaunchSettings().programmatic_launch; }

// Launches kernel<<<grid, block, smem, stream>>>(args...) with the
// programmatic-stream-serialization attribute (see cuda_ptx.cuh), so the
// kernel's launch and its constant-data prologue overlap the previous kernel;
// with cluster > 0, in thread block clusters of that many blocks along x
// (grid.x a multiple of it).
template <typename... KernelArgs, typename... Args>
cudaError_t LaunchPdlInClusters(void (*kernel)(KernelArgs...), dim3 grid, dim3 block, size_t smem,
                                cudaStream_t stream, int cluster, Args&&... args) {
  cudaLaunchAttribute attr[2];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = ProgrammaticLaunchEnabled() ? 1 : 0;
  attr[1].id = cudaLaunchAttributeClusterDimension;
  attr[1].val.clusterDim.x = static_cast<unsigned>(cluster);
  attr[1].val.clusterDim.y = 1;
  attr[1].val.clusterDim.z = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  config.attrs = attr;
  config.numAttrs = cluster > 0 ? 2 : 1;
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

template <typename... KernelArgs, typename... Args>
cudaError_t LaunchPdl(void (*kernel)(KernelArgs...), dim3 grid, dim3 block, size_t smem,
                      cudaStream_t stream, Args&&... args) {
  return LaunchPdlInClusters(kernel, grid, block, smem, stream, 0, std::forward<Args>(args)...);
}

inline int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

inline absl::Status Unsupported(std::string_view op, DType dtype, std::string_view supported) {
  return absl::UnimplementedError(
      Cat(op, ": dtype ", DTypeName(dtype), " is not supported; supported: ", supported));
}

// Runs impl.template operator()<T>() with T = float or bf16, returning its
// status; other dtypes are Unimplemented.
template <typename Impl>
absl::Status DispatchFloatDType(std::string_view op, DType dtype, Impl&& impl) {
  switch (dtype) {
    case DType::kF32:
      return impl.template operator()<float>();
    case DType::kBF16:
      return impl.template operator()<bf16>();
    default:
      return Unsupported(op, dtype, "F32, BF16");
  }
}

}  // namespace onecard::engine::cuda

#endif  // ONECARD_ENGINE_KERNELS_CUDA_COMMON_CUH_
