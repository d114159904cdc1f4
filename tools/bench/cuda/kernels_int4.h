// The 4-bit weights of the kernels-int4 and timeline-int4 scenarios
// (kernels_int4.cc, timeline_int4.cc): copies of one packed weight, groups of
// 128, symmetric (codes + one fp16 scale a group), rotated so that L2 never
// holds the one a launch reads.
#ifndef ONECARD_TOOLS_BENCH_CUDA_KERNELS_INT4_H_
#define ONECARD_TOOLS_BENCH_CUDA_KERNELS_INT4_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/kernels/int4_gemm.h"
#include "tools/bench/cuda/cuda_bench.h"

namespace onecard::bench {

inline constexpr int32_t kInt4BenchGroup = 128;

// Copies of one packed weight (codes then scales, each 256-aligned) that
// together pass 1.5 GB.
struct Int4Rotation {
  DeviceMem mem;
  int64_t stride = 0;  // bytes a copy
  int copies = 0;
  int64_t code_bytes = 0;
  int64_t weight_bytes = 0;  // codes + scales: what a call must read
  engine::Int4WeightView View(int i, int64_t n, int64_t k) const {
    char* base = mem.get() + (i % copies) * stride;
    return {
        base, base + code_bytes, nullptr, n, k, kInt4BenchGroup, engine::Int4Offsets::kSymmetric};
  }
};

absl::StatusOr<Int4Rotation> MakeInt4Rotation(int64_t n, int64_t k, cudaStream_t stream);

// Int4Gemm's parameters for projection s as the runner calls it (gate_up
// with the SiLU·mul epilogue, o and down adding to y) on weight w, x (s.k
// columns a row) and y, `rows` rows, over the workspace; path, tile rows and
// trace left to the caller.
inline engine::Int4GemmParams ProjectionInt4Params(const ProjectionCase& s,
                                                   const engine::Int4WeightView& w, const void* x,
                                                   void* y, int32_t rows, void* ws,
                                                   int64_t ws_bytes) {
  return {.w = w,
          .x = x,
          .x_row_stride = s.k,
          .y = y,
          .add_to_y =
              s.projection == engine::Projection::kO || s.projection == engine::Projection::kDown,
          .silu_mul_y = s.projection == engine::Projection::kGateUp,
          .rows = rows,
          .workspace = ws,
          .workspace_bytes = ws_bytes};
}

// What both scenarios run over: the selected projection shapes
// (SelectedProjectionCases), the device's SMs and a zeroed Int4Gemm
// workspace for the widest shape.
struct Int4BenchSetup {
  std::vector<ProjectionCase> shapes;
  int sms = 0;
  DeviceMem workspace;
  int64_t workspace_bytes = 0;
};

absl::StatusOr<Int4BenchSetup> MakeInt4BenchSetup();

}  // namespace onecard::bench

#endif  // ONECARD_TOOLS_BENCH_CUDA_KERNELS_INT4_H_
