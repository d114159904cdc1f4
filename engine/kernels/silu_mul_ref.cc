// SiluMulRef: the plain reference of the gated MLP's activation (see silu_mul.h).
// Tested by tests/engine/kernels/silu_mul_ref_test.cc.
#include <cmath>

#include "engine/common/status_macros.h"
#include "engine/kernels/ref_util.h"
#include "engine/kernels/silu_mul.h"

namespace onecard::engine {

absl::Status SiluMulRef(const SiluMulParams& p) {
  constexpr char kOp[] = "SiluMulRef";
  RETURN_IF_ERROR(ref::CheckPositive(kOp, "inter", p.inter));
  if (p.num_tokens < 0) return ref::ArgError(kOp, "num_tokens is negative");
  if (p.num_tokens == 0) return absl::OkStatus();
  RETURN_IF_ERROR(ref::CheckNotNull(kOp, "gate_up", p.gate_up));
  RETURN_IF_ERROR(ref::CheckNotNull(kOp, "out", p.out));
  return ref::DispatchDType(kOp, p.dtype, [&]<typename T>() {
    for (int32_t t = 0; t < p.num_tokens; ++t) {
      const T* gate = static_cast<const T*>(p.gate_up) + 2 * p.inter * t;
      const T* up = gate + p.inter;
      T* out = static_cast<T*>(p.out) + p.inter * t;
      for (int64_t i = 0; i < p.inter; ++i) {
        const float g = ref::Load(gate[i]);
        const float silu = g / (1.0f + std::exp(-g));
        out[i] = ref::Store<T>(silu * ref::Load(up[i]));
      }
    }
  });
}

}  // namespace onecard::engine
