// The AVX-512 VNNI row kernels of CpuLinearForward (cpu_linear_kernels.h), from
// cpu_linear_simd.inc. This file is compiled for AVX-512 VNNI alone (see
// CMakeLists.txt) and includes no header with inline code shared elsewhere.
// Tested by tests/engine/runtime/cpu/cpu_linear_test.cc.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "engine/runtime/cpu/cpu_linear_kernels.h"

#define ONECARD_CPU_LINEAR_VNNI 1

namespace onecard::engine::cpu_linear {
namespace {

#include "engine/runtime/cpu/cpu_linear_simd.inc"

}  // namespace

const Kernels& Avx512VnniKernels() { return kSimdKernels; }

}  // namespace onecard::engine::cpu_linear
