// Experiment (bench/experiments/README.md): L2 bulk prefetch of the next product's weights, issued
// by a small kernel ahead of it, during a bandwidth-bound kernel or a GEMM.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "experiment_common.cuh"

__device__ __forceinline__ uint64_t Policy(int kind) {
  uint64_t p;
  if (kind == 1) {
    asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(p));
  } else if (kind == 2) {
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
  } else {
    asm volatile("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;" : "=l"(p));
  }
  return p;
}

// Each block prefetches its share of [p, p + bytes) into L2.
__device__ __forceinline__ void PrefetchShare(const char* p, size_t bytes, int policy_kind) {
  if (bytes == 0 || threadIdx.x != 0) return;
  const size_t share = ((bytes / gridDim.x) + 4095) & ~size_t(4095);
  const size_t begin = share * blockIdx.x;
  if (begin >= bytes) return;
  const size_t end = begin + share < bytes ? begin + share : bytes;
  const uint64_t pol = Policy(policy_kind);
  for (size_t o = begin; o < end; o += 65536) {
    const uint32_t n = static_cast<uint32_t>(end - o < 65536 ? end - o : 65536);
    asm volatile("cp.async.bulk.prefetch.L2.global.L2::cache_hint [%0], %1, %2;" ::"l"(p + o),
                 "r"(n), "l"(pol)
                 : "memory");
  }
}

// Bandwidth-bound stand-in for decode attention: reads n uint4.
__global__ void ReadKernel(const uint4* src, size_t n, uint4* sink, const char* pf, size_t pf_bytes,
                           int pf_policy, int evict_first) {
  PrefetchShare(pf, pf_bytes, pf_policy);
  uint32_t acc = 0;
  const uint64_t pol = Policy(2);
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    uint4 v;
    if (evict_first) {
      asm volatile("ld.global.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;"
                   : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                   : "l"(src + i), "l"(pol));
    } else {
      v = src[i];
    }
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x12345678u) sink[0] = make_uint4(acc, 0, 0, 0);
}

// Small stand-in (RmsNorm / SiLU): touches little, prefetches.
__global__ void TinyKernel(const char* pf, size_t pf_bytes, int pf_policy, uint4* sink) {
  PrefetchShare(pf, pf_bytes, pf_policy);
  if (threadIdx.x == 0 && blockIdx.x == 0 && pf_bytes == 1) sink[0] = make_uint4(1, 2, 3, 4);
}

int main() {
  const auto [s, h] = BlasOnStream();
  const int L = 16, m = 128;
  const size_t kv_bytes = 134ull << 20;
  auto alloc = [](size_t b) {
    void* p;
    CK(cudaMalloc(&p, b));
    CK(cudaMemset(p, 0x3c, b));
    return p;
  };
  std::vector<void*> kv, wo, wqkv, wgu, wd;
  for (int i = 0; i < L; ++i) {
    kv.push_back(alloc(kv_bytes));
    wo.push_back(alloc(4096ull * 4096 * 2));
    wqkv.push_back(alloc(6144ull * 4096 * 2));
    wgu.push_back(alloc(28672ull * 4096 * 2));
    wd.push_back(alloc(4096ull * 14336 * 2));
  }
  void* x = alloc(m * 14336 * 2);
  void* y = alloc(m * 28672 * 2);
  uint4* sink = static_cast<uint4*>(alloc(64));
  const float one = 1.0f, zero = 0.0f;
  auto gemm = [&](void* w, int n, int k, bool acc) {
    cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &one, w, CUDA_R_16BF, k, x, CUDA_R_16BF, k,
                 acc ? &one : &zero, y, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  };
  auto time_graph = [&](auto&& body) { return CaptureReplayUs(s, 5, body) / L; };
  // Scenario 1: attention stand-in then the o product.
  const int read_blocks = 132 * 8;
  for (int pf_policy : {1, 0}) {
    for (int evict_first : {0, 1}) {
      for (size_t pf : {size_t(0), size_t(16) << 20, size_t(32) << 20}) {
        double us = time_graph([&] {
          for (int i = 0; i < L; ++i) {
            ReadKernel<<<read_blocks, 512, 0, s>>>(static_cast<const uint4*>(kv[i]), kv_bytes / 16,
                                                   sink, static_cast<const char*>(wo[i]), pf,
                                                   pf_policy, evict_first);
            gemm(wo[i], 4096, 4096, true);
          }
        });
        double read_only = time_graph([&] {
          for (int i = 0; i < L; ++i) {
            ReadKernel<<<read_blocks, 512, 0, s>>>(static_cast<const uint4*>(kv[i]), kv_bytes / 16,
                                                   sink, static_cast<const char*>(wo[i]), pf,
                                                   pf_policy, evict_first);
          }
        });
        printf("read+o: policy %s evict_first %d prefetch %3zu MB: %.2f us (read alone %.2f)\n",
               pf_policy == 1 ? "last  " : "normal", evict_first, pf >> 20, us, read_only);
      }
    }
  }
  // Scenario 2: the MLP and the next qkv: tiny -> gate_up -> tiny -> down -> tiny -> qkv.
  for (int pf_policy : {1, 0}) {
    for (size_t pf_down : {size_t(0), size_t(24) << 20, size_t(40) << 20}) {
      for (size_t pf_qkv : {size_t(0), size_t(24) << 20, size_t(40) << 20}) {
        double us = time_graph([&] {
          for (int i = 0; i < L; ++i) {
            TinyKernel<<<128, 128, 0, s>>>(static_cast<const char*>(wd[i]), pf_down, pf_policy,
                                           sink);
            gemm(wgu[i], 28672, 4096, false);
            TinyKernel<<<128, 128, 0, s>>>(static_cast<const char*>(wqkv[(i + 1) % L]), pf_qkv,
                                           pf_policy, sink);
            gemm(wd[i], 4096, 14336, true);
            TinyKernel<<<128, 128, 0, s>>>(nullptr, 0, 0, sink);
            gemm(wqkv[(i + 1) % L], 6144, 4096, false);
          }
        });
        printf("mlp+qkv: policy %s prefetch down %2zu MB qkv %2zu MB: %.2f us\n",
               pf_policy == 1 ? "last  " : "normal", pf_down >> 20, pf_qkv >> 20, us);
      }
    }
  }
  // Reference: each GEMM alone.
  printf("o alone %.2f, gate_up %.2f, down %.2f, qkv %.2f us\n", time_graph([&] {
           for (int i = 0; i < L; ++i) gemm(wo[i], 4096, 4096, true);
         }),
         time_graph([&] {
           for (int i = 0; i < L; ++i) gemm(wgu[i], 28672, 4096, false);
         }),
         time_graph([&] {
           for (int i = 0; i < L; ++i) gemm(wd[i], 4096, 14336, true);
         }),
         time_graph([&] {
           for (int i = 0; i < L; ++i) gemm(wqkv[i], 6144, 4096, false);
         }));
  return 0;
}
