// Between Int4Gemm's entry (int4_gemm.cu: the checks, the kStream kernel)
// and its kTiled, kWgmma and kGemv kernels (int4_gemm_tiled.cu,
// int4_gemm_wgmma.cu, int4_gemm_gemv.cu).
// Not for other callers.
#ifndef ONECARD_ENGINE_KERNELS_INT4_GEMM_INTERNAL_H_
#define ONECARD_ENGINE_KERNELS_INT4_GEMM_INTERNAL_H_

#include "absl/status/status.h"
#include "engine/kernels/int4_gemm.h"
#include "engine/kernels/stream.h"

namespace onecard::engine {

// Launches the kTiled kernel for params already checked
// (CheckInt4GemmParams, the workspace's size) on a device of num_sms SMs.
absl::Status LaunchInt4GemmTiled(const Int4GemmParams& params, int num_sms, cudaStream_t stream);

// Launches the kGemv kernel for params already checked, Int4GemmGemvFits
// among them.
absl::Status LaunchInt4GemmGemv(const Int4GemmParams& params, int num_sms, cudaStream_t stream);
// Whether this build holds the kWgmma kernel (every target sm_90a).
bool Int4GemmWgmmaBuilt();
// Launches the kWgmma kernel for params already checked, Int4GemmWgmmaFits
// among them.
absl::Status LaunchInt4GemmWgmma(const Int4GemmParams& params, int num_sms, cudaStream_t stream);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_KERNELS_INT4_GEMM_INTERNAL_H_
