// SiLU-and-multiply of the gated MLP: out = silu(gate) * up, silu(g) = g / (1 + e^-g).
// gate and up are packed per token as the fused gate_up projection produces
// them (its weight is [w_gate; w_up], [2 * inter, hidden]): gate_up[t] =
// [gate (inter values), up (inter values)].
// Reference: SiluMulRef (silu_mul_ref.cc, F32 and BF16). CUDA: SiluMul (silu_mul.cu).
// Tested by tests/engine/kernels/silu_mul_ref_test.cc.
#ifndef ONECARD_ENGINE_KERNELS_SILU_MUL_H_
#define ONECARD_ENGINE_KERNELS_SILU_MUL_H_

#include <cstdint>

#include "absl/status/status.h"
#include "engine/common/dtype.h"
#include "engine/kernels/stream.h"

namespace onecard::engine {

struct SiluMulParams {
  DType dtype = DType::kF32;      // of gate_up and out
  const void* gate_up = nullptr;  // [num_tokens, 2 * inter]
  void* out = nullptr;            // [num_tokens, inter]
  int32_t num_tokens = 0;
  int64_t inter = 0;  // intermediate size
};

absl::Status SiluMulRef(const SiluMulParams& params);
absl::Status SiluMul(const SiluMulParams& params, cudaStream_t stream);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_KERNELS_SILU_MUL_H_
