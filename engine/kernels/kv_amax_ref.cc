// KvAmaxRef: the plain reference of KvAmax (see kv_amax.h).
#include <algorithm>
#include <cmath>

#include "engine/kernels/kv_amax.h"
#include "engine/kernels/ref_util.h"

namespace onecard::engine {

absl::Status KvAmaxRef(const KvAmaxParams& p) {
  constexpr char kOp[] = "KvAmaxRef";
  if (p.num_tokens < 0 || p.num_heads <= 0 || p.layout.num_kv_heads <= 0 ||
      p.layout.head_dim <= 0) {
    return ref::ArgError(kOp, "bad sizes");
  }
  if (p.num_tokens > 0 && (p.qkv == nullptr || p.slot_mapping == nullptr || p.k_amax == nullptr ||
                           p.v_amax == nullptr)) {
    return ref::ArgError(kOp, "null qkv, slot_mapping, k_amax or v_amax");
  }
  return ref::DispatchDType(kOp, p.dtype, [&]<typename T>() {
    const int64_t d = p.layout.head_dim;
    const int64_t nkv = p.layout.num_kv_heads;
    const int64_t q_elems = p.num_heads * d;
    const int64_t row = q_elems + 2 * nkv * d;
    const T* x = static_cast<const T*>(p.qkv);
    for (int32_t t = 0; t < p.num_tokens; ++t) {
      if (p.slot_mapping[t] < 0) continue;
      for (int64_t i = 0; i < nkv * d; ++i) {
        const int64_t h = i / d;
        p.k_amax[h] = std::max(p.k_amax[h], std::fabs(ref::Load(x[t * row + q_elems + i])));
        p.v_amax[h] =
            std::max(p.v_amax[h], std::fabs(ref::Load(x[t * row + q_elems + nkv * d + i])));
      }
    }
  });
}

}  // namespace onecard::engine
