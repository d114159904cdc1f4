// Experiment (bench/experiments/README.md): split-K as a strided batch (fp32
// partials; with and without a separate reduction kernel) for the llama3-8b
// decode products at m = 128, 64 and 32, cuBLAS's default algorithm.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "experiment_common.cuh"

__global__ void Reduce(const float4* p, int S, size_t n4, float4* out_f, uint2* out_bf) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n4;
       i += size_t(gridDim.x) * blockDim.x) {
    float4 a = p[i];
    for (int s = 1; s < S; ++s) {
      float4 b = p[i + s * n4];
      a.x += b.x;
      a.y += b.y;
      a.z += b.z;
      a.w += b.w;
    }
    out_f[i] = a;
  }
}
int main() {
  const auto [s, h] = BlasOnStream();
  const int L = 16;
  struct P {
    const char* name;
    int n, k;
  } probs[] = {
      {"qkv", 6144, 4096}, {"o", 4096, 4096}, {"gate_up", 28672, 4096}, {"down", 4096, 14336}};
  for (int m : {128, 64, 32})
    for (auto& p : probs) {
      std::vector<void*> w(L);
      for (auto& wi : w) {
        CK(cudaMalloc(&wi, size_t(p.n) * p.k * 2));
        CK(cudaMemset(wi, 0x3c, size_t(p.n) * p.k * 2));
      }
      void *x, *y, *y2;
      CK(cudaMalloc(&x, size_t(m) * p.k * 2));
      CK(cudaMemset(x, 0x3c, size_t(m) * p.k * 2));
      CK(cudaMalloc(&y, size_t(m) * p.n * 4 * 8));
      CK(cudaMalloc(&y2, size_t(m) * p.n * 4));
      for (int S : {1, 2, 3, 4, 6, 8}) {
        if (p.k % (S * 64) != 0 && S != 3 && S != 6) continue;
        const int ks = p.k / S;
        if (ks % 8) continue;
        for (int with_reduce : {0, 1}) {
          if (S == 1 && with_reduce) continue;
          const float one = 1.f, zero = 0.f;
          const double us =
              CaptureReplayUs(
                  s, 5,
                  [&] {
                    for (int i = 0; i < L; ++i) {
                      CK(cublasGemmStridedBatchedEx(h, CUBLAS_OP_T, CUBLAS_OP_N, p.n, m, ks, &one,
                                                    w[i], CUDA_R_16BF, p.k, ks, x, CUDA_R_16BF, p.k,
                                                    ks, &zero, y, CUDA_R_32F, p.n, size_t(p.n) * m,
                                                    S, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
                      if (with_reduce)
                        Reduce<<<264, 512, 0, s>>>((const float4*)y, S, size_t(p.n) * m / 4,
                                                   (float4*)y2, nullptr);
                    }
                  }) /
              L;
          printf("m=%3d %-8s S=%d reduce=%d: %7.2f us  %5.0f GB/s\n", m, p.name, S, with_reduce, us,
                 2.0 * p.n * p.k / us / 1e3);
        }
      }
      for (auto wi : w) cudaFree(wi);
      cudaFree(x);
      cudaFree(y);
      cudaFree(y2);
    }
}
