// CublasLt: the cuBLASLt entry points onecard calls, resolved through
// cuda::CublasLtSymbol (cublas_loader.h: cuBLASLt is opened on first use,
// never linked), and one cuBLASLt handle created with them. Used by
// BlasTuner (blas_tuner.h) and Fp8Matmul (fp8_matmul.h). Not thread-safe to
// create; the handle itself is cuBLASLt's (safe to share between threads).
// Tested through its users (tests/gpu/blas_tuner_test.cc, fp8_gemm_test.cc).
#ifndef ONECARD_ENGINE_KERNELS_CUBLAS_LT_H_
#define ONECARD_ENGINE_KERNELS_CUBLAS_LT_H_

#include <cublasLt.h>

#include "absl/status/status.h"

namespace onecard::engine::cuda {

struct CublasLt {
  cublasLtHandle_t handle = nullptr;
  decltype(&::cublasLtCreate) create = nullptr;
  decltype(&::cublasLtDestroy) destroy = nullptr;
  decltype(&::cublasLtMatmulDescCreate) desc_create = nullptr;
  decltype(&::cublasLtMatmulDescDestroy) desc_destroy = nullptr;
  decltype(&::cublasLtMatmulDescSetAttribute) desc_set = nullptr;
  decltype(&::cublasLtMatrixLayoutCreate) layout_create = nullptr;
  decltype(&::cublasLtMatrixLayoutDestroy) layout_destroy = nullptr;
  decltype(&::cublasLtMatrixLayoutSetAttribute) layout_set = nullptr;
  decltype(&::cublasLtMatmulPreferenceCreate) pref_create = nullptr;
  decltype(&::cublasLtMatmulPreferenceDestroy) pref_destroy = nullptr;
  decltype(&::cublasLtMatmulPreferenceSetAttribute) pref_set = nullptr;
  decltype(&::cublasLtMatmulAlgoGetHeuristic) heuristic = nullptr;
  decltype(&::cublasLtMatmul) matmul = nullptr;
  decltype(&::cublasLtMatmulAlgoCheck) check = nullptr;
  decltype(&::cublasLtMatmulAlgoCapGetAttribute) cap_get = nullptr;
  decltype(&::cublasLtMatmulAlgoConfigGetAttribute) config_get = nullptr;
  decltype(&::cublasLtMatmulAlgoConfigSetAttribute) config_set = nullptr;
  decltype(&::cublasLtGetVersion) version = nullptr;

  // Resolves the symbols, then creates `handle`. FailedPrecondition naming
  // the library or the symbol when cuBLASLt cannot be opened; the cuBLAS
  // status when the handle cannot be created.
  absl::Status Load();
  CublasLt() = default;
  CublasLt(const CublasLt&) = delete;
  CublasLt& operator=(const CublasLt&) = delete;
  ~CublasLt() {
    if (handle != nullptr) destroy(handle);
  }
};

}  // namespace onecard::engine::cuda

#endif  // ONECARD_ENGINE_KERNELS_CUBLAS_LT_H_
