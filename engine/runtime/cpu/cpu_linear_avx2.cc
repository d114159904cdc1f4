// WIP: the avx2 row kernels (cpu_linear_kernels.h).
#include "engine/runtime/cpu/cpu_linear_kernels.h"
namespace onecard::engine::cpu_linear {
const Kernels& Avx2Kernels() { return GenericKernels(); }
}  // namespace onecard::engine::cpu_linear
