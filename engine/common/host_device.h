// ONECARD_HOST_DEVICE: marks the inline functions that the host code and the
// CUDA kernels share (layouts, index math, conversions): __host__ __device__
// under nvcc, nothing otherwise.
#ifndef ONECARD_ENGINE_COMMON_HOST_DEVICE_H_
#define ONECARD_ENGINE_COMMON_HOST_DEVICE_H_

#if defined(__CUDACC__)
#define ONECARD_HOST_DEVICE __host__ __device__
#else
#define ONECARD_HOST_DEVICE
#endif

#endif  // ONECARD_ENGINE_COMMON_HOST_DEVICE_H_
