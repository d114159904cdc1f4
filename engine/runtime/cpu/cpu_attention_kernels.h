// The AVX-512 and AVX2 halves of one PagedAttentionCpu work item
// (cpu_attention.h): the scores of a query group against its visible K rows
// and the probability-weighted sum of the V rows, the same bits as the
// portable code. They live in cpu_attention_avx512.cc and
// cpu_attention_avx2.cc, each compiled for its instruction set alone and
// including nothing that defines inline code shared with the rest of the
// program (so no function compiled for it can stand in for a portable one);
// cpu_attention.cc calls them only where the processor runs the set and the
// head size is one they take. Internal to the cpu backend. Tested through
// tests/engine/runtime/cpu/cpu_attention_test.cc.
#ifndef ONECARD_ENGINE_RUNTIME_CPU_CPU_ATTENTION_KERNELS_H_
#define ONECARD_ENGINE_RUNTIME_CPU_CPU_ATTENTION_KERNELS_H_

#include <cstdint>

namespace onecard::engine::cpu_attention {

// One (query token, kv head) item, as plain data. Position j's K row is at
// k_cache + block_table[j / block_size] * block_stride +
// (j % block_size) * slot_stride + head_offset (V likewise).
struct GroupArgs {
  const float* q;  // the group's queries: `group` rows of head_dim, one after the other
  float* out;      // the group's outputs, laid out as q
  const float* k_cache;
  const float* v_cache;
  const int32_t* block_table;
  int32_t context;  // visible positions 0 .. context - 1
  int32_t group;
  int32_t head_dim;
  int32_t block_size;
  int64_t block_stride;
  int64_t slot_stride;
  int64_t head_offset;
  float scale;
  float* scores;  // [group][context]: the scores, then (softmaxed by the caller) the probabilities
};

// Head sizes the AVX-512 and AVX2 kernels take.
constexpr bool KernelsTakeHeadDim(int32_t head_dim) { return head_dim == 64 || head_dim == 128; }

// scores[h][j] = scale * (q_h . K_j) for every head h of the group and j < context.
void ScoresAvx512(const GroupArgs& a);
// out_h = sum_j scores[h][j] V_j for every head h of the group.
void WeightedValuesAvx512(const GroupArgs& a);
// The same by AVX2 (with FMA, unused: no product is fused).
void ScoresAvx2(const GroupArgs& a);
void WeightedValuesAvx2(const GroupArgs& a);

}  // namespace onecard::engine::cpu_attention

#endif  // ONECARD_ENGINE_RUNTIME_CPU_CPU_ATTENTION_KERNELS_H_
