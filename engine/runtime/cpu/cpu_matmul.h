// MatMul: the cpu backend's y = x W^T + b (the contract of LinearRef in
// engine/kernels/linear.h, fp32), fast enough to decode SmolLM2 at tens of
// tokens/s on two cores, and batch-invariant:
// - every y[r, o] is one dot product of x[r, :] and W[o, :] summed in a fixed
//   order (eight interleaved partial sums, k = l, l + 8, l + 16, ... for lane l,
//   then a fixed tree), whatever the number of rows, the tiling or the thread
//   that computes it; so a row's result never depends on the other rows;
// - threads split the output features (a fixed partition, ThreadPool), so each
//   thread streams its own slice of W.
// The target is compiled with -ffp-contract=off so the compiler cannot fuse a
// multiply-add in one code path and not in another.
// Tested by tests/engine/runtime/cpu/cpu_matmul_test.cc (against LinearRef and
// for bitwise row independence).
#ifndef ONECARD_ENGINE_RUNTIME_CPU_CPU_MATMUL_H_
#define ONECARD_ENGINE_RUNTIME_CPU_CPU_MATMUL_H_

#include <cstdint>

#include "engine/common/thread_pool.h"

namespace onecard::engine {

struct MatMulArgs {
  const float* x = nullptr;     // [num_rows, in_features]
  const float* w = nullptr;     // [out_features, in_features]
  const float* bias = nullptr;  // [out_features] or null
  float* y = nullptr;           // [num_rows, out_features]; must not alias x
  int64_t num_rows = 0;
  int64_t in_features = 0;
  int64_t out_features = 0;
};

// y = x W^T + b. Shapes are the caller's to get right (checked by assert).
void MatMul(ThreadPool& pool, const MatMulArgs& args);

// One thread's share of it: output features [o_begin, o_end) of every row
// of x, row r's written from args.y + r * y_stride (MatMul's y_stride is
// out_features; CpuLinearForward runs its fp32 row runs through this).
void MatMulSlice(const MatMulArgs& args, int64_t o_begin, int64_t o_end, int64_t y_stride);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_RUNTIME_CPU_CPU_MATMUL_H_
