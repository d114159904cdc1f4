// RmsNormRef and FusedAddRmsNormRef: the plain references (see rms_norm.h).
// Tested by tests/engine/kernels/rms_norm_ref_test.cc.
#include <cmath>

#include "engine/common/status_macros.h"
#include "engine/kernels/ref_util.h"
#include "engine/kernels/rms_norm.h"

namespace onecard::engine {
namespace {

absl::Status Validate(const char* op, int32_t num_tokens, int64_t hidden, const void* x,
                      const void* weight, const void* out) {
  RETURN_IF_ERROR(ref::CheckPositive(op, "hidden", hidden));
  if (num_tokens < 0) return ref::ArgError(op, "num_tokens is negative");
  if (num_tokens == 0) return absl::OkStatus();
  RETURN_IF_ERROR(ref::CheckNotNull(op, "x", x));
  RETURN_IF_ERROR(ref::CheckNotNull(op, "weight", weight));
  return ref::CheckNotNull(op, "out", out);
}

// One row: out = x * (1 / sqrt(mean(x^2) + eps)) * weight, as HF computes it.
template <typename T>
void NormRow(const T* x, const T* weight, T* out, int64_t hidden, float eps) {
  float sum_sq = 0.0f;
  for (int64_t i = 0; i < hidden; ++i) {
    const float v = ref::Load(x[i]);
    sum_sq += v * v;
  }
  const float inv_rms = 1.0f / std::sqrt(sum_sq / static_cast<float>(hidden) + eps);
  for (int64_t i = 0; i < hidden; ++i) {
    out[i] = ref::Store<T>(ref::Load(weight[i]) * (ref::Load(x[i]) * inv_rms));
  }
}

}  // namespace

absl::Status RmsNormRef(const RmsNormParams& p) {
  constexpr char kOp[] = "RmsNormRef";
  RETURN_IF_ERROR(Validate(kOp, p.num_tokens, p.hidden, p.x, p.weight, p.out));
  return ref::DispatchDType(kOp, p.dtype, [&]<typename T>() {
    for (int32_t t = 0; t < p.num_tokens; ++t) {
      const int64_t row = static_cast<int64_t>(t) * p.hidden;
      NormRow(static_cast<const T*>(p.x) + row, static_cast<const T*>(p.weight),
              static_cast<T*>(p.out) + row, p.hidden, p.eps);
    }
  });
}

absl::Status FusedAddRmsNormRef(const FusedAddRmsNormParams& p) {
  constexpr char kOp[] = "FusedAddRmsNormRef";
  const bool from_partials = p.x == nullptr && p.partials != nullptr;
  if (from_partials && p.num_partials < 1) {
    return ref::ArgError(kOp, "partials given with num_partials < 1");
  }
  RETURN_IF_ERROR(
      Validate(kOp, p.num_tokens, p.hidden, from_partials ? p.partials : p.x, p.weight, p.out));
  if (p.num_tokens > 0) RETURN_IF_ERROR(ref::CheckNotNull(kOp, "residual", p.residual));
  // The add: residual = x + residual, rounded to the storage type; x is the
  // sum of the partials (in slice order, rounded to the storage type) when
  // they are given.
  RETURN_IF_ERROR(ref::DispatchDType(kOp, p.dtype, [&]<typename T>() {
    const T* x = static_cast<const T*>(p.x);
    T* residual = static_cast<T*>(p.residual);
    const int64_t n = static_cast<int64_t>(p.num_tokens) * p.hidden;
    for (int64_t i = 0; i < n; ++i) {
      float v = 0.0f;
      if (from_partials) {
        v = p.partials[i];
        for (int32_t s = 1; s < p.num_partials; ++s) v += p.partials[s * n + i];
        v = ref::Load(ref::Store<T>(v));
      } else {
        v = ref::Load(x[i]);
      }
      residual[i] = ref::Store<T>(v + ref::Load(residual[i]));
    }
  }));
  // The norm of the updated residual stream.
  RmsNormParams norm;
  norm.dtype = p.dtype;
  norm.x = p.residual;
  norm.weight = p.weight;
  norm.out = p.out;
  norm.num_tokens = p.num_tokens;
  norm.hidden = p.hidden;
  norm.eps = p.eps;
  return RmsNormRef(norm);
}

}  // namespace onecard::engine
