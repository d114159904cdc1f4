// Shared by the experiments of this folder (bench/experiments/README.md). Not
// part of the build.
// - CK(call): ends the program with the status and the line when a CUDA
//   runtime or cuBLAS call fails (any status whose success is 0).
// - ReplayUs / CaptureReplayUs: the mean time of one replay of a CUDA graph
//   after one untimed replay, over `reps` replays.
// - BlasOnStream: a non-blocking stream and a cuBLAS handle on it with a
//   64 MiB workspace (programs that use it link -lcublas).
#ifndef ONECARD_BENCH_EXPERIMENTS_EXPERIMENT_COMMON_CUH_
#define ONECARD_BENCH_EXPERIMENTS_EXPERIMENT_COMMON_CUH_

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

inline const char* StatusText(cudaError_t e) { return cudaGetErrorString(e); }
template <typename Status>
const char* StatusText(Status) {
  return "(not a CUDA runtime error)";
}

#define CK(x)                                                                                      \
  do {                                                                                             \
    auto e_ = (x);                                                                                 \
    if (static_cast<int>(e_) != 0) {                                                               \
      printf("status %d %s at %s:%d\n", static_cast<int>(e_), StatusText(e_), __FILE__, __LINE__); \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

inline double ReplayUs(cudaGraphExec_t exec, cudaStream_t s, int reps) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  CK(cudaGraphLaunch(exec, s));
  CK(cudaEventRecord(a, s));
  for (int r = 0; r < reps; ++r) CK(cudaGraphLaunch(exec, s));
  CK(cudaEventRecord(b, s));
  CK(cudaEventSynchronize(b));
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, a, b));
  CK(cudaEventDestroy(a));
  CK(cudaEventDestroy(b));
  return 1e3 * ms / reps;
}

// Captures body() (its launches on `s`) as a graph and times its replays.
template <typename Body>
double CaptureReplayUs(cudaStream_t s, int reps, Body&& body) {
  cudaGraph_t g;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  body();
  CK(cudaStreamEndCapture(s, &g));
  cudaGraphExec_t e;
  CK(cudaGraphInstantiate(&e, g, 0));
  const double us = ReplayUs(e, s, reps);
  CK(cudaGraphExecDestroy(e));
  CK(cudaGraphDestroy(g));
  return us;
}

struct BlasStream {
  cudaStream_t s;
  cublasHandle_t h;
};

inline BlasStream BlasOnStream() {
  constexpr size_t kWorkspace = 64 << 20;
  BlasStream b;
  CK(cudaStreamCreateWithFlags(&b.s, cudaStreamNonBlocking));
  CK(cublasCreate(&b.h));
  void* ws;
  CK(cudaMalloc(&ws, kWorkspace));
  CK(cublasSetStream(b.h, b.s));
  CK(cublasSetWorkspace(b.h, ws, kWorkspace));
  return b;
}

#endif  // ONECARD_BENCH_EXPERIMENTS_EXPERIMENT_COMMON_CUH_
