// Sample: logits processing and token choice for a batch of rows, on the
// GPU, so that a decode step returns token ids instead of logits. Per row,
// in this order (the spec; SampleRef in sample_ref.cc implements it plainly):
//   1. penalties over the row's history (prompt and generated ids), each
//      distinct token t seen c times:
//        repetition (HF): l[t] = l[t] > 0 ? l[t] / rp : l[t] * rp
//        then l[t] -= frequency * c + presence        (OpenAI)
//   2. temperature == 0: greedy, the first index of the largest logit.
//   3. l /= temperature; p = exp(l - max l) (unnormalized, p_max = 1);
//   4. top_k (0 < k < vocab): keep p >= the k-th largest p;
//   5. top_p (< 1): of those, keep the smallest set of largest p whose mass
//      reaches top_p of the kept mass;
//   6. min_p (> 0): keep p >= min_p (min_p times the top probability);
//   7. with u in [0, 1) given by the caller (from the request's seeded
//      generator), return the first kept index, in vocabulary order, at which
//      the running kept mass exceeds u times the kept mass (the last kept
//      index if rounding leaves none).
// Ties at a threshold keep every tied token. Masses are summed in double;
// the GPU's order of summation differs, so only a draw within ~1e-12 of a
// boundary can pick the neighbouring kept token; greedy is exact.
// CUDA: Sample (sample.cu), one block a row. Tested by tests/gpu/sample_test.cc.
#ifndef ONECARD_ENGINE_KERNELS_SAMPLE_H_
#define ONECARD_ENGINE_KERNELS_SAMPLE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "engine/kernels/stream.h"

namespace onecard::engine {

struct SampleRowParams {
  float temperature = 0.0f;  // 0 = greedy
  int32_t top_k = 0;         // 0 = off
  float top_p = 1.0f;        // (0, 1]
  float min_p = 0.0f;        // [0, 1]
  float repetition_penalty = 1.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  float uniform = 0.0f;  // the draw, in [0, 1)
};

struct SampleParams {
  const float* logits = nullptr;          // [num_rows, vocab_size]; not modified
  const SampleRowParams* rows = nullptr;  // [num_rows]
  const int32_t* history = nullptr;       // [cu_history[num_rows]] ids; may be null
  const int32_t* cu_history = nullptr;    // [num_rows + 1]; null: no history
  int32_t* out_tokens = nullptr;          // [num_rows]
  int32_t num_rows = 0;
  int32_t vocab_size = 0;
  // CUDA only: scratch of SampleWorkspaceBytes(num_rows, vocab_size) bytes,
  // whose counter part must be zero before the first call (cudaMemset); the
  // kernel leaves it zero again.
  void* workspace = nullptr;
};

// fp32 scratch then int32 counters, [num_rows, vocab_size] each.
inline int64_t SampleWorkspaceBytes(int32_t num_rows, int32_t vocab_size) {
  return static_cast<int64_t>(num_rows) * vocab_size * 8;
}

absl::Status SampleRef(const SampleParams& params);
absl::Status Sample(const SampleParams& params, cudaStream_t stream);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_KERNELS_SAMPLE_H_
