// KvCacheWriteRef: the plain reference of the paged KV-cache write (see
// kv_cache_write.h): a copy into pools of the input's dtype, or each value
// as E4m3CodeOf(x, scale[kv_head]) into FP8 pools.
// Tested by tests/engine/kernels/kv_cache_write_ref_test.cc.
#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "engine/common/fp8.h"
#include "engine/common/status_macros.h"
#include "engine/kernels/kv_cache_write.h"
#include "engine/kernels/ref_util.h"

namespace onecard::engine {
namespace {

constexpr char kOp[] = "KvCacheWriteRef";

absl::Status Validate(const KvCacheWriteParams& p) {
  const KvLayout& l = p.layout;
  RETURN_IF_ERROR(ref::CheckPositive(kOp, "layout.num_blocks", l.num_blocks));
  RETURN_IF_ERROR(ref::CheckPositive(kOp, "layout.block_size", l.block_size));
  RETURN_IF_ERROR(ref::CheckPositive(kOp, "layout.num_kv_heads", l.num_kv_heads));
  RETURN_IF_ERROR(ref::CheckPositive(kOp, "layout.head_dim", l.head_dim));
  RETURN_IF_ERROR(ref::CheckKvFp8Scales(kOp, "fp8", p.fp8, l.num_kv_heads));
  if (p.num_tokens < 0) return ref::ArgError(kOp, "num_tokens is negative");
  if (p.num_tokens == 0) return absl::OkStatus();
  const int64_t token_elems = static_cast<int64_t>(l.num_kv_heads) * l.head_dim;
  if (p.k_token_stride < token_elems || p.v_token_stride < token_elems) {
    return ref::ArgError(
        kOp, absl::StrCat("token strides k ", p.k_token_stride, ", v ", p.v_token_stride,
                          " are shorter than a token (", token_elems, ")"));
  }
  for (auto [name, ptr] : {std::pair<const char*, const void*>{"k", p.k},
                           {"v", p.v},
                           {"k_cache", p.k_cache},
                           {"v_cache", p.v_cache},
                           {"slot_mapping", p.slot_mapping}}) {
    RETURN_IF_ERROR(ref::CheckNotNull(kOp, name, ptr));
  }
  const int64_t num_slots = static_cast<int64_t>(l.num_blocks) * l.block_size;
  for (int32_t t = 0; t < p.num_tokens; ++t) {
    if (p.slot_mapping[t] >= num_slots) {
      return ref::ArgError(kOp, absl::StrCat("slot_mapping[", t, "] = ", p.slot_mapping[t],
                                             " is past the pool's ", num_slots, " slots"));
    }
  }
  return absl::OkStatus();
}

// n values of x into the pool at dst: a copy, or E4m3CodeOf(x, scale) codes
// when scale is set.
template <typename T>
void WriteRow(const T* x, int64_t n, const float* scale, void* pool, int64_t dst) {
  if (scale == nullptr) {
    std::copy_n(x, n, static_cast<T*>(pool) + dst);
    return;
  }
  uint8_t* codes = static_cast<uint8_t*>(pool) + dst;
  for (int64_t i = 0; i < n; ++i) codes[i] = E4m3CodeOf(ref::Load(x[i]), *scale);
}

}  // namespace

absl::Status KvCacheWriteRef(const KvCacheWriteParams& p) {
  RETURN_IF_ERROR(Validate(p));
  const KvLayout& l = p.layout;
  const bool fp8 = p.fp8.enabled();
  return ref::DispatchDType(kOp, p.dtype, [&]<typename T>() {
    for (int32_t t = 0; t < p.num_tokens; ++t) {
      const int32_t slot = p.slot_mapping[t];
      if (slot < 0) continue;  // padding
      const int32_t block = slot / l.block_size;
      const int32_t offset = slot % l.block_size;
      const T* k = static_cast<const T*>(p.k) + t * p.k_token_stride;
      const T* v = static_cast<const T*>(p.v) + t * p.v_token_stride;
      for (int32_t h = 0; h < l.num_kv_heads; ++h) {
        const int64_t dst = l.Offset(block, offset, h);
        WriteRow(k + h * l.head_dim, l.head_dim, fp8 ? p.fp8.k + h : nullptr, p.k_cache, dst);
        WriteRow(v + h * l.head_dim, l.head_dim, fp8 ? p.fp8.v + h : nullptr, p.v_cache, dst);
      }
    }
  });
}

}  // namespace onecard::engine
