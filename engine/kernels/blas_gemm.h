// BlasGemm: the one cuBLAS call of the CUDA backend, y = beta * y + x W^T
// with W in the HF layout [n, k] (row-major) and x [m, k], y [m, n]
// row-major; fp32 accumulation (CUBLAS_COMPUTE_32F, no TF32). beta = 1 fuses
// a residual add (one rounding of acc + y). x and W: BF16 or F32 (the same);
// y: the same dtype, or F32 for BF16 inputs (logits). The caller owns the
// handle (and its workspace, for graph capture).
// Split-K partials (splits > 1): y is F32 [splits, m, n], slice s the product
// of the s-th k / splits wide slice of x and W (one strided-batched GEMM, no
// reduction): the consumer sums them, e.g. FusedAddRmsNorm's partials.
// Used by Linear (linear.cu) and the runner; tested by tests/gpu/gemv_test.cc (LinearTest).
#ifndef ONECARD_ENGINE_KERNELS_BLAS_GEMM_H_
#define ONECARD_ENGINE_KERNELS_BLAS_GEMM_H_

#include <cublas_v2.h>

#include <cstdint>

#include "absl/status/status.h"
#include "engine/common/dtype.h"

namespace onecard::engine {

struct BlasGemmParams {
  DType dtype = DType::kBF16;    // of x and w
  DType y_dtype = DType::kBF16;  // dtype, or F32 for BF16 inputs
  const void* x = nullptr;       // [m, k]
  const void* w = nullptr;       // [n, k]
  void* y = nullptr;             // [m, n]
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
  float beta = 0.0f;  // 0: overwrite y; 1: accumulate into y
  // > 1: y holds split-K partials (above); needs BF16 x/w, F32 y, beta 0,
  // k % splits == 0 and (k / splits) % 8 == 0.
  int32_t splits = 1;
};

// Whether `splits` partials of a k-deep product are possible (above).
bool BlasGemmSplitsFit(int64_t k, int32_t splits);

class BlasTuner;  // blas_tuner.h

// Runs on `stream`, set on the handle only when it is on another stream
// (setting a stream drops the handle's user workspace). With a tuner that
// has tuned this shape, runs the cuBLASLt algorithm it chose instead.
absl::Status BlasGemm(cublasHandle_t handle, const BlasGemmParams& params, cudaStream_t stream,
                      const BlasTuner* tuner = nullptr);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_KERNELS_BLAS_GEMM_H_
