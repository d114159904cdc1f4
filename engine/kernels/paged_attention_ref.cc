// PagedAttentionRef: the plain reference of paged causal attention (see
// paged_attention.h): for every query token and head, scores against each
// visible position found through the block table, a max-subtracted softmax,
// and the probability-weighted sum of V, all in fp32 (FP8 pools read as
// E4m3ToFloat(code) * scale[kv_head]).
// Tested by tests/engine/kernels/paged_attention_ref_test.cc.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/common/fp8.h"
#include "engine/common/status_macros.h"
#include "engine/kernels/paged_attention.h"
#include "engine/kernels/ref_util.h"

namespace onecard::engine {
namespace {

constexpr char kOp[] = "PagedAttention";

absl::Status ValidateShapes(const PagedAttentionParams& p) {
  const KvLayout& l = p.layout;
  RETURN_IF_ERROR(ref::CheckPositive(kOp, "layout.num_blocks", l.num_blocks));
  RETURN_IF_ERROR(ref::CheckPositive(kOp, "layout.block_size", l.block_size));
  RETURN_IF_ERROR(ref::CheckPositive(kOp, "layout.num_kv_heads", l.num_kv_heads));
  RETURN_IF_ERROR(ref::CheckPositive(kOp, "layout.head_dim", l.head_dim));
  RETURN_IF_ERROR(ref::CheckPositive(kOp, "num_heads", p.num_heads));
  if (p.num_heads % l.num_kv_heads != 0) {
    return ref::ArgError(kOp, absl::StrCat("num_heads ", p.num_heads,
                                           " is not a multiple of num_kv_heads ", l.num_kv_heads));
  }
  if (p.num_seqs < 0 || p.num_tokens < 0) {
    return ref::ArgError(kOp, "num_seqs or num_tokens is negative");
  }
  if (p.q_token_stride < static_cast<int64_t>(p.num_heads) * l.head_dim) {
    return ref::ArgError(
        kOp, absl::StrCat("q_token_stride ", p.q_token_stride, " is shorter than a token"));
  }
  RETURN_IF_ERROR(ref::CheckKvFp8Pair(kOp, "kv_fp8", p.kv_fp8));
  if (p.num_seqs == 0) return absl::OkStatus();
  for (auto [name, ptr] : {std::pair<const char*, const void*>{"k_cache", p.k_cache},
                           {"v_cache", p.v_cache},
                           {"cu_query_lens", p.cu_query_lens},
                           {"start_pos", p.start_pos},
                           {"block_tables", p.block_tables}}) {
    RETURN_IF_ERROR(ref::CheckNotNull(kOp, name, ptr));
  }
  if (p.num_tokens > 0) {
    RETURN_IF_ERROR(ref::CheckNotNull(kOp, "q", p.q));
    RETURN_IF_ERROR(ref::CheckNotNull(kOp, "out", p.out));
  }
  return absl::OkStatus();
}

// Chunk s: query lengths add up, positions fit its block table, and every
// block it reads is in the pool.
absl::Status ValidateSeq(const PagedAttentionParams& p, int32_t s) {
  const int32_t len = p.cu_query_lens[s + 1] - p.cu_query_lens[s];
  if (len < 0) return ref::ArgError(kOp, absl::StrCat("cu_query_lens decreases at ", s));
  if (p.start_pos[s] < 0) {
    return ref::ArgError(kOp, absl::StrCat("start_pos[", s, "] = ", p.start_pos[s], " < 0"));
  }
  const int64_t context = static_cast<int64_t>(p.start_pos[s]) + len;
  const int64_t blocks = (context + p.layout.block_size - 1) / p.layout.block_size;
  if (blocks > p.max_blocks_per_seq) {
    return ref::ArgError(
        kOp, absl::StrCat("sequence ", s, " needs ", blocks, " blocks; max_blocks_per_seq is ",
                          p.max_blocks_per_seq));
  }
  const int32_t* table = p.block_tables + static_cast<int64_t>(s) * p.max_blocks_per_seq;
  for (int64_t b = 0; b < blocks; ++b) {
    if (table[b] < 0 || table[b] >= p.layout.num_blocks) {
      return ref::ArgError(kOp, absl::StrCat("block_tables[", s, "][", b, "] = ", table[b],
                                             " is outside [0, ", p.layout.num_blocks, ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidatePagedAttention(const PagedAttentionParams& p) {
  RETURN_IF_ERROR(ValidateShapes(p));
  if (p.num_seqs == 0) {
    if (p.num_tokens == 0) return absl::OkStatus();
    return ref::ArgError(kOp, "num_tokens > 0 with no sequences");
  }
  if (p.cu_query_lens[0] != 0 || p.cu_query_lens[p.num_seqs] != p.num_tokens) {
    return ref::ArgError(
        kOp, absl::StrCat("cu_query_lens must run from 0 to num_tokens ", p.num_tokens, "; got ",
                          p.cu_query_lens[0], " .. ", p.cu_query_lens[p.num_seqs]));
  }
  for (int32_t s = 0; s < p.num_seqs; ++s) RETURN_IF_ERROR(ValidateSeq(p, s));
  return absl::OkStatus();
}

namespace {

// row[0, n) = the pool's n values at element offset `at` in fp32: values of
// T, or E4M3 codes times *scale when scale is set.
template <typename T>
void LoadKvRow(const void* pool, int64_t at, int32_t n, const float* scale, float* row) {
  if (scale == nullptr) {
    const T* x = static_cast<const T*>(pool) + at;
    for (int32_t d = 0; d < n; ++d) row[d] = ref::Load(x[d]);
    return;
  }
  const uint8_t* codes = static_cast<const uint8_t*>(pool) + at;
  for (int32_t d = 0; d < n; ++d) row[d] = E4m3ToFloat(codes[d]) * *scale;
}

// One query head at `position` of a sequence with block table `table`:
// out = sum_j softmax_j(scale * q . K[j]) V[j] over j = 0..position.
template <typename T>
void AttendOne(const PagedAttentionParams& p, const int32_t* table, int32_t position, const T* q,
               int32_t kv_head, T* out) {
  const KvLayout& l = p.layout;
  const bool fp8 = p.kv_fp8.enabled();
  const float* k_scale = fp8 ? p.kv_fp8.k + kv_head : nullptr;
  const float* v_scale = fp8 ? p.kv_fp8.v + kv_head : nullptr;
  std::vector<float> probs(position + 1), row(l.head_dim);
  float max_score = -std::numeric_limits<float>::infinity();
  for (int32_t j = 0; j <= position; ++j) {
    const int64_t at = l.Offset(table[j / l.block_size], j % l.block_size, kv_head);
    LoadKvRow<T>(p.k_cache, at, l.head_dim, k_scale, row.data());
    float dot = 0.0f;
    for (int32_t d = 0; d < l.head_dim; ++d) dot += ref::Load(q[d]) * row[d];
    probs[j] = dot * p.scale;
    max_score = std::max(max_score, probs[j]);
  }
  float sum = 0.0f;
  for (float& e : probs) {
    e = std::exp(e - max_score);
    sum += e;
  }
  std::vector<float> acc(l.head_dim, 0.0f);
  for (int32_t j = 0; j <= position; ++j) {
    const int64_t at = l.Offset(table[j / l.block_size], j % l.block_size, kv_head);
    LoadKvRow<T>(p.v_cache, at, l.head_dim, v_scale, row.data());
    const float prob = probs[j] / sum;
    for (int32_t d = 0; d < l.head_dim; ++d) acc[d] += prob * row[d];
  }
  for (int32_t d = 0; d < l.head_dim; ++d) out[d] = ref::Store<T>(acc[d]);
}

}  // namespace

absl::Status PagedAttentionRef(const PagedAttentionParams& p) {
  RETURN_IF_ERROR(ValidatePagedAttention(p));
  RETURN_IF_ERROR(ref::CheckKvFp8Scales(kOp, "kv_fp8", p.kv_fp8, p.layout.num_kv_heads));
  const int32_t group = p.num_heads / p.layout.num_kv_heads;
  const int32_t head_dim = p.layout.head_dim;
  return ref::DispatchDType("PagedAttentionRef", p.dtype, [&]<typename T>() {
    for (int32_t s = 0; s < p.num_seqs; ++s) {
      const int32_t* table = p.block_tables + static_cast<int64_t>(s) * p.max_blocks_per_seq;
      for (int32_t t = p.cu_query_lens[s]; t < p.cu_query_lens[s + 1]; ++t) {
        const int32_t position = p.start_pos[s] + (t - p.cu_query_lens[s]);
        const T* q = static_cast<const T*>(p.q) + t * p.q_token_stride;
        T* out = static_cast<T*>(p.out) + static_cast<int64_t>(t) * p.num_heads * head_dim;
        for (int32_t h = 0; h < p.num_heads; ++h) {
          AttendOne(p, table, position, q + h * head_dim, h / group, out + h * head_dim);
        }
      }
    }
  });
}

}  // namespace onecard::engine
