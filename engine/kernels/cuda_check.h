// CUDA_RETURN_IF_ERROR: turns a failed CUDA runtime or cuBLAS call into an
// absl::Status naming the expression, the error, the file and the line
// (or, for cuBLAS, why libcublas could not be loaded).
// After a kernel launch: CUDA_RETURN_IF_ERROR(cudaGetLastError()).
// Included only by CUDA code (engine/kernels/*.cu, engine/runtime/cuda/,
// tests/gpu/, tools/bench/cuda/). Tested through every caller (tests/gpu).
#ifndef ONECARD_ENGINE_KERNELS_CUDA_CHECK_H_
#define ONECARD_ENGINE_KERNELS_CUDA_CHECK_H_

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/kernels/cublas_loader.h"

namespace onecard::engine {

// OK for cudaSuccess; ResourceExhausted for out-of-memory; Internal otherwise.
inline absl::Status CudaCallStatus(cudaError_t err, const char* expr, const char* file, int line) {
  if (err == cudaSuccess) return absl::OkStatus();
  const auto code = err == cudaErrorMemoryAllocation ? absl::StatusCode::kResourceExhausted
                                                     : absl::StatusCode::kInternal;
  return absl::Status(code, absl::StrCat(expr, " failed: ", cudaGetErrorName(err), " (",
                                         cudaGetErrorString(err), ") at ", file, ":", line));
}

inline absl::Status CudaCallStatus(cublasStatus_t err, const char* expr, const char* file,
                                   int line) {
  if (err == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  // cuBLAS is opened on first use (cublas_loader.h): say why it could not be.
  if (absl::Status loaded = cuda::LoadCublas(); !loaded.ok()) {
    return absl::Status(loaded.code(), absl::StrCat(expr, " failed: ", loaded.message()));
  }
  const auto code = err == CUBLAS_STATUS_ALLOC_FAILED ? absl::StatusCode::kResourceExhausted
                                                      : absl::StatusCode::kInternal;
  return absl::Status(code, absl::StrCat(expr, " failed: ", cublasGetStatusName(err), " (",
                                         cublasGetStatusString(err), ") at ", file, ":", line));
}

}  // namespace onecard::engine

// Returns from the enclosing function (which returns absl::Status or
// absl::StatusOr) when the CUDA runtime or cuBLAS call `expr` fails.
#define CUDA_RETURN_IF_ERROR(expr)                                            \
  do {                                                                        \
    ::absl::Status onecard_cuda_status_ =                                     \
        ::onecard::engine::CudaCallStatus((expr), #expr, __FILE__, __LINE__); \
    if (!onecard_cuda_status_.ok()) return onecard_cuda_status_;              \
  } while (0)

#endif  // ONECARD_ENGINE_KERNELS_CUDA_CHECK_H_
