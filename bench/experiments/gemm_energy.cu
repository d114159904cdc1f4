// Experiment (bench/experiments/README.md): the energy of the decode products'
// cuBLASLt algorithms at m = 128. Batch-128 decode runs at the H200's power
// cap (bench/results/2026-11-29-h200-cuda.md), where a product's speed depends on the
// energy the whole step draws; the tuner times its candidates in short bursts
// at full clock. For each product, each of the heuristic's first 8
// algorithms runs for about a second as a graph of 32 products over distinct
// weights (streaming from HBM, as in a step); NVML gives the energy, the SM
// clock at the end and the board power. Not part of the build.
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "experiment_common.cuh"

// The few NVML calls used, from the driver's libnvidia-ml.so.1 (no NVML
// header or stub on the build machine).
struct Nvml {
  using Device = void*;
  int (*init)();
  int (*handle)(unsigned, Device*);
  int (*energy)(Device, unsigned long long*);  // mJ since the driver loaded
  int (*clock)(Device, int, unsigned*);        // type 1: SM
  int (*power)(Device, unsigned*);             // mW
  bool Load() {
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW);
    if (lib == nullptr) return false;
    init = reinterpret_cast<decltype(init)>(dlsym(lib, "nvmlInit_v2"));
    handle = reinterpret_cast<decltype(handle)>(dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"));
    energy = reinterpret_cast<decltype(energy)>(dlsym(lib, "nvmlDeviceGetTotalEnergyConsumption"));
    clock = reinterpret_cast<decltype(clock)>(dlsym(lib, "nvmlDeviceGetClockInfo"));
    power = reinterpret_cast<decltype(power)>(dlsym(lib, "nvmlDeviceGetPowerUsage"));
    return init && handle && energy && clock && power && init() == 0;
  }
};

// Random bf16 in [-0.06, 0.06) (a hash of the index): energy depends on the
// bits that toggle, so constant or zero data would flatter every algorithm.
__global__ void Fill(unsigned short* p, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    unsigned h = unsigned(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    const float f = (float(h & 0xffff) / 65536.0f - 0.5f) * 0.12f;
    p[i] = static_cast<unsigned short>(__float_as_uint(f) >> 16);
  }
}

int main() {
  Nvml nvml;
  if (!nvml.Load()) return printf("NVML not available\n"), 1;
  Nvml::Device dev = nullptr;
  nvml.handle(0, &dev);
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cublasLtHandle_t lt;
  cublasLtCreate(&lt);
  const size_t ws_size = 32 << 20;
  void* ws;
  CK(cudaMalloc(&ws, ws_size));
  struct Shape {
    const char* name;
    int n, k;
  };
  const Shape shapes[] = {
      {"qkv", 6144, 4096}, {"o", 4096, 4096}, {"gate_up", 28672, 4096}, {"down", 4096, 14336}};
  const int m = 128, copies = 32;
  for (const Shape& sh : shapes) {
    cublasLtMatmulDesc_t desc;
    cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    cublasOperation_t t = CUBLAS_OP_T, nn = CUBLAS_OP_N;
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t));
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &nn, sizeof(nn));
    cublasLtMatrixLayout_t a, b, d;
    cublasLtMatrixLayoutCreate(&a, CUDA_R_16BF, sh.k, sh.n, sh.k);
    cublasLtMatrixLayoutCreate(&b, CUDA_R_16BF, sh.k, m, sh.k);
    cublasLtMatrixLayoutCreate(&d, CUDA_R_16BF, sh.n, m, sh.n);
    cublasLtMatmulPreference_t pref;
    cublasLtMatmulPreferenceCreate(&pref);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_size,
                                         sizeof(ws_size));
    cublasLtMatmulHeuristicResult_t res[8];
    int got = 0;
    cublasLtMatmulAlgoGetHeuristic(lt, desc, a, b, d, d, pref, 8, res, &got);
    std::vector<void*> w(copies);
    for (auto& p : w) {
      CK(cudaMalloc(&p, size_t(sh.n) * sh.k * 2));
      Fill<<<1024, 256>>>(static_cast<unsigned short*>(p), size_t(sh.n) * sh.k, 17u);
    }
    void *x, *y;
    CK(cudaMalloc(&x, size_t(m) * sh.k * 2));
    Fill<<<1024, 256>>>(static_cast<unsigned short*>(x), size_t(m) * sh.k, 91u);
    CK(cudaDeviceSynchronize());
    CK(cudaMalloc(&y, size_t(m) * sh.n * 2));
    for (int i = 0; i < got; ++i) {
      const float one = 1.0f, zero = 0.0f;
      cudaGraph_t g;
      CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
      for (int c = 0; c < copies; ++c) {
        cublasLtMatmul(lt, desc, &one, w[c], a, x, b, &zero, y, d, y, d, &res[i].algo, ws, ws_size,
                       s);
      }
      CK(cudaStreamEndCapture(s, &g));
      cudaGraphExec_t e;
      CK(cudaGraphInstantiate(&e, g, 0));
      for (int r = 0; r < 20; ++r) CK(cudaGraphLaunch(e, s));  // warm
      CK(cudaStreamSynchronize(s));
      unsigned long long e0 = 0, e1 = 0;
      nvml.energy(dev, &e0);
      cudaEvent_t t0, t1;
      cudaEventCreate(&t0);
      cudaEventCreate(&t1);
      CK(cudaEventRecord(t0, s));
      int launches = 0;
      const auto start = std::chrono::steady_clock::now();
      while (std::chrono::steady_clock::now() - start < std::chrono::milliseconds(1200)) {
        for (int r = 0; r < 10; ++r, ++launches) CK(cudaGraphLaunch(e, s));
        CK(cudaStreamSynchronize(s));
      }
      CK(cudaEventRecord(t1, s));
      CK(cudaEventSynchronize(t1));
      nvml.energy(dev, &e1);
      unsigned int clock = 0, power = 0;
      nvml.clock(dev, 1, &clock);
      nvml.power(dev, &power);
      float ms = 0;
      cudaEventElapsedTime(&ms, t0, t1);
      const double us = 1e3 * ms / (launches * copies);
      const double mj = double(e1 - e0) / (launches * copies);
      printf(
          "%-8s m=%d algo #%d: %7.2f us  %6.2f mJ a product  %4.0f W  SM %u MHz at the end, "
          "%u W\n",
          sh.name, m, i, us, mj, mj / us * 1e3, clock, power / 1000);
      cudaGraphExecDestroy(e);
      cudaGraphDestroy(g);
    }
    for (void* p : w) cudaFree(p);
    cudaFree(x);
    cudaFree(y);
  }
  return 0;
}
