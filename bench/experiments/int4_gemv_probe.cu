// Experiment (bench/experiments/README.md): at one row, the FP8 Gemv (a warp
// a weight row, eight 16-byte loads a lane issued a chunk ahead into
// registers, no shared-memory ring, no split-K workspace) streams the 70B
// products at 79-102 % of the copy rate on the H200, where Int4Gemm's kStream
// (a producer's bulk copies into a shared-memory ring, stream-K shares, a
// split-K finish through L2) reaches 54-80 %. Does a 4-bit kernel in the FP8
// Gemv's form reach the FP8 Gemv's rate, on int4_layout.h's tiles as they
// are? Not part of the build.
//
// The kernel (`RowTileGemv`): a block of 8 warps takes a row tile (16 output
// rows, all of k: 16 k / 2 bytes of codes); warp w takes the w-th eighth of
// its k tiles, each lane loading its 16 bytes of a tile (one coalesced 512-byte
// tile a warp-load), U tiles a chunk, the next chunk's loads issued before
// this chunk's mma.sync (the layout's words are the m16n8k16 A fragments, x
// the B fragment from shared memory); the eight warps' sums meet in shared
// memory and 16 outputs are written. No workspace, no atomics, no counters.
// Symmetric codes in groups of 128 (the synthetic models' format), one row of
// x; each group's sums times its fp16 scale in fp32, as Int4Gemm does.
// Forms:
//   sub    (128 + q) - 136 in bf16 before the mma (exact; Int4Gemm's way)
//   sumx   the mma on 128 + q, and 136 sum(x of the group) subtracted at the
//          group's flush (4 fewer instructions a code word)
//   grid   one block a row tile (the hardware schedules them), or
//          persistent (resident blocks only, each taking every gridDim-th tile)
// Every form is checked against the host's sum over the same codes and
// scales (64 sampled rows of each shape) before it is timed.
// Timing: 30 launches captured in a graph, back to back with programmatic
// dependent launch (each kernel issues its first chunk's loads, then
// griddepcontrol, then reads x), the weight rotating through >= 1.5 GB of
// copies so that none is in L2; GB/s of codes and scales.
// Build (from this folder): nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -I../..
//   int4_gemv_probe.cu -o igp
// Run: igp [shape-filter]
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "engine/kernels/cuda_ptx.cuh"
#include "engine/kernels/int4_codes.cuh"
#include "engine/kernels/int4_layout.h"
#include "experiment_common.cuh"

namespace cuda = onecard::engine::cuda;
using onecard::engine::Int4CodePosition;
using onecard::engine::Int4ScalePosition;
using onecard::engine::int4::Dequant128;
using onecard::engine::int4::kMagic136;
using onecard::engine::int4::SubBf16x2;

constexpr int kWarps = 8;
constexpr int kThreads = 32 * kWarps;
constexpr int kGroup = 128;  // two k tiles

struct Args {
  const uint4* codes;
  const uint32_t* scales;
  const __nv_bfloat16* x;
  __nv_bfloat16* y;
  int n_tiles, k_tiles, num_groups;
  int per_warp;  // k tiles a warp (even: whole groups)
};

// Row tile rt's tile of k tile kt, for lane `lane`; scale word of group gi.
__device__ __forceinline__ const uint4* TilePtr(const Args& a, int rt, int lane) {
  const int rg = rt / 8;
  return a.codes + (int64_t{rg} * 8 * a.k_tiles + rt % 8) * 32 + lane;
}
__device__ __forceinline__ int GroupTiles(const Args& a, int rt) {
  return static_cast<int>(onecard::engine::Int4GroupTiles(rt / 8, a.n_tiles));
}
__device__ __forceinline__ const uint32_t* ScalePtr(const Args& a, int rt, int gr) {
  const int rg = rt / 8;
  return a.scales + (int64_t{rg} * 8 * a.num_groups + rt % 8) * 8 + gr;
}

template <int U, bool kSumX>
__device__ __forceinline__ void ComputeChunk(const uint4 (&v)[U], const uint32_t (&s)[U / 2],
                                             const __nv_bfloat16* xs, const float* xsum, int kt0,
                                             int ntiles, int lane, float& acc_lo, float& acc_hi) {
  const int t4 = lane & 3;
#pragma unroll
  for (int u = 0; u < U; ++u) {
    if (u < ntiles) {
      float p[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      // (a group is two tiles: p holds tile u's sums; the flush after each
      // odd u adds the pair's.)
      const uint32_t words[4] = {v[u].x, v[u].y, v[u].z, v[u].w};
      const int col = (kt0 + u) * 64 + 4 * t4;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        uint32_t av[4];
#pragma unroll
        for (int m = 0; m < 4; ++m) {
          av[m] = Dequant128(words[i], m);
          if constexpr (!kSumX) av[m] = SubBf16x2(av[m], kMagic136);
        }
        const uint2 bv = *reinterpret_cast<const uint2*>(xs + col + 16 * i);
        cuda::MmaBf16(p, av, bv.x, bv.y);
      }
      const float2 sc = __half22float2(*reinterpret_cast<const __half2*>(&s[u / 2]));
      if constexpr (kSumX) {
        // Half the group's sum of x a tile: 136 * sum over the tile's columns.
        const float sx = xsum[kt0 + u];
        p[0] = fmaf(-136.0f, sx, p[0]);
        p[2] = fmaf(-136.0f, sx, p[2]);
      }
      acc_lo = fmaf(sc.x, p[0], acc_lo);
      acc_hi = fmaf(sc.y, p[2], acc_hi);
    }
  }
}

template <int U, bool kSumX>
__device__ __forceinline__ void LoadChunk(const Args& a, const uint4* tp, const uint32_t* sp, int g,
                                          int kt0, int end, uint4 (&v)[U], uint32_t (&s)[U / 2]) {
#pragma unroll
  for (int u = 0; u < U; ++u) {
    if (kt0 + u < end) v[u] = cuda::LoadStreaming(tp + int64_t{kt0 + u} * g * 32);
  }
#pragma unroll
  for (int u = 0; u < U / 2; ++u) {
    if (kt0 + 2 * u < end) s[u] = __ldg(sp + int64_t{(kt0 + 2 * u) / 2} * g * 8);
  }
}

template <int U, bool kSumX, bool kPersistent, int kMinBlocks>
__global__ void __launch_bounds__(kThreads, kMinBlocks) RowTileGemv(Args a) {
  extern __shared__ __align__(16) unsigned char smem[];
  __nv_bfloat16* xs = reinterpret_cast<__nv_bfloat16*>(smem);
  float* xsum = reinterpret_cast<float*>(smem + a.k_tiles * 64 * 2);  // per k tile
  float* red = xsum + a.k_tiles;                                      // [warp][16]
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gr = lane >> 2;
  const int kt_begin = warp * a.per_warp, kt_end = kt_begin + a.per_warp;
  int rt = blockIdx.x;
  uint4 v[U];
  uint32_t s[U / 2];
  if (rt < a.n_tiles) {
    LoadChunk<U, kSumX>(a, TilePtr(a, rt, lane), ScalePtr(a, rt, gr), GroupTiles(a, rt), kt_begin,
                        kt_end, v, s);
  }
  cuda::PdlEnter(true);
  const int k = a.k_tiles * 64;
  for (int i = threadIdx.x; i < k / 8; i += kThreads) {
    reinterpret_cast<uint4*>(xs)[i] = reinterpret_cast<const uint4*>(a.x)[i];
  }
  __syncthreads();
  if constexpr (kSumX) {
    for (int t = warp; t < a.k_tiles; t += kWarps) {
      float sum = __bfloat162float(xs[t * 64 + lane]) + __bfloat162float(xs[t * 64 + 32 + lane]);
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
      if (lane == 0) xsum[t] = sum;  // the tile's sum
    }
    __syncthreads();
  }
  while (rt < a.n_tiles) {
    const uint4* tp = TilePtr(a, rt, lane);
    const uint32_t* sp = ScalePtr(a, rt, gr);
    const int g = GroupTiles(a, rt);
    const int next_rt = kPersistent ? rt + gridDim.x : a.n_tiles;
    float acc_lo = 0.0f, acc_hi = 0.0f;
    for (int kt = kt_begin; kt < kt_end; kt += U) {
      uint4 nv[U];
      uint32_t ns[U / 2];
      if (kt + U < kt_end) {
        LoadChunk<U, kSumX>(a, tp, sp, g, kt + U, kt_end, nv, ns);
      } else if (next_rt < a.n_tiles) {
        LoadChunk<U, kSumX>(a, TilePtr(a, next_rt, lane), ScalePtr(a, next_rt, gr),
                            GroupTiles(a, next_rt), kt_begin, kt_end, nv, ns);
      }
      ComputeChunk<U, kSumX>(v, s, xs, xsum, kt, min(U, kt_end - kt), lane, acc_lo, acc_hi);
#pragma unroll
      for (int u = 0; u < U; ++u) v[u] = nv[u];
#pragma unroll
      for (int u = 0; u < U / 2; ++u) s[u] = ns[u];
    }
    if ((lane & 3) == 0) {
      red[warp * 16 + gr] = acc_lo;
      red[warp * 16 + gr + 8] = acc_hi;
    }
    __syncthreads();
    if (threadIdx.x < 16) {
      float sum = 0.0f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) sum += red[w * 16 + threadIdx.x];
      a.y[rt * 16 + threadIdx.x] = __float2bfloat16(sum);
    }
    __syncthreads();
    rt = next_rt;
  }
}

// ---- host ----

struct Shape {
  const char* name;
  int n, k;
};

uint32_t Hash(uint64_t i) {
  i ^= i >> 33;
  i *= 0xff51afd7ed558ccdULL;
  i ^= i >> 33;
  i *= 0xc4ceb9fe1a85ec53ULL;
  i ^= i >> 33;
  return static_cast<uint32_t>(i);
}

float HalfToFloat(uint16_t h) {
  __half v;
  std::memcpy(&v, &h, 2);
  return __half2float(v);
}

struct Variant {
  const char* name;
  void (*kernel)(Args);
  bool persistent;
  int u;
};

template <int U, bool kSumX, bool kP, int kMinBlocks = 2>
Variant MakeVariant(const char* name) {
  return {name, RowTileGemv<U, kSumX, kP, kMinBlocks>, kP, U};
}

int main(int argc, char** argv) {
  const std::string filter = argc > 1 ? argv[1] : "";
  const Shape shapes[] = {
      {"llama3-70b_qkv", 10240, 8192},     {"llama3-70b_o", 8192, 8192},
      {"llama3-70b_gate_up", 57344, 8192}, {"llama3-70b_down", 8192, 28672},
      {"llama3-8b_qkv", 6144, 4096},       {"llama3-8b_o", 4096, 4096},
      {"llama3-8b_gate_up", 28672, 4096},  {"llama3-8b_down", 4096, 14336},
  };
  const Variant variants[] = {
      MakeVariant<8, false, false>("sub_u8_tiles"),
      MakeVariant<8, false, true>("sub_u8_persist"),
      MakeVariant<8, true, false>("sumx_u8_tiles"),
      MakeVariant<8, true, true>("sumx_u8_persist"),
      MakeVariant<4, false, false>("sub_u4_tiles"),
      MakeVariant<4, true, false>("sumx_u4_tiles"),
      MakeVariant<8, true, false, 3>("sumx_u8_tiles_b3"),
      MakeVariant<4, true, false, 4>("sumx_u4_tiles_b4"),
  };
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  printf("device: %s, %d SMs\n", prop.name, prop.multiProcessorCount);
  cudaStream_t stream;
  CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  // The copy rate on this card (read + write bytes of a 1 GiB D2D copy).
  {
    const size_t bytes = size_t{1} << 30;
    void *src, *dst;
    CK(cudaMalloc(&src, bytes));
    CK(cudaMalloc(&dst, bytes));
    CK(cudaMemsetAsync(src, 1, bytes, stream));
    const double us = CaptureReplayUs(stream, 10, [&] {
      CK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream));
    });
    printf("copy rate: %.0f GB/s (read + write of a 1 GiB copy)\n", 2.0 * bytes / us / 1e3);
    CK(cudaFree(src));
    CK(cudaFree(dst));
  }
  printf("%-20s %-16s %6s %9s %9s %8s %s\n", "shape", "variant", "grid", "us", "GB/s", "err",
         "check");
  for (const Shape& sh : shapes) {
    if (!filter.empty() && std::string(sh.name).find(filter) == std::string::npos) continue;
    const int n_tiles = sh.n / 16, k_tiles = sh.k / 64, num_groups = sh.k / kGroup;
    if (k_tiles % (2 * kWarps) != 0) {
      printf("%s: k tiles %d not a multiple of %d\n", sh.name, k_tiles, 2 * kWarps);
      continue;
    }
    const size_t code_bytes = size_t{1} * sh.n * sh.k / 2;
    const size_t scale_bytes = size_t{1} * sh.n * num_groups * 2;
    const int copies = static_cast<int>(
        std::max<size_t>(3, (size_t{1536} << 20) / (code_bytes + scale_bytes) + 1));
    // Host data of copy 0 (the others repeat it: the timing only needs bytes).
    std::vector<uint8_t> codes(code_bytes);
    std::vector<uint16_t> scales(scale_bytes / 2);
    std::vector<__nv_bfloat16> x(sh.k);
    for (size_t i = 0; i < code_bytes; ++i) codes[i] = static_cast<uint8_t>(Hash(i));
    for (size_t i = 0; i < scales.size(); ++i) {
      const __half h = __float2half(0.001f + 0.009f * (Hash(i + (1ull << 40)) % 1000) / 1000.0f);
      std::memcpy(&scales[i], &h, 2);
    }
    for (int i = 0; i < sh.k; ++i) {
      x[i] = __float2bfloat16((static_cast<int>(Hash(i + (1ull << 41)) % 2001) - 1000) / 1000.0f);
    }
    std::vector<uint4*> d_codes(copies);
    std::vector<uint32_t*> d_scales(copies);
    for (int c = 0; c < copies; ++c) {
      CK(cudaMalloc(&d_codes[c], code_bytes));
      CK(cudaMalloc(&d_scales[c], scale_bytes));
      CK(cudaMemcpy(d_codes[c], codes.data(), code_bytes, cudaMemcpyHostToDevice));
      CK(cudaMemcpy(d_scales[c], scales.data(), scale_bytes, cudaMemcpyHostToDevice));
    }
    __nv_bfloat16 *d_x, *d_y;
    CK(cudaMalloc(&d_x, sh.k * 2));
    CK(cudaMalloc(&d_y, sh.n * 2));
    CK(cudaMemcpy(d_x, x.data(), sh.k * 2, cudaMemcpyHostToDevice));
    // The reference of 64 sampled rows (the last row tile's among them).
    std::vector<int> rows;
    for (int i = 0; i < 63; ++i) rows.push_back(static_cast<int>(Hash(i + (1ull << 42)) % sh.n));
    rows.push_back(sh.n - 1);
    std::vector<double> ref(rows.size()), mag(rows.size());
    for (size_t ri = 0; ri < rows.size(); ++ri) {
      const int r = rows[ri];
      double sum = 0.0, abs_sum = 0.0;
      for (int c = 0; c < sh.k; ++c) {
        const auto pos = Int4CodePosition(r, c, sh.k, sh.n);
        const int q = (codes[pos.byte] >> pos.shift) & 0xF;
        const auto sp = Int4ScalePosition(r, c / kGroup, num_groups, sh.n);
        const float scale = HalfToFloat(scales[2 * sp.word + sp.half]);
        const double w = static_cast<double>(scale) * (q - 8);
        sum += w * __bfloat162float(x[c]);
        abs_sum += std::fabs(w * __bfloat162float(x[c]));
      }
      ref[ri] = sum;
      mag[ri] = abs_sum;
    }
    const size_t smem = size_t{1} * sh.k * 2 + k_tiles * 4 + kWarps * 16 * 4;
    for (const Variant& var : variants) {
      CK(cudaFuncSetAttribute(var.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              static_cast<int>(smem)));
      int per_sm = 0;
      CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, var.kernel, kThreads, smem));
      const int grid =
          var.persistent ? std::min(n_tiles, per_sm * prop.multiProcessorCount) : n_tiles;
      auto launch = [&](int c) {
        Args a{d_codes[c], d_scales[c], d_x, d_y, n_tiles, k_tiles, num_groups, k_tiles / kWarps};
        cudaLaunchAttribute attr[1];
        attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr[0].val.programmaticStreamSerializationAllowed = 1;
        cudaLaunchConfig_t config = {};
        config.gridDim = dim3(grid);
        config.blockDim = dim3(kThreads);
        config.dynamicSmemBytes = smem;
        config.stream = stream;
        config.attrs = attr;
        config.numAttrs = 1;
        CK(cudaLaunchKernelEx(&config, var.kernel, a));
      };
      CK(cudaMemsetAsync(d_y, 0, sh.n * 2, stream));
      launch(0);
      CK(cudaStreamSynchronize(stream));
      std::vector<__nv_bfloat16> y(sh.n);
      CK(cudaMemcpy(y.data(), d_y, sh.n * 2, cudaMemcpyDeviceToHost));
      double worst = 0.0;
      for (size_t ri = 0; ri < rows.size(); ++ri) {
        const double err = std::fabs(__bfloat162float(y[rows[ri]]) - ref[ri]) / (mag[ri] + 1e-30);
        worst = std::max(worst, err);
      }
      // bf16 output: a relative error of 2^-8 of |y| <= sum |w x|, plus fp32 sums.
      const bool ok = worst < 5e-3;
      constexpr int kLaunches = 30;
      const double us = CaptureReplayUs(stream, 5,
                                        [&] {
                                          for (int l = 0; l < kLaunches; ++l) launch(l % copies);
                                        }) /
                        kLaunches;
      printf("%-20s %-16s %6d %9.2f %9.0f %8.1e %s (%d blocks an SM)\n", sh.name, var.name, grid,
             us, (code_bytes + scale_bytes) / us / 1e3, worst, ok ? "ok" : "FAILED", per_sm);
    }
    for (int c = 0; c < copies; ++c) {
      CK(cudaFree(d_codes[c]));
      CK(cudaFree(d_scales[c]));
    }
    CK(cudaFree(d_x));
    CK(cudaFree(d_y));
  }
  return 0;
}
