// Experiment (bench/experiments/README.md): do cuBLASLt's sm_90 matmul kernels
// wait for their predecessor with griddepcontrol.wait, so that the edge into
// them in a captured graph can be made programmatic (PDL) safely, and what
// does that save in a decode layer's chain of kernels? Not part of the build.
//
// Probe: a writer kernel lets its dependents launch at once, spins for
// kDelayUs, then writes the activations x; the matmul reading x follows it
// over a programmatic edge. A kernel that does not wait reads x before the
// writer wrote it (x starts as zeros), so its product differs from the one
// after an ordinary edge. Each of the heuristic's algorithms is probed.
//
// Chain: 32 layers of [small kernel -> qkv -> small -> o -> small -> gate_up
// -> small -> down] at m = 128 (and 32), the small kernels launched with PDL as
// the engine's are; timed with ordinary and with programmatic edges into the
// matmul nodes.
#include <cublasLt.h>
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "experiment_common.cuh"

constexpr int kDelayUs = 60;

__device__ __forceinline__ unsigned long long GlobalTimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void Writer(__nv_bfloat16* x, __nv_bfloat16* src, size_t n) {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;");
  unsigned long long t0 = GlobalTimer();
  while (GlobalTimer() - t0 < kDelayUs * 1000ull) {
  }
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    x[i] = src[i];
}

// A stand-in for the engine's small kernels (norm, RoPE, SiLU·mul): waits,
// lets the next kernel launch, then copies n elements.
__global__ void Small(const __nv_bfloat16* in, __nv_bfloat16* out, size_t n) {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;");
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    out[i] = in[i];
}

template <typename K, typename... A>
void LaunchPdl(K kernel, int grid, int block, cudaStream_t s, A... args) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t c = {};
  c.gridDim = grid;
  c.blockDim = block;
  c.stream = s;
  c.attrs = attr;
  c.numAttrs = 1;
  CK(cudaLaunchKernelEx(&c, kernel, args...));
}

std::string NodeName(cudaGraphNode_t node) {
  CUDA_KERNEL_NODE_PARAMS p;
  if (cuGraphKernelNodeGetParams(reinterpret_cast<CUgraphNode>(node), &p) != CUDA_SUCCESS)
    return "?";
  const char* name = nullptr;
  if (p.func != nullptr) {
    cuFuncGetName(&name, p.func);
  } else if (p.kern != nullptr) {
    cuKernelGetName(&name, p.kern);
  }
  return name ? name : "?";
}

// Makes every edge from one of this program's kernels (Small, Writer) into a
// cuBLAS kernel programmatic; edges between cuBLAS's own kernels stay. Returns the
// number converted; names the converted kernels in *names.
int ConvertEdges(cudaGraph_t g, std::vector<std::string>* names) {
  size_t n = 0;
  CK(cudaGraphGetEdges(g, nullptr, nullptr, nullptr, &n));
  std::vector<cudaGraphNode_t> from(n), to(n);
  std::vector<cudaGraphEdgeData> data(n);
  CK(cudaGraphGetEdges(g, from.data(), to.data(), data.data(), &n));
  int converted = 0;
  for (size_t i = 0; i < n; ++i) {
    cudaGraphNodeType tf, tt;
    CK(cudaGraphNodeGetType(from[i], &tf));
    CK(cudaGraphNodeGetType(to[i], &tt));
    if (tf != cudaGraphNodeTypeKernel || tt != cudaGraphNodeTypeKernel) continue;
    auto ours = [](const std::string& n) {
      return n.rfind("_Z5Small", 0) == 0 || n.rfind("_Z6Writer", 0) == 0;
    };
    std::string name = NodeName(to[i]);
    if (ours(name) || !ours(NodeName(from[i]))) continue;
    if (data[i].type == cudaGraphDependencyTypeProgrammatic) continue;
    CK(cudaGraphRemoveDependencies(g, &from[i], &to[i], &data[i], 1));
    cudaGraphEdgeData e = {};
    e.from_port = cudaGraphKernelNodePortProgrammatic;
    e.type = cudaGraphDependencyTypeProgrammatic;
    CK(cudaGraphAddDependencies(g, &from[i], &to[i], &e, 1));
    ++converted;
    if (names) names->push_back(name);
  }
  return converted;
}

struct Matmul {
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t a, b, d;
  int n, m, k;
};

Matmul MakeMatmul(int n, int m, int k) {
  Matmul mm{};
  mm.n = n;
  mm.m = m;
  mm.k = k;
  CK(cublasLtMatmulDescCreate(&mm.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t t = CUBLAS_OP_T, nn = CUBLAS_OP_N;
  CK(cublasLtMatmulDescSetAttribute(mm.desc, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t)));
  CK(cublasLtMatmulDescSetAttribute(mm.desc, CUBLASLT_MATMUL_DESC_TRANSB, &nn, sizeof(nn)));
  CK(cublasLtMatrixLayoutCreate(&mm.a, CUDA_R_16BF, k, n, k));
  CK(cublasLtMatrixLayoutCreate(&mm.b, CUDA_R_16BF, k, m, k));
  CK(cublasLtMatrixLayoutCreate(&mm.d, CUDA_R_16BF, n, m, n));
  return mm;
}

std::vector<cublasLtMatmulHeuristicResult_t> Algos(cublasLtHandle_t lt, const Matmul& mm, size_t ws,
                                                   int count) {
  cublasLtMatmulPreference_t pref;
  CK(cublasLtMatmulPreferenceCreate(&pref));
  CK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws,
                                          sizeof(ws)));
  std::vector<cublasLtMatmulHeuristicResult_t> r(count);
  int got = 0;
  CK(cublasLtMatmulAlgoGetHeuristic(lt, mm.desc, mm.a, mm.b, mm.d, mm.d, pref, count, r.data(),
                                    &got));
  r.resize(got);
  cublasLtMatmulPreferenceDestroy(pref);
  return r;
}

void Run(cublasLtHandle_t lt, const Matmul& mm, const cublasLtMatmulAlgo_t* algo, const void* w,
         const void* x, void* y, void* ws, size_t ws_size, cudaStream_t s) {
  const float one = 1.0f, zero = 0.0f;
  CK(cublasLtMatmul(lt, mm.desc, &one, w, mm.a, x, mm.b, &zero, y, mm.d, y, mm.d, algo, ws, ws_size,
                    s));
}

void Fill(void* p, size_t n, std::mt19937& rng) {
  std::vector<__nv_bfloat16> h(n);
  std::uniform_real_distribution<float> u(-0.05f, 0.05f);
  for (auto& v : h) v = __float2bfloat16(u(rng));
  CK(cudaMemcpy(p, h.data(), n * 2, cudaMemcpyHostToDevice));
}

float MaxDiff(const void* a, const void* b, size_t n) {
  std::vector<__nv_bfloat16> ha(n), hb(n);
  CK(cudaMemcpy(ha.data(), a, n * 2, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(hb.data(), b, n * 2, cudaMemcpyDeviceToHost));
  float d = 0;
  for (size_t i = 0; i < n; ++i)
    d = std::fmax(d, std::fabs(__bfloat162float(ha[i]) - __bfloat162float(hb[i])));
  return d;
}

int main() {
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cublasLtHandle_t lt;
  CK(cublasLtCreate(&lt));
  const size_t ws_size = 32 << 20;
  void* ws;
  CK(cudaMalloc(&ws, ws_size));
  std::mt19937 rng(7);
  struct Shape {
    const char* name;
    int n, k;
  };
  const Shape shapes[] = {
      {"qkv", 6144, 4096}, {"o", 4096, 4096}, {"gate_up", 28672, 4096}, {"down", 4096, 14336}};

  // Probe.
  int unsafe = 0, probed = 0;
  for (int m : {128, 32, 8}) {
    for (const Shape& sh : shapes) {
      Matmul mm = MakeMatmul(sh.n, m, sh.k);
      void *w, *x, *src, *y, *yref;
      CK(cudaMalloc(&w, size_t(sh.n) * sh.k * 2));
      CK(cudaMalloc(&x, size_t(m) * sh.k * 2));
      CK(cudaMalloc(&src, size_t(m) * sh.k * 2));
      CK(cudaMalloc(&y, size_t(m) * sh.n * 2));
      CK(cudaMalloc(&yref, size_t(m) * sh.n * 2));
      Fill(w, size_t(sh.n) * sh.k, rng);
      Fill(src, size_t(m) * sh.k, rng);
      for (const auto& h : Algos(lt, mm, ws_size, 8)) {
        double t[2];
        float diff = 0;
        std::vector<std::string> names;
        int kernels = 0;
        for (int prog = 0; prog < 2; ++prog) {
          CK(cudaMemset(x, 0, size_t(m) * sh.k * 2));
          CK(cudaMemset(prog ? y : yref, 0, size_t(m) * sh.n * 2));
          cudaGraph_t g;
          CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
          Writer<<<132, 256, 0, s>>>(static_cast<__nv_bfloat16*>(x),
                                     static_cast<__nv_bfloat16*>(src), size_t(m) * sh.k);
          Run(lt, mm, &h.algo, w, x, prog ? y : yref, ws, ws_size, s);
          CK(cudaStreamEndCapture(s, &g));
          if (prog) ConvertEdges(g, &names);
          size_t nodes = 0;
          CK(cudaGraphGetNodes(g, nullptr, &nodes));
          if (prog) kernels = int(nodes) - 1;
          cudaGraphExec_t e;
          CK(cudaGraphInstantiate(&e, g, 0));
          CK(cudaGraphLaunch(e, s));
          CK(cudaStreamSynchronize(s));
          if (prog) diff = MaxDiff(y, yref, size_t(m) * sh.n);
          // Timing: x is already written, so a wrong order cannot show here.
          t[prog] = ReplayUs(e, s, 20);
          CK(cudaGraphExecDestroy(e));
          CK(cudaGraphDestroy(g));
        }
        ++probed;
        bool ok = diff == 0.0f;
        if (!ok) ++unsafe;
        printf(
            "probe %-8s m=%3d %-60s nodes=%d waits=%s maxdiff=%g  writer+gemm %.1f us "
            "ordinary, %.1f programmatic\n",
            sh.name, m, names.empty() ? "(no edge converted)" : names[0].substr(0, 60).c_str(),
            kernels, ok ? "yes" : "NO", diff, t[0], t[1]);
      }
      cudaFree(w);
      cudaFree(x);
      cudaFree(src);
      cudaFree(y);
      cudaFree(yref);
    }
  }
  printf("probed %d algorithms, %d did not wait\n", probed, unsafe);

  // Chain.
  for (int m : {128, 32}) {
    const int layers = 32;
    std::vector<Matmul> mms;
    for (const Shape& sh : shapes) mms.push_back(MakeMatmul(sh.n, m, sh.k));
    std::vector<void*> ws_l;  // weights per layer and shape
    for (int l = 0; l < layers; ++l)
      for (const Shape& sh : shapes) {
        void* w;
        CK(cudaMalloc(&w, size_t(sh.n) * sh.k * 2));
        CK(cudaMemset(w, 0x3c, size_t(sh.n) * sh.k * 2));
        ws_l.push_back(w);
      }
    void *act_in, *act, *out;
    const size_t big = size_t(m) * 28672;
    CK(cudaMalloc(&act_in, big * 2));
    CK(cudaMalloc(&act, big * 2));
    CK(cudaMalloc(&out, big * 2));
    Fill(act_in, big, rng);
    std::vector<cublasLtMatmulAlgo_t> best;
    for (auto& mm : mms) best.push_back(Algos(lt, mm, ws_size, 1)[0].algo);
    auto capture = [&](bool with_gemm, bool with_small) {
      cudaGraph_t g;
      CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
      for (int l = 0; l < layers; ++l)
        for (int i = 0; i < 4; ++i) {
          const size_t n_small = size_t(m) * shapes[i].k;
          if (with_small)
            LaunchPdl(Small, 132, 256, s, static_cast<const __nv_bfloat16*>(act_in),
                      static_cast<__nv_bfloat16*>(act), n_small);
          if (with_gemm) Run(lt, mms[i], &best[i], ws_l[l * 4 + i], act, out, ws, ws_size, s);
        }
      CK(cudaStreamEndCapture(s, &g));
      return g;
    };
    for (int rep = 0; rep < 2; ++rep) {
      double t_plain, t_prog, t_gemm, t_small;
      {
        cudaGraph_t g = capture(true, true);
        cudaGraphExec_t e;
        CK(cudaGraphInstantiate(&e, g, 0));
        t_plain = ReplayUs(e, s, 10);
        cudaGraphExecDestroy(e);
        int c = ConvertEdges(g, nullptr);
        CK(cudaGraphInstantiate(&e, g, 0));
        t_prog = ReplayUs(e, s, 10);
        printf("chain m=%3d: %d edges made programmatic\n", m, c);
        cudaGraphExecDestroy(e);
        cudaGraphDestroy(g);
      }
      {
        cudaGraph_t g = capture(true, false);
        cudaGraphExec_t e;
        CK(cudaGraphInstantiate(&e, g, 0));
        t_gemm = ReplayUs(e, s, 10);
        cudaGraphExecDestroy(e);
        cudaGraphDestroy(g);
        g = capture(false, true);
        CK(cudaGraphInstantiate(&e, g, 0));
        t_small = ReplayUs(e, s, 10);
        cudaGraphExecDestroy(e);
        cudaGraphDestroy(g);
      }
      printf(
          "chain m=%3d rep %d: ordinary %.1f us, programmatic %.1f us (%.2f us a layer "
          "saved); matmuls alone %.1f us, small kernels alone %.1f us\n",
          m, rep, t_plain, t_prog, (t_plain - t_prog) / layers, t_gemm, t_small);
    }
    for (void* w : ws_l) cudaFree(w);
    cudaFree(act_in);
    cudaFree(act);
    cudaFree(out);
  }
  printf("done\n");
  return 0;
}
