// Embedding gather: out[t, :] = table[token_ids[t], :].
// Reference: EmbeddingRef (embedding_ref.cc, F32 and BF16; the spec).
// CUDA: Embedding (embedding.cu). Token ids outside [0, vocab_size) are an
// InvalidArgument naming the index in the reference; the CUDA kernel assumes
// validated ids (the runner validates the batch first).
// Tested by tests/engine/kernels/embedding_ref_test.cc.
#ifndef ONECARD_ENGINE_KERNELS_EMBEDDING_H_
#define ONECARD_ENGINE_KERNELS_EMBEDDING_H_

#include <cstdint>

#include "absl/status/status.h"
#include "engine/common/dtype.h"
#include "engine/kernels/stream.h"

namespace onecard::engine {

struct EmbeddingParams {
  DType dtype = DType::kF32;           // of table and out
  const int32_t* token_ids = nullptr;  // [num_tokens]
  const void* table = nullptr;         // [vocab_size, hidden]
  void* out = nullptr;                 // [num_tokens, hidden]
  int32_t num_tokens = 0;
  int64_t vocab_size = 0;
  int64_t hidden = 0;
};

absl::Status EmbeddingRef(const EmbeddingParams& params);
absl::Status Embedding(const EmbeddingParams& params, cudaStream_t stream);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_KERNELS_EMBEDDING_H_
