// Small kernels of the CUDA runner itself (not ops of the model): gathering
// the rows that want logits, a step's K/V rows of a layer the CPU also
// keeps (cpu_span.cc), and the look-ahead's pending tokens (step_ahead.cc).
// Tested through tests/gpu/cuda_model_runner_test.cc and cuda_lookahead_test.cc.
#ifndef ONECARD_ENGINE_RUNTIME_CUDA_RUNNER_KERNELS_H_
#define ONECARD_ENGINE_RUNTIME_CUDA_RUNNER_KERNELS_H_

#include <cuda_runtime.h>

#include <cstdint>

#include "absl/status/status.h"

namespace onecard::engine {

// dst[r, :] = src[rows[r], :] for BF16 rows of `hidden` values (hidden % 8 == 0).
absl::Status GatherRowsBf16(const void* src, const int32_t* rows, void* dst, int32_t num_rows,
                            int64_t hidden, cudaStream_t stream);

// dst[t, :] = [k_pool row slots[t] | v_pool row slots[t]] for BF16 pools of
// kv_dim values a slot (kv_dim % 8 == 0); zeros where slots[t] < 0.
// dst: BF16 [num_tokens, 2 * kv_dim].
absl::Status GatherKvRowsBf16(const void* k_pool, const void* v_pool, const int32_t* slots,
                              void* dst, int32_t num_tokens, int64_t kv_dim, cudaStream_t stream);

// tokens[i] = previous[-tokens[i] - 1] where tokens[i] < 0 (a pending token:
// the row of the previous step's sampled tokens it stands for), for i <
// num_tokens; the other tokens stay.
absl::Status FillPendingTokens(int32_t* tokens, int32_t num_tokens, const int32_t* previous,
                               cudaStream_t stream);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_RUNTIME_CUDA_RUNNER_KERNELS_H_
