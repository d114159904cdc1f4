// cudaStream_t for kernel headers, without including any CUDA header (the
// references and every CPU-only target include the kernel headers too).
// CUDA's driver_types.h declares `typedef struct CUstream_st *cudaStream_t;`;
// this alias names the same type, and redeclaring a typedef to the same type
// is legal C++, so a .cu file may include both in either order.
// No test of its own: every x.cu that includes it with cuda_runtime.h checks it.
#ifndef ONECARD_ENGINE_KERNELS_STREAM_H_
#define ONECARD_ENGINE_KERNELS_STREAM_H_

struct CUstream_st;
using cudaStream_t = CUstream_st*;

#endif  // ONECARD_ENGINE_KERNELS_STREAM_H_
