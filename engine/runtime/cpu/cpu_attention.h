// PagedAttentionCpu: the cpu backend's paged causal attention, the contract of
// PagedAttentionRef (engine/kernels/paged_attention.h) for F32 pools (not
// kv_fp8's FP8 ones: Unimplemented), spread over threads. Work items are (query token, kv head):
// each item reads its sequence's K and V for that head once for the whole query group (GQA) and
// computes the group's outputs; an item's arithmetic depends only on its own
// token, so results are batch-invariant. `isa` picks the code: with AVX-512
// (kAvx512Vnni and up) and head sizes 64 and 128 the kernels of
// cpu_attention_avx512.cc, otherwise portable code cloned for AVX-512 and
// AVX2. Arguments are validated as the reference does (same errors).
// Tested by tests/engine/runtime/cpu/cpu_attention_test.cc against
// PagedAttentionRef.
#ifndef ONECARD_ENGINE_RUNTIME_CPU_CPU_ATTENTION_H_
#define ONECARD_ENGINE_RUNTIME_CPU_CPU_ATTENTION_H_

#include "absl/status/status.h"
#include "engine/common/thread_pool.h"
#include "engine/kernels/paged_attention.h"
#include "engine/runtime/cpu/cpu_linear.h"

namespace onecard::engine {

absl::Status PagedAttentionCpu(ThreadPool& pool, const PagedAttentionParams& params,
                               CpuIsa isa = DetectCpuIsa());

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_RUNTIME_CPU_CPU_ATTENTION_H_
