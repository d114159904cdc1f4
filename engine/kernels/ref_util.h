// Shared helpers of the kernel references (x_ref.cc only; not a kernel API):
// the element types the references support, fp32 load/store of those types,
// the one dtype dispatch, and the argument checks that every reference makes.
// The references compute in fp32 whatever the storage type: BF16 inputs are
// widened on load and outputs rounded (nearest even) once on store.
// Tested through the references' tests (tests/engine/kernels/*_ref_test.cc).
#ifndef ONECARD_ENGINE_KERNELS_REF_UTIL_H_
#define ONECARD_ENGINE_KERNELS_REF_UTIL_H_

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "engine/common/dtype.h"
#include "engine/kernels/bf16.h"
#include "engine/kv_cache/kv_layout.h"

namespace onecard::engine::ref {

// Storage type of a BF16 element (a distinct type, so templates can dispatch).
struct Bf16 {
  uint16_t bits;
};

inline float Load(float x) { return x; }
inline float Load(Bf16 x) { return Bf16ToFloat(x.bits); }

template <typename T>
T Store(float x);
template <>
inline float Store<float>(float x) {
  return x;
}
template <>
inline Bf16 Store<Bf16>(float x) {
  return Bf16{FloatToBf16(x)};
}

// The supported set, listed once: F32 and BF16.
inline absl::Status UnsupportedDType(const char* op, DType dtype) {
  return absl::UnimplementedError(absl::StrCat(op, ": dtype ", std::string(DTypeName(dtype)),
                                               " is not supported; supported: F32, BF16"));
}

// Runs impl.template operator()<T>() with T the storage type of `dtype`:
//   return DispatchDType("RmsNormRef", p.dtype, [&]<typename T>() { ... });
template <typename Impl>
absl::Status DispatchDType(const char* op, DType dtype, Impl&& impl) {
  switch (dtype) {
    case DType::kF32:
      impl.template operator()<float>();
      return absl::OkStatus();
    case DType::kBF16:
      impl.template operator()<Bf16>();
      return absl::OkStatus();
    default:
      return UnsupportedDType(op, dtype);
  }
}

inline absl::Status ArgError(const char* op, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(op, ": ", what));
}

// InvalidArgument "op: field must be > 0, got v" unless value > 0.
inline absl::Status CheckPositive(const char* op, const char* field, int64_t value) {
  if (value > 0) return absl::OkStatus();
  return ArgError(op, absl::StrCat(field, " must be > 0, got ", value));
}

// InvalidArgument "op: field is null" when ptr is null.
inline absl::Status CheckNotNull(const char* op, const char* field, const void* ptr) {
  if (ptr != nullptr) return absl::OkStatus();
  return ArgError(op, absl::StrCat(field, " is null"));
}

// The pairing of an FP8 KV cache's scale pointers (KvFp8Scales): both set or
// both null, else InvalidArgument naming the null one ("<field>.v is null
// while <field>.k is set"). Reads no scale (they may be device memory).
inline absl::Status CheckKvFp8Pair(const char* op, const char* field, const KvFp8Scales& s) {
  if ((s.k == nullptr) == (s.v == nullptr)) return absl::OkStatus();
  const bool k_set = s.k != nullptr;
  return ArgError(op, absl::StrCat(field, k_set ? ".v" : ".k", " is null while ", field,
                                   k_set ? ".k" : ".v", " is set"));
}

// CheckKvFp8Pair, then each of the num_kv_heads scales of K and V (host
// memory) finite and > 0, else InvalidArgument naming it ("fp8.k[3] = 0 is
// not a finite scale > 0").
inline absl::Status CheckKvFp8Scales(const char* op, const char* field, const KvFp8Scales& s,
                                     int32_t num_kv_heads) {
  if (absl::Status pair = CheckKvFp8Pair(op, field, s); !pair.ok()) return pair;
  if (!s.enabled()) return absl::OkStatus();
  for (auto [name, scales] : {std::pair<const char*, const float*>{"k", s.k}, {"v", s.v}}) {
    for (int32_t h = 0; h < num_kv_heads; ++h) {
      if (std::isfinite(scales[h]) && scales[h] > 0.0f) continue;
      return ArgError(op, absl::StrCat(field, ".", name, "[", h, "] = ", scales[h],
                                       " is not a finite scale > 0"));
    }
  }
  return absl::OkStatus();
}

// The checks of x's row stride and of the epilogue (gemv.h's fusions) that
// the weight-only GEMMs share (CheckInt4GemmParams, CheckFp8GemmParams):
// InvalidArgument for an x_row_stride below k or not a multiple of 8 and for
// fusions that do not go together, Unimplemented for a y dtype other than
// BF16 and F32; `op` starts the message.
inline absl::Status CheckGemmXAndEpilogue(absl::string_view op, int64_t k, int64_t x_row_stride,
                                          DType y_dtype, bool add_to_y, bool silu_mul_y) {
  const auto error = [&](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat(op, ": ", what));
  };
  if (x_row_stride < k || x_row_stride % 8 != 0) {
    return error(absl::StrCat("x_row_stride ", x_row_stride, " must be >= k and a multiple of 8"));
  }
  if (y_dtype != DType::kBF16 && y_dtype != DType::kF32) {
    return absl::UnimplementedError(absl::StrCat(op, ": y dtype ", std::string(DTypeName(y_dtype)),
                                                 " is not supported; supported: BF16, F32"));
  }
  if ((add_to_y || silu_mul_y) && y_dtype != DType::kBF16) {
    return error("add_to_y and silu_mul_y need a BF16 y");
  }
  if (add_to_y && silu_mul_y) return error("add_to_y and silu_mul_y together");
  return absl::OkStatus();
}

}  // namespace onecard::engine::ref

#endif  // ONECARD_ENGINE_KERNELS_REF_UTIL_H_
