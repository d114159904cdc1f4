// Linear on CUDA (see linear.h) and BlasGemm (blas_gemm.h). Linear keeps one
// cuBLAS handle per host thread; with a bias it first broadcasts the bias
// into y and then accumulates the product into it (beta = 1), so acc + b is
// rounded once, as LinearRef does.
// Tested by tests/gpu/gemv_test.cc (LinearTest) against LinearRef.
#include <cublas_v2.h>

#include "engine/kernels/blas_gemm.h"
#include "engine/kernels/blas_tuner.h"
#include "engine/kernels/cuda_check.h"
#include "engine/kernels/cuda_common.cuh"
#include "engine/kernels/linear.h"

namespace onecard::engine {
namespace {

cudaDataType_t CudaType(DType dtype) { return dtype == DType::kF32 ? CUDA_R_32F : CUDA_R_16BF; }

template <typename T>
__global__ void BroadcastRowsKernel(const T* __restrict__ bias, T* __restrict__ y, int64_t n,
                                    int64_t total) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    y[i] = bias[i % n];
  }
}

absl::StatusOr<cublasHandle_t> ThreadHandle() {
  struct Holder {
    cublasHandle_t handle = nullptr;
    ~Holder() {
      if (handle != nullptr) cublasDestroy(handle);
    }
  };
  thread_local Holder holder;
  if (holder.handle == nullptr) CUDA_RETURN_IF_ERROR(cublasCreate(&holder.handle));
  return holder.handle;
}

}  // namespace

bool BlasGemmSplitsFit(int64_t k, int32_t splits) {
  return splits >= 1 && k % splits == 0 && (k / splits) % 8 == 0;
}

absl::Status BlasGemm(cublasHandle_t handle, const BlasGemmParams& p, cudaStream_t stream,
                      const BlasTuner* tuner) {
  const bool types_ok =
      (p.dtype == DType::kBF16 && (p.y_dtype == DType::kBF16 || p.y_dtype == DType::kF32)) ||
      (p.dtype == DType::kF32 && p.y_dtype == DType::kF32);
  if (!types_ok) {
    return absl::UnimplementedError(
        cuda::Cat("BlasGemm: x/w ", DTypeName(p.dtype), " with y ", DTypeName(p.y_dtype),
                  " is not supported; supported: BF16 -> BF16 or F32, F32 -> F32"));
  }
  if (p.m < 0 || p.n <= 0 || p.k <= 0) {
    return absl::InvalidArgumentError(
        cuda::Cat("BlasGemm: bad sizes m=", p.m, " n=", p.n, " k=", p.k));
  }
  if (p.splits != 1) {
    if (p.splits < 1 || p.dtype != DType::kBF16 || p.y_dtype != DType::kF32 || p.beta != 0.0f ||
        !BlasGemmSplitsFit(p.k, p.splits)) {
      return absl::InvalidArgumentError(cuda::Cat("BlasGemm: splits=", p.splits,
                                                  " needs BF16 x/w, F32 y, beta 0 and k (", p.k,
                                                  ") a multiple of 8 * splits"));
    }
  }
  if (p.m == 0) return absl::OkStatus();
  if (tuner != nullptr) {
    ASSIGN_OR_RETURN(const bool ran, tuner->TryRun(p, stream));
    if (ran) return absl::OkStatus();
  }
  // cublasSetStream drops a user workspace (cublasSetWorkspace), which graph
  // capture needs: only switch streams when the handle is on another one.
  cudaStream_t current = nullptr;
  CUDA_RETURN_IF_ERROR(cublasGetStream(handle, &current));
  if (current != stream) CUDA_RETURN_IF_ERROR(cublasSetStream(handle, stream));
  const float alpha = 1.0f;
  // Column-major view: y^T [n, m] = W [n, k] (stored as W^T [k, n]) op T times x^T [k, m].
  if (p.splits > 1) {  // batch s: the k-slice [s k / splits, (s + 1) k / splits)
    const int64_t slice = p.k / p.splits;
    CUDA_RETURN_IF_ERROR(cublasGemmStridedBatchedEx(
        handle, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(p.n), static_cast<int>(p.m),
        static_cast<int>(slice), &alpha, p.w, CUDA_R_16BF, static_cast<int>(p.k), slice, p.x,
        CUDA_R_16BF, static_cast<int>(p.k), slice, &p.beta, p.y, CUDA_R_32F, static_cast<int>(p.n),
        p.m * p.n, p.splits, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return absl::OkStatus();
  }
  CUDA_RETURN_IF_ERROR(
      cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(p.n), static_cast<int>(p.m),
                   static_cast<int>(p.k), &alpha, p.w, CudaType(p.dtype), static_cast<int>(p.k),
                   p.x, CudaType(p.dtype), static_cast<int>(p.k), &p.beta, p.y, CudaType(p.y_dtype),
                   static_cast<int>(p.n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  return absl::OkStatus();
}

absl::Status Linear(const LinearParams& p, cudaStream_t stream) {
  constexpr char kOp[] = "Linear";
  if (p.num_rows < 0 || p.in_features <= 0 || p.out_features <= 0) {
    return absl::InvalidArgumentError(cuda::Cat(kOp, ": bad sizes num_rows=", p.num_rows,
                                                " in_features=", p.in_features,
                                                " out_features=", p.out_features));
  }
  if (p.num_rows == 0) return absl::OkStatus();
  ASSIGN_OR_RETURN(cublasHandle_t handle, ThreadHandle());
  return cuda::DispatchFloatDType(kOp, p.dtype, [&]<typename T>() -> absl::Status {
    if (p.bias != nullptr) {
      const int64_t total = p.num_rows * p.out_features;
      const int grid = static_cast<int>(std::min<int64_t>(cuda::CeilDiv(total, 256), 4096));
      BroadcastRowsKernel<T><<<grid, 256, 0, stream>>>(static_cast<const T*>(p.bias),
                                                       static_cast<T*>(p.y), p.out_features, total);
      CUDA_RETURN_IF_ERROR(cudaGetLastError());
    }
    BlasGemmParams g;
    g.dtype = p.dtype;
    g.y_dtype = p.dtype;
    g.x = p.x;
    g.w = p.weight;
    g.y = p.y;
    g.m = p.num_rows;
    g.n = p.out_features;
    g.k = p.in_features;
    g.beta = p.bias != nullptr ? 1.0f : 0.0f;
    return BlasGemm(handle, g, stream);
  });
}

}  // namespace onecard::engine
