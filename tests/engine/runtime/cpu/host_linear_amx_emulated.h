// HostLinearForward's AMX kernels over an emulated tile unit
// (host_linear_amx_emulated.cc, compiled for AVX-512 BF16): call them only
// where CpuSupports(CpuIsa::kAvx512Bf16).
#ifndef ONECARD_TESTS_ENGINE_RUNTIME_CPU_HOST_LINEAR_AMX_EMULATED_H_
#define ONECARD_TESTS_ENGINE_RUNTIME_CPU_HOST_LINEAR_AMX_EMULATED_H_

#include "engine/runtime/cpu/host_linear_kernels.h"

namespace onecard::engine::host_linear {

const Kernels& EmulatedAmxKernels();

}  // namespace onecard::engine::host_linear

#endif  // ONECARD_TESTS_ENGINE_RUNTIME_CPU_HOST_LINEAR_AMX_EMULATED_H_
