// Linear layer: y = x W^T + b, W in the HF layout [out_features, in_features],
// so y[r, o] = sum_k x[r, k] * W[o, k] + b[o]. The fused projections are
// linears too: qkv (W = [Wq; Wk; Wv]) and gate_up (W = [Wgate; Wup]).
// Reference: LinearRef (linear_ref.cc, F32 and BF16; fp32 accumulation in
// order of k). CUDA: Linear (linear.cu, cuBLAS/cuBLASLt).
// Tested by tests/engine/kernels/linear_ref_test.cc.
#ifndef ONECARD_ENGINE_KERNELS_LINEAR_H_
#define ONECARD_ENGINE_KERNELS_LINEAR_H_

#include <cstdint>

#include "absl/status/status.h"
#include "engine/common/dtype.h"
#include "engine/kernels/stream.h"

namespace onecard::engine {

struct LinearParams {
  DType dtype = DType::kF32;     // of x, weight, bias and y
  const void* x = nullptr;       // [num_rows, in_features]
  const void* weight = nullptr;  // [out_features, in_features]
  const void* bias = nullptr;    // [out_features], or null for none
  void* y = nullptr;             // [num_rows, out_features]; must not alias x
  int32_t num_rows = 0;
  int64_t in_features = 0;
  int64_t out_features = 0;
};

absl::Status LinearRef(const LinearParams& params);
absl::Status Linear(const LinearParams& params, cudaStream_t stream);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_KERNELS_LINEAR_H_
