// LinearRef: the plain reference of y = x W^T + b (see linear.h).
// Tested by tests/engine/kernels/linear_ref_test.cc.
#include "engine/common/status_macros.h"
#include "engine/kernels/linear.h"
#include "engine/kernels/ref_util.h"

namespace onecard::engine {

absl::Status LinearRef(const LinearParams& p) {
  constexpr char kOp[] = "LinearRef";
  RETURN_IF_ERROR(ref::CheckPositive(kOp, "in_features", p.in_features));
  RETURN_IF_ERROR(ref::CheckPositive(kOp, "out_features", p.out_features));
  if (p.num_rows < 0) return ref::ArgError(kOp, "num_rows is negative");
  if (p.num_rows == 0) return absl::OkStatus();
  RETURN_IF_ERROR(ref::CheckNotNull(kOp, "x", p.x));
  RETURN_IF_ERROR(ref::CheckNotNull(kOp, "weight", p.weight));
  RETURN_IF_ERROR(ref::CheckNotNull(kOp, "y", p.y));
  return ref::DispatchDType(kOp, p.dtype, [&]<typename T>() {
    const T* bias = static_cast<const T*>(p.bias);
    for (int32_t r = 0; r < p.num_rows; ++r) {
      const T* x = static_cast<const T*>(p.x) + r * p.in_features;
      T* y = static_cast<T*>(p.y) + r * p.out_features;
      for (int64_t o = 0; o < p.out_features; ++o) {
        const T* w = static_cast<const T*>(p.weight) + o * p.in_features;
        float acc = 0.0f;
        for (int64_t k = 0; k < p.in_features; ++k) acc += ref::Load(x[k]) * ref::Load(w[k]);
        if (bias != nullptr) acc += ref::Load(bias[o]);
        y[o] = ref::Store<T>(acc);
      }
    }
  });
}

}  // namespace onecard::engine
