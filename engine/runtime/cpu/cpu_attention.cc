// PagedAttentionCpu (see cpu_attention.h): one work item per (query token,
// kv head). An item scores its query group against every visible position
// (each K row read once for the group), takes a max-subtracted softmax per
// head, and sums the V rows weighted by the probabilities (each V row read
// once for the group); the AVX-512 or AVX2 kernels (cpu_attention_kernels.h)
// do the scores and the sum where they apply, the softmax is shared.
// Tested by tests/engine/runtime/cpu/cpu_attention_test.cc.
#include "engine/runtime/cpu/cpu_attention.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/runtime/cpu/cpu_attention_kernels.h"

namespace onecard::engine {
namespace {

// Where one query token sits: its chunk and its position.
struct TokenPlace {
  const int32_t* block_table;  // its chunk's row of block_tables
  int32_t position;
};

std::vector<TokenPlace> PlaceTokens(const PagedAttentionParams& p) {
  std::vector<TokenPlace> places(p.num_tokens);
  for (int32_t s = 0; s < p.num_seqs; ++s) {
    const int32_t* table = p.block_tables + static_cast<int64_t>(s) * p.max_blocks_per_seq;
    for (int32_t t = p.cu_query_lens[s]; t < p.cu_query_lens[s + 1]; ++t) {
      places[t] = {table, p.start_pos[s] + (t - p.cu_query_lens[s])};
    }
  }
  return places;
}

// probs[j] <- softmax(probs)[j], max-subtracted, over one head's scores.
void Softmax(float* probs, int32_t n) {
  const float max_score = *std::max_element(probs, probs + n);
  float sum = 0.0f;
  for (int32_t j = 0; j < n; ++j) {
    probs[j] = std::exp(probs[j] - max_score);
    sum += probs[j];
  }
  for (int32_t j = 0; j < n; ++j) probs[j] /= sum;
}

constexpr int kLanes = 16;  // independent partial sums of a dot product

// q . k over n values: lane l sums the products at l, l + 16, ... in order
// (n - n % 16 of them; the rest go to lanes 0, 1, ... in turn), then a fixed
// tree. The lanes are independent, so the compiler makes vector code of them
// without reordering any sum, and every clone below computes the same bits.
inline float LaneDot(const float* q, const float* k, int32_t n) {
  float lanes[kLanes] = {};
  const int32_t n_main = n - n % kLanes;
  for (int32_t i = 0; i < n_main; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) lanes[l] += q[i + l] * k[i + l];
  }
  for (int32_t i = n_main; i < n; ++i) lanes[i - n_main] += q[i] * k[i];
  for (int width = kLanes / 2; width > 0; width /= 2) {
    for (int l = 0; l < width; ++l) lanes[l] += lanes[l + width];
  }
  return lanes[0];
}

// The outputs of query token t for the heads of kv head kv_head.
// scratch: [group * (position + 1)] scores, then probabilities. Cloned for
// AVX-512 and AVX2 (chosen at load by the processor; the same arithmetic in
// each: no contraction, the lanes above).
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"))) void AttendGroup(
    const PagedAttentionParams& p, const TokenPlace& place, int32_t t, int32_t kv_head,
    std::vector<float>& scratch) {
  const KvLayout& l = p.layout;
  const int32_t group = p.num_heads / l.num_kv_heads;
  const int32_t context = place.position + 1;
  const float* q = static_cast<const float*>(p.q) + t * p.q_token_stride +
                   static_cast<int64_t>(kv_head) * group * l.head_dim;
  float* out = static_cast<float*>(p.out) +
               (static_cast<int64_t>(t) * p.num_heads + kv_head * group) * l.head_dim;
  scratch.resize(static_cast<size_t>(group) * context);
  for (int32_t j = 0; j < context; ++j) {
    const int64_t at = l.Offset(place.block_table[j / l.block_size], j % l.block_size, kv_head);
    const float* k = static_cast<const float*>(p.k_cache) + at;
    for (int32_t h = 0; h < group; ++h) {
      scratch[h * context + j] = LaneDot(q + h * l.head_dim, k, l.head_dim) * p.scale;
    }
  }
  for (int32_t h = 0; h < group; ++h) Softmax(&scratch[h * context], context);
  std::fill(out, out + static_cast<int64_t>(group) * l.head_dim, 0.0f);
  for (int32_t j = 0; j < context; ++j) {
    const int64_t at = l.Offset(place.block_table[j / l.block_size], j % l.block_size, kv_head);
    const float* v = static_cast<const float*>(p.v_cache) + at;
    for (int32_t h = 0; h < group; ++h) {
      const float prob = scratch[h * context + j];
      float* out_h = out + h * l.head_dim;
      for (int32_t d = 0; d < l.head_dim; ++d) out_h[d] += prob * v[d];
    }
  }
}

// An instruction set's two halves of an item (cpu_attention_kernels.h);
// null where none takes it (the portable AttendGroup does).
struct GroupKernels {
  void (*scores)(const cpu_attention::GroupArgs&) = nullptr;
  void (*weighted_values)(const cpu_attention::GroupArgs&) = nullptr;
};

GroupKernels KernelsFor(CpuIsa isa, int32_t head_dim) {
  if (!cpu_attention::KernelsTakeHeadDim(head_dim)) return {};
  if (isa == CpuIsa::kAvx512Vnni || isa == CpuIsa::kAvx512Bf16 || isa == CpuIsa::kAmxBf16) {
    return {cpu_attention::ScoresAvx512, cpu_attention::WeightedValuesAvx512};
  }
  if (isa == CpuIsa::kAvx2) return {cpu_attention::ScoresAvx2, cpu_attention::WeightedValuesAvx2};
  return {};
}

// The same item by an instruction set's kernels.
void AttendGroupKernels(const PagedAttentionParams& p, const TokenPlace& place, int32_t t,
                        int32_t kv_head, const GroupKernels& kernels, std::vector<float>& scratch) {
  const KvLayout& l = p.layout;
  const int32_t group = p.num_heads / l.num_kv_heads;
  const int32_t context = place.position + 1;
  scratch.resize(static_cast<size_t>(group) * context);
  const cpu_attention::GroupArgs args = {
      .q = static_cast<const float*>(p.q) + t * p.q_token_stride +
           static_cast<int64_t>(kv_head) * group * l.head_dim,
      .out = static_cast<float*>(p.out) +
             (static_cast<int64_t>(t) * p.num_heads + kv_head * group) * l.head_dim,
      .k_cache = static_cast<const float*>(p.k_cache),
      .v_cache = static_cast<const float*>(p.v_cache),
      .block_table = place.block_table,
      .context = context,
      .group = group,
      .head_dim = l.head_dim,
      .block_size = l.block_size,
      .block_stride = l.BlockStride(),
      .slot_stride = static_cast<int64_t>(l.num_kv_heads) * l.head_dim,
      .head_offset = static_cast<int64_t>(kv_head) * l.head_dim,
      .scale = p.scale,
      .scores = scratch.data()};
  kernels.scores(args);
  for (int32_t h = 0; h < group; ++h) Softmax(&scratch[h * context], context);
  kernels.weighted_values(args);
}

}  // namespace

absl::Status PagedAttentionCpu(ThreadPool& pool, const PagedAttentionParams& p, CpuIsa isa) {
  assert(CpuSupports(isa) && "PagedAttentionCpu: the processor does not run this isa");
  RETURN_IF_ERROR(ValidatePagedAttention(p));
  if (p.dtype != DType::kF32) {
    return absl::UnimplementedError(absl::StrCat("PagedAttentionCpu: dtype ",
                                                 std::string(DTypeName(p.dtype)),
                                                 " is not supported; supported: F32"));
  }
  if (p.kv_fp8.enabled()) {  // the cpu backend keeps FP8-rounded values in F32 pools
    return absl::UnimplementedError("PagedAttentionCpu: FP8 pools (kv_fp8) are not supported");
  }
  const std::vector<TokenPlace> places = PlaceTokens(p);
  const int32_t num_kv_heads = p.layout.num_kv_heads;
  const GroupKernels kernels = KernelsFor(isa, p.layout.head_dim);
  pool.ParallelFor(static_cast<int64_t>(p.num_tokens) * num_kv_heads,
                   [&](int64_t begin, int64_t end) {
                     std::vector<float> scratch;
                     for (int64_t item = begin; item < end; ++item) {
                       const int32_t t = static_cast<int32_t>(item / num_kv_heads);
                       const int32_t kv_head = static_cast<int32_t>(item % num_kv_heads);
                       if (kernels.scores != nullptr) {
                         AttendGroupKernels(p, places[t], t, kv_head, kernels, scratch);
                       } else {
                         AttendGroup(p, places[t], t, kv_head, scratch);
                       }
                     }
                   });
  return absl::OkStatus();
}

}  // namespace onecard::engine
