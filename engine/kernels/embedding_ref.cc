// EmbeddingRef: the plain reference of the embedding gather (see embedding.h).
// Tested by tests/engine/kernels/embedding_ref_test.cc.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/kernels/embedding.h"
#include "engine/kernels/ref_util.h"

namespace onecard::engine {
namespace {

constexpr char kOp[] = "EmbeddingRef";

absl::Status Validate(const EmbeddingParams& p) {
  RETURN_IF_ERROR(ref::CheckPositive(kOp, "vocab_size", p.vocab_size));
  RETURN_IF_ERROR(ref::CheckPositive(kOp, "hidden", p.hidden));
  if (p.num_tokens < 0) return ref::ArgError(kOp, "num_tokens is negative");
  if (p.num_tokens == 0) return absl::OkStatus();
  RETURN_IF_ERROR(ref::CheckNotNull(kOp, "token_ids", p.token_ids));
  RETURN_IF_ERROR(ref::CheckNotNull(kOp, "table", p.table));
  RETURN_IF_ERROR(ref::CheckNotNull(kOp, "out", p.out));
  for (int32_t t = 0; t < p.num_tokens; ++t) {
    if (p.token_ids[t] < 0 || p.token_ids[t] >= p.vocab_size) {
      return ref::ArgError(kOp, absl::StrCat("token_ids[", t, "] = ", p.token_ids[t],
                                             " is outside [0, ", p.vocab_size, ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status EmbeddingRef(const EmbeddingParams& p) {
  RETURN_IF_ERROR(Validate(p));
  return ref::DispatchDType(kOp, p.dtype, [&]<typename T>() {
    const T* table = static_cast<const T*>(p.table);
    T* out = static_cast<T*>(p.out);
    for (int32_t t = 0; t < p.num_tokens; ++t) {
      const T* row = table + static_cast<int64_t>(p.token_ids[t]) * p.hidden;
      std::copy(row, row + p.hidden, out + static_cast<int64_t>(t) * p.hidden);
    }
  });
}

}  // namespace onecard::engine
