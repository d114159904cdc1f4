// Small kernels of the CUDA runner itself (not ops of the model): gathering
// the rows that want logits. Tested through tests/gpu/cuda_model_runner_test.cc.
#ifndef ONECARD_ENGINE_RUNTIME_CUDA_RUNNER_KERNELS_H_
#define ONECARD_ENGINE_RUNTIME_CUDA_RUNNER_KERNELS_H_

#include <cuda_runtime.h>

#include <cstdint>

#include "absl/status/status.h"

namespace onecard::engine {

// dst[r, :] = src[rows[r], :] for BF16 rows of `hidden` values (hidden % 8 == 0).
absl::Status GatherRowsBf16(const void* src, const int32_t* rows, void* dst, int32_t num_rows,
                            int64_t hidden, cudaStream_t stream);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_RUNTIME_CUDA_RUNNER_KERNELS_H_
