// Between Int4Gemm's entry (int4_gemm.cu: the checks, the kStream kernel)
// and its kTiled kernel (int4_gemm_tiled.cu). Not for other callers.
#ifndef ONECARD_ENGINE_KERNELS_INT4_GEMM_INTERNAL_H_
#define ONECARD_ENGINE_KERNELS_INT4_GEMM_INTERNAL_H_

#include "absl/status/status.h"
#include "engine/kernels/int4_gemm.h"
#include "engine/kernels/stream.h"

namespace onecard::engine {

// Launches the kTiled kernel for params already checked
// (CheckInt4GemmParams, the workspace's size) on a device of num_sms SMs.
absl::Status LaunchInt4GemmTiled(const Int4GemmParams& params, int num_sms, cudaStream_t stream);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_KERNELS_INT4_GEMM_INTERNAL_H_
