// Experiment (bench/experiments/README.md): CUTLASS sm90 GEMMs (swap AB:
// weights are A) against cuBLAS's default for the skinny decode products of
// llama3-8b at m = 128 and 32. Not part of the build.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/util/packed_stride.hpp"
#include "experiment_common.cuh"

using namespace cute;

using Bf = cutlass::bfloat16_t;

template <class Tile, class Cluster, class KSched, class ESched, class TSched>
struct Cfg {
  using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Tile, Cluster,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, Bf,
      cutlass::layout::ColumnMajor, 8, Bf, cutlass::layout::ColumnMajor, 8, ESched>::CollectiveOp;
  using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Bf, cutlass::layout::RowMajor, 8, Bf,
      cutlass::layout::ColumnMajor, 8, float, Tile, Cluster,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename CollectiveEpilogue::SharedStorage))>,
      KSched>::CollectiveOp;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, CollectiveMainloop,
                                                      CollectiveEpilogue, TSched>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
};

struct Problem {
  const char* name;
  int n, k;
  float beta;
};

struct Bufs {
  std::vector<void*> w;
  void* x;
  void* y;
  void* yref;
};

constexpr int kWeights = 24;
constexpr int kReps = 5;

float MaxDiff(void* a, void* b, size_t n) {
  std::vector<uint16_t> ha(n), hb(n);
  CK(cudaMemcpy(ha.data(), a, n * 2, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(hb.data(), b, n * 2, cudaMemcpyDeviceToHost));
  float m = 0;
  for (size_t i = 0; i < n; ++i) {
    uint32_t ua = uint32_t(ha[i]) << 16, ub = uint32_t(hb[i]) << 16;
    float fa, fb;
    memcpy(&fa, &ua, 4);
    memcpy(&fb, &ub, 4);
    m = std::max(m, std::fabs(fa - fb));
  }
  return m;
}

using Mode =
    cutlass::gemm::kernel::detail::PersistentTileSchedulerSm90StreamKParams::DecompositionMode;

template <class G, bool kStreamK>
void RunCfg(const char* cname, const Problem& p, int m, Bufs& b, cudaStream_t s, int splits,
            Mode mode, bool pdl) {
  using Gemm = typename G::Gemm;
  using SA = typename Gemm::GemmKernel::StrideA;
  using SB = typename Gemm::GemmKernel::StrideB;
  using SC = typename Gemm::GemmKernel::StrideC;
  using SD = typename Gemm::GemmKernel::StrideD;
  cutlass::KernelHardwareInfo hw;
  hw.device_id = 0;
  hw.sm_count = 132;
  auto make_args = [&](void* w, float beta) {
    typename Gemm::Arguments args{
        cutlass::gemm::GemmUniversalMode::kGemm,
        {p.n, m, p.k, 1},
        {static_cast<Bf*>(w), cutlass::make_cute_packed_stride(SA{}, {p.n, p.k, 1}),
         static_cast<Bf*>(b.x), cutlass::make_cute_packed_stride(SB{}, {m, p.k, 1})},
        {{1.0f, beta},
         static_cast<Bf*>(b.y),
         cutlass::make_cute_packed_stride(SC{}, {p.n, m, 1}),
         static_cast<Bf*>(b.y),
         cutlass::make_cute_packed_stride(SD{}, {p.n, m, 1})},
        hw};
    if constexpr (kStreamK) {
      args.scheduler.splits = splits;
      args.scheduler.decomposition_mode = mode;
    }
    return args;
  };
  // Correctness with beta 0 against cuBLAS (b.yref).
  {
    Gemm g;
    auto args = make_args(b.w[0], 0.0f);
    if (g.can_implement(args) != cutlass::Status::kSuccess) {
      printf("%-28s %-8s m=%3d splits=%d mode=%d: cannot implement\n", cname, p.name, m, splits,
             int(mode));
      return;
    }
    size_t ws = Gemm::get_workspace_size(args);
    void* wsp = nullptr;
    if (ws) CK(cudaMalloc(&wsp, ws));
    if (g.initialize(args, wsp, s) != cutlass::Status::kSuccess ||
        g.run(s, nullptr, pdl) != cutlass::Status::kSuccess) {
      printf("%s: init/run failed\n", cname);
      return;
    }
    CK(cudaStreamSynchronize(s));
    float d = MaxDiff(b.y, b.yref, size_t(m) * p.n);
    if (wsp) CK(cudaFree(wsp));
    if (d > 0.05f) {
      printf("%-28s %-8s m=%3d: WRONG max diff %g\n", cname, p.name, m, d);
      return;
    }
  }
  std::vector<Gemm> gs(kWeights);
  std::vector<void*> wss(kWeights, nullptr);
  size_t ws_total = 0;
  for (int i = 0; i < kWeights; ++i) {
    auto args = make_args(b.w[i], p.beta);
    size_t ws = Gemm::get_workspace_size(args);
    if (ws) CK(cudaMalloc(&wss[i], ws));
  }
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < kWeights; ++i) {
    auto args = make_args(b.w[i], p.beta);
    size_t ws = Gemm::get_workspace_size(args);
    ws_total = ws;
    gs[i].initialize(args, wss[i], s);
    gs[i].run(s, nullptr, pdl);
  }
  cudaGraph_t graph;
  CK(cudaStreamEndCapture(s, &graph));
  cudaGraphExec_t exec;
  CK(cudaGraphInstantiate(&exec, graph, 0));
  double us = ReplayUs(exec, s, kReps) / kWeights;
  double gbs = 2.0 * p.n * p.k / us / 1e3;
  printf("%-28s %-8s m=%3d splits=%d mode=%d pdl=%d: %7.2f us  %6.0f GB/s  ws %zu\n", cname, p.name,
         m, splits, int(mode), int(pdl), us, gbs, ws_total);
  CK(cudaGraphExecDestroy(exec));
  CK(cudaGraphDestroy(graph));
  CK(cudaDeviceSynchronize());
  for (void* w : wss)
    if (w) CK(cudaFree(w));
}

using Coop = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
using CoopE = cutlass::epilogue::TmaWarpSpecializedCooperative;
using Ping = cutlass::gemm::KernelTmaWarpSpecializedPingpong;
using PingE = cutlass::epilogue::TmaWarpSpecialized;
using SK = cutlass::gemm::StreamKScheduler;
using PS = cutlass::gemm::PersistentScheduler;

using C1 = Cfg<Shape<_128, _128, _64>, Shape<_1, _1, _1>, Coop, CoopE, SK>;
using C2 = Cfg<Shape<_128, _128, _64>, Shape<_2, _1, _1>, Coop, CoopE, SK>;
using C3 = Cfg<Shape<_256, _128, _64>, Shape<_1, _1, _1>, Coop, CoopE, SK>;
using C4 = Cfg<Shape<_64, _128, _64>, Shape<_1, _1, _1>, Ping, PingE, PS>;
using C5 = Cfg<Shape<_128, _32, _128>, Shape<_1, _1, _1>, Coop, CoopE, SK>;
using D1 = Cfg<Shape<_128, _128, _64>, Shape<_1, _1, _1>, Coop, CoopE, PS>;
using D2 = Cfg<Shape<_128, _128, _64>, Shape<_2, _1, _1>, Coop, CoopE, PS>;
using D3 = Cfg<Shape<_64, _128, _128>, Shape<_1, _1, _1>, Ping, PingE, PS>;
using D4 = Cfg<Shape<_64, _32, _128>, Shape<_1, _1, _1>, Ping, PingE, PS>;

int main() {
  const auto [s, h] = BlasOnStream();
  const Problem probs[] = {{"qkv", 6144, 4096, 0.0f},
                           {"o", 4096, 4096, 1.0f},
                           {"gate_up", 28672, 4096, 0.0f},
                           {"down", 4096, 14336, 1.0f}};
  std::mt19937 rng(1);
  auto fill = [&](void* p, size_t n) {
    std::vector<uint16_t> h(n);
    std::uniform_real_distribution<float> u(-0.05f, 0.05f);
    for (size_t i = 0; i < n; ++i) {
      float f = u(rng);
      uint32_t bits;
      memcpy(&bits, &f, 4);
      h[i] = bits >> 16;
    }
    CK(cudaMemcpy(p, h.data(), n * 2, cudaMemcpyHostToDevice));
  };
  for (int m : {128, 32}) {
    for (const Problem& p : probs) {
      Bufs b;
      size_t wn = size_t(p.n) * p.k;
      void* w0;
      CK(cudaMalloc(&w0, wn * 2));
      fill(w0, wn);
      b.w.push_back(w0);
      for (int i = 1; i < kWeights; ++i) {
        void* wi;
        CK(cudaMalloc(&wi, wn * 2));
        CK(cudaMemcpy(wi, w0, wn * 2, cudaMemcpyDeviceToDevice));
        b.w.push_back(wi);
      }
      CK(cudaMalloc(&b.x, size_t(m) * p.k * 2));
      fill(b.x, size_t(m) * p.k);
      CK(cudaMalloc(&b.y, size_t(m) * p.n * 2));
      CK(cudaMalloc(&b.yref, size_t(m) * p.n * 2));
      // cuBLAS reference + timing: y^T[n,m] = W^T^T x^T (as BlasGemm).
      const float one = 1.0f, zero = 0.0f;
      auto blas = [&](void* w, void* y, const float* beta) {
        return cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, p.n, m, p.k, &one, w, CUDA_R_16BF, p.k,
                            b.x, CUDA_R_16BF, p.k, beta, y, CUDA_R_16BF, p.n, CUBLAS_COMPUTE_32F,
                            CUBLAS_GEMM_DEFAULT);
      };
      blas(b.w[0], b.yref, &zero);
      CK(cudaStreamSynchronize(s));
      {
        cudaGraph_t graph;
        CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
        for (int i = 0; i < kWeights; ++i) blas(b.w[i], b.y, p.beta != 0 ? &one : &zero);
        CK(cudaStreamEndCapture(s, &graph));
        cudaGraphExec_t exec;
        CK(cudaGraphInstantiate(&exec, graph, 0));
        double us = ReplayUs(exec, s, kReps) / kWeights;
        printf("%-28s %-8s m=%3d: %7.2f us  %6.0f GB/s\n", "cublas-default", p.name, m, us,
               2.0 * p.n * p.k / us / 1e3);
        cudaGraphExecDestroy(exec);
        cudaGraphDestroy(graph);
      }
#ifndef CUTLASS_ENABLE_GDC_FOR_SM90
      {
        const bool pdl = false;
        RunCfg<C1, true>("coop128x128x64", p, m, b, s, 1, Mode::Heuristic, pdl);
        RunCfg<C1, true>("coop128x128x64", p, m, b, s, 1, Mode::StreamK, pdl);
        for (int sp : {2, 3, 4})
          RunCfg<C1, true>("coop128x128x64", p, m, b, s, sp, Mode::SplitK, pdl);
        RunCfg<C2, true>("coop128x128x64 c2", p, m, b, s, 1, Mode::Heuristic, pdl);
        RunCfg<C3, true>("coop256x128x64", p, m, b, s, 1, Mode::Heuristic, pdl);
        RunCfg<C3, true>("coop256x128x64", p, m, b, s, 1, Mode::StreamK, pdl);
        if (m == 32) {
          RunCfg<C5, true>("coop128x32x128", p, m, b, s, 1, Mode::Heuristic, pdl);
          for (int sp : {2, 4})
            RunCfg<C5, true>("coop128x32x128", p, m, b, s, sp, Mode::SplitK, pdl);
        }
      }
#else
      for (bool pdl : {false, true}) {
        RunCfg<D1, false>("coop128x128x64 dp", p, m, b, s, 1, Mode::Heuristic, pdl);
        RunCfg<D2, false>("coop128x128x64 c2 dp", p, m, b, s, 1, Mode::Heuristic, pdl);
        RunCfg<C4, false>("ping64x128x64", p, m, b, s, 1, Mode::Heuristic, pdl);
        RunCfg<D3, false>("ping64x128x128", p, m, b, s, 1, Mode::Heuristic, pdl);
        if (m == 32) RunCfg<D4, false>("ping64x32x128", p, m, b, s, 1, Mode::Heuristic, pdl);
      }
#endif
      for (void* w : b.w) CK(cudaFree(w));
      CK(cudaFree(b.x));
      CK(cudaFree(b.y));
      CK(cudaFree(b.yref));
    }
  }
  printf("done\n");
  return 0;
}
