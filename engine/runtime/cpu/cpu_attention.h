// PagedAttentionCpu: the cpu backend's paged causal attention, the contract of
// PagedAttentionRef (engine/kernels/paged_attention.h) for F32 pools (not
// kv_fp8's FP8 ones: Unimplemented), spread over threads. Work items are (query token, kv head):
// each item reads its sequence's K and V for that head once for the whole query group (GQA) and
// computes the group's outputs; an item's arithmetic depends only on its own
// token, so results are batch-invariant. Arguments are validated as the
// reference does (same errors).
// Tested by tests/engine/runtime/cpu/cpu_attention_test.cc against
// PagedAttentionRef.
#ifndef ONECARD_ENGINE_RUNTIME_CPU_CPU_ATTENTION_H_
#define ONECARD_ENGINE_RUNTIME_CPU_CPU_ATTENTION_H_

#include "absl/status/status.h"
#include "engine/common/thread_pool.h"
#include "engine/kernels/paged_attention.h"

namespace onecard::engine {

absl::Status PagedAttentionCpu(ThreadPool& pool, const PagedAttentionParams& params);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_RUNTIME_CPU_CPU_ATTENTION_H_
