// RopeInvFreq and RopeRef: the plain reference of rotary embeddings (see
// rope.h). Tested by tests/engine/kernels/rope_ref_test.cc.
#include <cmath>
#include <numbers>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/kernels/ref_util.h"
#include "engine/kernels/rope.h"

namespace onecard::engine {
namespace {

constexpr char kOp[] = "RopeRef";

// HF's _compute_llama3_parameters, element by element, in fp32.
float Llama3Scale(float inv_freq, const RopeScaling& s) {
  const float old_context = static_cast<float>(s.original_max_position_embeddings);
  const float low_freq_wavelen = old_context / s.low_freq_factor;
  const float high_freq_wavelen = old_context / s.high_freq_factor;
  const float wavelen = 2.0f * std::numbers::pi_v<float> / inv_freq;
  if (wavelen < high_freq_wavelen) return inv_freq;            // high frequency: kept
  if (wavelen > low_freq_wavelen) return inv_freq / s.factor;  // low frequency: scaled
  const float smooth =
      (old_context / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
  return (1.0f - smooth) * inv_freq / s.factor + smooth * inv_freq;
}

absl::Status Validate(const RopeParams& p) {
  RETURN_IF_ERROR(ref::CheckPositive(kOp, "head_dim", p.head_dim));
  if (p.head_dim % 2 != 0)
    return ref::ArgError(kOp, absl::StrCat("head_dim ", p.head_dim, " is odd"));
  RETURN_IF_ERROR(ref::CheckPositive(kOp, "num_heads", p.num_heads));
  RETURN_IF_ERROR(ref::CheckPositive(kOp, "num_kv_heads", p.num_kv_heads));
  if (p.num_tokens < 0) return ref::ArgError(kOp, "num_tokens is negative");
  if (p.num_tokens == 0) return absl::OkStatus();
  if (p.q_token_stride < static_cast<int64_t>(p.num_heads) * p.head_dim ||
      p.k_token_stride < static_cast<int64_t>(p.num_kv_heads) * p.head_dim) {
    return ref::ArgError(kOp, absl::StrCat("token strides q ", p.q_token_stride, ", k ",
                                           p.k_token_stride, " are shorter than a token"));
  }
  RETURN_IF_ERROR(ref::CheckNotNull(kOp, "q", p.q));
  RETURN_IF_ERROR(ref::CheckNotNull(kOp, "k", p.k));
  RETURN_IF_ERROR(ref::CheckNotNull(kOp, "positions", p.positions));
  RETURN_IF_ERROR(ref::CheckNotNull(kOp, "inv_freq", p.inv_freq));
  for (int32_t t = 0; t < p.num_tokens; ++t) {
    if (p.positions[t] < 0) {
      return ref::ArgError(kOp, absl::StrCat("positions[", t, "] = ", p.positions[t], " < 0"));
    }
  }
  return absl::OkStatus();
}

// Rotates the pairs (x[i], x[i + half]) of one head by position * inv_freq[i].
template <typename T>
void RotateHead(T* x, int32_t head_dim, int32_t position, const float* inv_freq) {
  const int32_t half = head_dim / 2;
  for (int32_t i = 0; i < half; ++i) {
    const float angle = static_cast<float>(position) * inv_freq[i];
    const float c = std::cos(angle);
    const float s = std::sin(angle);
    const float x1 = ref::Load(x[i]);
    const float x2 = ref::Load(x[i + half]);
    x[i] = ref::Store<T>(x1 * c - x2 * s);
    x[i + half] = ref::Store<T>(x2 * c + x1 * s);
  }
}

}  // namespace

std::vector<float> RopeInvFreq(int32_t head_dim, float theta, const RopeScaling& scaling) {
  std::vector<float> inv_freq(head_dim / 2);
  for (int32_t i = 0; i < head_dim / 2; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(head_dim);
    const float power = static_cast<float>(std::pow(static_cast<double>(theta), exponent));
    inv_freq[i] = 1.0f / power;
    if (scaling.enabled) inv_freq[i] = Llama3Scale(inv_freq[i], scaling);
  }
  return inv_freq;
}

absl::Status RopeRef(const RopeParams& p) {
  RETURN_IF_ERROR(Validate(p));
  return ref::DispatchDType(kOp, p.dtype, [&]<typename T>() {
    for (int32_t t = 0; t < p.num_tokens; ++t) {
      T* q = static_cast<T*>(p.q) + t * p.q_token_stride;
      T* k = static_cast<T*>(p.k) + t * p.k_token_stride;
      for (int32_t h = 0; h < p.num_heads; ++h) {
        RotateHead(q + h * p.head_dim, p.head_dim, p.positions[t], p.inv_freq);
      }
      for (int32_t h = 0; h < p.num_kv_heads; ++h) {
        RotateHead(k + h * p.head_dim, p.head_dim, p.positions[t], p.inv_freq);
      }
    }
  });
}

}  // namespace onecard::engine
