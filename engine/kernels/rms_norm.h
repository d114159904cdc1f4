// RMSNorm, plain and fused with the residual add (Llama / Qwen2 / Mistral):
//   RmsNorm:         out = x * rsqrt(mean(x^2) + eps) * weight        (per row)
//   FusedAddRmsNorm: residual = x + residual;  out = RmsNorm(residual)
// The fused form is the decoder's "add the sublayer output to the residual
// stream, then normalize for the next sublayer" in one pass; its reference is
// the composition of the add and RmsNormRef. The sublayer output may instead
// come as fp32 split-K partial products (BlasGemmParams::splits): summed in
// slice order and rounded to the storage type (the product a whole GEMM
// would have stored), then added as x is: two roundings, as in a
// transformers layer and in Gemv's add_to_y. Math is fp32 (mean of squares
// summed in order over the row); BF16 storage is rounded once on store.
// References: RmsNormRef, FusedAddRmsNormRef (rms_norm_ref.cc, F32 and BF16).
// CUDA: RmsNorm, FusedAddRmsNorm (rms_norm.cu).
// Tested by tests/engine/kernels/rms_norm_ref_test.cc.
#ifndef ONECARD_ENGINE_KERNELS_RMS_NORM_H_
#define ONECARD_ENGINE_KERNELS_RMS_NORM_H_

#include <cstdint>

#include "absl/status/status.h"
#include "engine/common/dtype.h"
#include "engine/kernels/stream.h"

namespace onecard::engine {

struct RmsNormParams {
  DType dtype = DType::kF32;     // of x, weight and out
  const void* x = nullptr;       // [num_tokens, hidden]
  const void* weight = nullptr;  // [hidden]
  void* out = nullptr;           // [num_tokens, hidden]; may alias x
  int32_t num_tokens = 0;
  int64_t hidden = 0;
  float eps = 1e-5f;
};

struct FusedAddRmsNormParams {
  DType dtype = DType::kF32;     // of every tensor
  const void* x = nullptr;       // [num_tokens, hidden]: the sublayer output
                                 // (null when it comes as `partials`)
  void* residual = nullptr;      // [num_tokens, hidden]: in: the residual
                                 // stream; out: x + residual
  const void* weight = nullptr;  // [hidden]
  void* out = nullptr;           // [num_tokens, hidden]: RmsNorm(x + residual);
                                 // may alias x, not residual
  int32_t num_tokens = 0;
  int64_t hidden = 0;
  float eps = 1e-5f;
  // With x null: the sublayer output is partials[0] + ... +
  // partials[num_partials - 1] (fp32 [num_partials, num_tokens, hidden]),
  // rounded to dtype.
  const float* partials = nullptr;
  int32_t num_partials = 0;
};

absl::Status RmsNormRef(const RmsNormParams& params);
absl::Status FusedAddRmsNormRef(const FusedAddRmsNormParams& params);

absl::Status RmsNorm(const RmsNormParams& params, cudaStream_t stream);
absl::Status FusedAddRmsNorm(const FusedAddRmsNormParams& params, cudaStream_t stream);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_KERNELS_RMS_NORM_H_
