// Shared by the experiments of this folder (bench/experiments/README.md):
// CK(call) ends the program with the CUDA error and the line when a runtime
// call fails. Not part of the build.
#ifndef ONECARD_BENCH_EXPERIMENTS_EXPERIMENT_CHECK_CUH_
#define ONECARD_BENCH_EXPERIMENTS_EXPERIMENT_CHECK_CUH_

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define CK(x)                                                                   \
  do {                                                                          \
    auto e_ = (x);                                                              \
    if (e_ != cudaSuccess) {                                                    \
      printf("CUDA %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); \
      exit(1);                                                                  \
    }                                                                           \
  } while (0)

#endif  // ONECARD_BENCH_EXPERIMENTS_EXPERIMENT_CHECK_CUH_
