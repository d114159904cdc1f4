// CublasLt::Load (see cublas_lt.h): every entry point through
// cuda::CublasLtSymbol, then the handle.
#include "engine/kernels/cublas_lt.h"

#include "engine/common/status_macros.h"
#include "engine/kernels/cublas_loader.h"
#include "engine/kernels/cuda_check.h"

namespace onecard::engine::cuda {
namespace {

template <typename Fn>
absl::Status Symbol(const char* name, Fn* out) {
  ASSIGN_OR_RETURN(void* address, CublasLtSymbol(name));
  *out = reinterpret_cast<Fn>(address);
  return absl::OkStatus();
}

}  // namespace

absl::Status CublasLt::Load() {
  RETURN_IF_ERROR(Symbol("cublasLtCreate", &create));
  RETURN_IF_ERROR(Symbol("cublasLtDestroy", &destroy));
  RETURN_IF_ERROR(Symbol("cublasLtMatmulDescCreate", &desc_create));
  RETURN_IF_ERROR(Symbol("cublasLtMatmulDescDestroy", &desc_destroy));
  RETURN_IF_ERROR(Symbol("cublasLtMatmulDescSetAttribute", &desc_set));
  RETURN_IF_ERROR(Symbol("cublasLtMatrixLayoutCreate", &layout_create));
  RETURN_IF_ERROR(Symbol("cublasLtMatrixLayoutDestroy", &layout_destroy));
  RETURN_IF_ERROR(Symbol("cublasLtMatrixLayoutSetAttribute", &layout_set));
  RETURN_IF_ERROR(Symbol("cublasLtMatmulPreferenceCreate", &pref_create));
  RETURN_IF_ERROR(Symbol("cublasLtMatmulPreferenceDestroy", &pref_destroy));
  RETURN_IF_ERROR(Symbol("cublasLtMatmulPreferenceSetAttribute", &pref_set));
  RETURN_IF_ERROR(Symbol("cublasLtMatmulAlgoGetHeuristic", &heuristic));
  RETURN_IF_ERROR(Symbol("cublasLtMatmul", &matmul));
  RETURN_IF_ERROR(Symbol("cublasLtMatmulAlgoCheck", &check));
  RETURN_IF_ERROR(Symbol("cublasLtMatmulAlgoCapGetAttribute", &cap_get));
  RETURN_IF_ERROR(Symbol("cublasLtMatmulAlgoConfigGetAttribute", &config_get));
  RETURN_IF_ERROR(Symbol("cublasLtMatmulAlgoConfigSetAttribute", &config_set));
  RETURN_IF_ERROR(Symbol("cublasLtGetVersion", &version));
  CUDA_RETURN_IF_ERROR(create(&handle));
  return absl::OkStatus();
}

}  // namespace onecard::engine::cuda
