// Experiment (bench/experiments/README.md): at a small decode batch, attention
// over short contexts leaves the HBM idle for a few microseconds before the O
// projection streams its 33.5 MB of weights. Does asking L2 for those
// weights (cp.async.bulk.prefetch.L2) while a stand-in for attention runs
// make the stream after it faster, and how should the prefetch be issued?
// Not part of the build.
//
// A "layer" here: [attention stand-in: spins kSpinUs on kAttnBlocks blocks]
// -> [stream: reads the layer's O-sized weight like the GEMV does: a
// persistent grid, 16-byte ld.global.nc loads, 8 in flight a thread]. 32
// layers with distinct weights (1 GB in all, so nothing stays in L2 from one
// replay to the next) in a graph, ordinary launches. Forms:
//   plain      spin -> stream
//   kernel     prefetch kernel (132 blocks of a warp, 16 KiB a thread) -> spin -> stream
//   inside     the spin kernel's blocks issue the prefetch first, then spin
//   streamx2   stream -> stream of the same weight (the second from L2)
//   spin only / stream only: the parts alone
#include <cuda_runtime.h>

#include <cstdio>
#include <vector>

#include "experiment_common.cuh"

constexpr int kLayers = 32;
constexpr size_t kBytes = size_t{4096} * 4096 * 2;
constexpr int kAttnBlocks = 512;  // the batch-1 decode attention grid

__device__ __forceinline__ unsigned long long GlobalTimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ void Prefetch(const char* p, size_t bytes, size_t first, size_t stride) {
  constexpr size_t kPiece = 16 << 10;
  for (size_t off = first * kPiece; off < bytes; off += stride * kPiece) {
    const unsigned size = static_cast<unsigned>(bytes - off < kPiece ? bytes - off : kPiece);
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p + off), "r"(size) : "memory");
  }
}

__global__ void PrefetchKernel(const char* p, size_t bytes) {
  Prefetch(p, bytes, size_t{blockIdx.x} * blockDim.x + threadIdx.x, size_t{gridDim.x} * blockDim.x);
}

// Spins for `us`; with `p`, the first 132 blocks' first warp issue the prefetch first.
__global__ void Spin(int us, const char* p, size_t bytes) {
  if (p != nullptr && blockIdx.x < 132 && threadIdx.x < 32) {
    Prefetch(p, bytes, size_t{blockIdx.x} * 32 + threadIdx.x, size_t{132} * 32);
  }
  const unsigned long long t0 = GlobalTimer();
  while (GlobalTimer() - t0 < us * 1000ull) {
  }
}

__global__ void __launch_bounds__(256, 2) Stream(const uint4* w, size_t n, float* out) {
  float acc = 0;
  const size_t stride = size_t{gridDim.x} * blockDim.x;
  size_t i = size_t{blockIdx.x} * blockDim.x + threadIdx.x;
  for (; i + 7 * stride < n; i += 8 * stride) {
    uint4 v[8];
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                   : "=r"(v[u].x), "=r"(v[u].y), "=r"(v[u].z), "=r"(v[u].w)
                   : "l"(w + i + u * stride));
    }
#pragma unroll
    for (int u = 0; u < 8; ++u) acc += __uint_as_float(v[u].x ^ v[u].y ^ v[u].z ^ v[u].w);
  }
  for (; i < n; i += stride) acc += __uint_as_float(w[i].x);
  if (acc == 1.2345f) out[0] = acc;  // keeps the loads
}

int main() {
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  std::vector<char*> w(kLayers);
  for (auto& p : w) {
    CK(cudaMalloc(&p, kBytes));
    CK(cudaMemset(p, 1, kBytes));
  }
  float* out;
  CK(cudaMalloc(&out, 4));
  const size_t n = kBytes / 16;
  const int stream_grid = 132 * 2;
  for (int spin_us : {0, 4, 8, 12}) {
    auto layer = [&](int form, int l) {
      const uint4* wl = reinterpret_cast<const uint4*>(w[l]);
      if (form == 1) PrefetchKernel<<<132, 32, 0, s>>>(w[l], kBytes);
      if (form != 3 && form != 5)
        Spin<<<kAttnBlocks, 128, 0, s>>>(spin_us, form == 2 ? w[l] : nullptr, kBytes);
      if (form == 3) Stream<<<stream_grid, 256, 0, s>>>(wl, n, out);
      if (form != 4) Stream<<<stream_grid, 256, 0, s>>>(wl, n, out);
    };
    const char* names[] = {"plain", "kernel", "inside", "streamx2", "spin only", "stream only"};
    for (int rep = 0; rep < 2; ++rep) {
      printf("spin %2d us rep %d:", spin_us, rep);
      for (int form = 0; form < 6; ++form) {
        const double us = CaptureReplayUs(s, 20, [&] {
          for (int l = 0; l < kLayers; ++l) layer(form, l);
        });
        printf("  %s %.2f", names[form], us / kLayers);
      }
      printf("  (us a layer)\n");
    }
  }
  printf("done\n");
  return 0;
}
