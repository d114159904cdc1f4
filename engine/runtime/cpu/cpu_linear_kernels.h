// The row kernels behind CpuLinearForward (cpu_linear.h), one table per
// instruction set: each computes the dot products of one weight row, in its
// GGUF blocks, with up to kMaxRows rows of 8-bit activations (QuantizedRows). The AVX2
// and AVX-512 tables live in translation units compiled for those sets
// (cpu_linear_avx2.cc, cpu_linear_avx512.cc), which include nothing that
// defines inline code shared with the rest of the program, so no function
// compiled for one set can stand in for another's. Internal to the cpu
// backend. Tested through tests/engine/runtime/cpu/cpu_linear_test.cc.
#ifndef ONECARD_ENGINE_RUNTIME_CPU_CPU_LINEAR_KERNELS_H_
#define ONECARD_ENGINE_RUNTIME_CPU_CPU_LINEAR_KERNELS_H_

#include <cstdint>

namespace onecard::engine::cpu_linear {

// One row of quantized activations (QuantizedRows): q [cols], d [cols / 32],
// sum16 [cols / 16], dsum [cols / 32].
struct XRow {
  const int8_t* q;
  const float* d;
  const int32_t* sum16;
  const float* dsum;
};

inline constexpr int kMaxRows = 4;  // rows of x a kernel call takes

// out[r] = the sum over the weight row's blocks of W[o, block] . x[r][block],
// for r < n (1..kMaxRows); `cols` is the row's length, a multiple of the
// dtype's block. out[r] depends on x[r] alone: the same operations in the
// same order whatever n.
using RowDot = void (*)(const uint8_t* w, const XRow* x, int n, int64_t cols, float* out);

struct Kernels {
  RowDot q4_0 = nullptr;
  RowDot q4_1 = nullptr;
  RowDot q8_0 = nullptr;
  RowDot q4_k = nullptr;
  RowDot q5_k = nullptr;
  RowDot q6_k = nullptr;
};

const Kernels& GenericKernels();
const Kernels& Avx2Kernels();
const Kernels& Avx512VnniKernels();

}  // namespace onecard::engine::cpu_linear

#endif  // ONECARD_ENGINE_RUNTIME_CPU_CPU_LINEAR_KERNELS_H_
