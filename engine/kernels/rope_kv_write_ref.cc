// RopeKvWriteRef: the reference of the fused bias + RoPE + KV-cache write
// (see rope_kv_write.h): the composition of the bias add, RopeRef and
// KvCacheWriteRef (FP8 pools when fp8 is set: the rotated k and v as
// stored in `dtype`, then encoded). Tested by
// tests/engine/kernels/rope_kv_write_ref_test.cc, tests/gpu/rope_kv_test.cc
// (as the spec of the CUDA kernel) and through the runners.
#include "engine/common/status_macros.h"
#include "engine/kernels/kv_cache_write.h"
#include "engine/kernels/ref_util.h"
#include "engine/kernels/rope.h"
#include "engine/kernels/rope_kv_write.h"

namespace onecard::engine {

absl::Status RopeKvWriteRef(const RopeKvWriteParams& p) {
  constexpr char kOp[] = "RopeKvWriteRef";
  const int64_t head_dim = p.layout.head_dim;
  const int64_t q_elems = static_cast<int64_t>(p.num_heads) * head_dim;
  const int64_t kv_elems = static_cast<int64_t>(p.layout.num_kv_heads) * head_dim;
  const int64_t row = q_elems + 2 * kv_elems;
  if (p.num_tokens < 0) return ref::ArgError(kOp, "num_tokens is negative");
  if (p.num_tokens == 0) return absl::OkStatus();
  RETURN_IF_ERROR(ref::CheckNotNull(kOp, "qkv", p.qkv));
  // Before qkv changes: KvCacheWriteRef checks the scales again, too late.
  RETURN_IF_ERROR(ref::CheckPositive(kOp, "layout.num_kv_heads", p.layout.num_kv_heads));
  RETURN_IF_ERROR(ref::CheckKvFp8Scales(kOp, "fp8", p.fp8, p.layout.num_kv_heads));
  if (p.bias != nullptr) {
    RETURN_IF_ERROR(ref::DispatchDType(kOp, p.dtype, [&]<typename T>() {
      T* qkv = static_cast<T*>(p.qkv);
      const T* bias = static_cast<const T*>(p.bias);
      for (int64_t t = 0; t < p.num_tokens; ++t) {
        for (int64_t i = 0; i < row; ++i) {
          qkv[t * row + i] = ref::Store<T>(ref::Load(qkv[t * row + i]) + ref::Load(bias[i]));
        }
      }
    }));
  }
  const int64_t elem_size = p.dtype == DType::kF32 ? 4 : 2;
  char* base = static_cast<char*>(p.qkv);
  RopeParams rope;
  rope.dtype = p.dtype;
  rope.q = base;
  rope.k = base + q_elems * elem_size;
  rope.q_token_stride = row;
  rope.k_token_stride = row;
  rope.positions = p.positions;
  rope.inv_freq = p.inv_freq;
  rope.num_tokens = p.num_tokens;
  rope.num_heads = p.num_heads;
  rope.num_kv_heads = p.layout.num_kv_heads;
  rope.head_dim = p.layout.head_dim;
  RETURN_IF_ERROR(RopeRef(rope));
  KvCacheWriteParams write;
  write.dtype = p.dtype;
  write.k = rope.k;
  write.v = base + (q_elems + kv_elems) * elem_size;
  write.k_token_stride = row;
  write.v_token_stride = row;
  write.k_cache = p.k_cache;
  write.v_cache = p.v_cache;
  write.layout = p.layout;
  write.slot_mapping = p.slot_mapping;
  write.num_tokens = p.num_tokens;
  write.fp8 = p.fp8;
  return KvCacheWriteRef(write);
}

}  // namespace onecard::engine
