// The CPU's share of an offloaded model (placement_plan.h) as the CUDA runner
// runs it: in a step of at most PlacementPlan::cpu_max_rows rows, each run of
// consecutive CPU layers is one span on the runner's stream:
//
//   [the card's layers] -> residual (BF16) down -> host node: the CPU runs the
//   span (OffloadedLayers, from the layers' pinned host copies) -> residual
//   back -> each layer's K/V rows up, written into the card's pools
//
// so a decode step stays one captured graph, and the card's pools hold what
// the CPU's hold. In larger steps the CPU layers stream like the others, and
// the K/V rows they write on the card are copied down (GatherKvRowsBf16) and
// written into the CPU's pools once the step is done.
// This header: the start-up measurements of the host's side of the cost model.
// The runner's side: CudaRunnerImpl's methods in cpu_span.cc.
// Tested by tests/gpu/cuda_model_runner_offload_test.cc.
#ifndef ONECARD_ENGINE_RUNTIME_CUDA_CPU_SPAN_H_
#define ONECARD_ENGINE_RUNTIME_CUDA_CPU_SPAN_H_

#include <cuda_runtime.h>

#include "absl/status/statusor.h"
#include "engine/common/thread_pool.h"
#include "engine/runtime/cuda/placement_plan.h"

namespace onecard::engine {

// Sets rates->host_read_bytes_per_s (HostLinearForward at 1 row over a
// 4-bit weight of 256 MiB of codes, larger than the caches, in memory made
// as the offloaded weights' is, on `pool`: bytes of the weight over the
// time), host_rows2_bytes_per_s (the same at 2 rows) and host_flops_per_s
// (the FLOPs at kCpuMaxRows rows over the time), each the mean
// of the calls over 0.2 s after one untimed; both
// readers at once (host_read_shared_bytes_per_s, h2d_shared_bytes_per_s):
// 6 GiB of pinned uploads queued on `stream` while the kernel runs at 1 row
// until they are done; and span_s, a span's overhead: a BF16 residual of
// kCpuMaxRows rows down, an empty host node and the residual back on
// `stream`, the mean over 0.2 s.
absl::Status MeasureCpuRates(ThreadPool& pool, int64_t hidden, cudaStream_t stream,
                             OffloadRates* rates);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_RUNTIME_CUDA_CPU_SPAN_H_
