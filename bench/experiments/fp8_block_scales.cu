// Experiment (bench/experiments/README.md): which FP8 scale modes does
// cuBLASLt take on this card for Fp8Gemm's product (E4M3 weights W [n, k]
// as A, transposed; E4M3 activations X [m, k] as B; BF16 or fp32 D [m, n]),
// with what layout of the scale tensors, and how fast against the plain
// product into fp32 sums that Fp8Gemm's epilogue then scales?
//
// Part 1 (modes): for each pair of scale modes (A, B) and D type, the
// heuristic's answer (algorithms found, or the status) on llama3-8b's qkv at
// m = 128.
// Part 2 (layout, residual): on a small shape with a per-(row, 128-column
// block) scale that differs from block to block, the product against a host
// reference for the two layouts a VEC128 scale tensor could have:
// [rows][k / 128] (blocks of a row contiguous) or [k / 128][rows] (rows of a
// block contiguous), and with beta = 1 adding a BF16 residual held in D. The
// relative error says which layout cuBLASLt reads and whether beta works.
// Part 3 (speed): the forms against the plain product on the 8B and 70B
// products at m = 8, 32, 128, 2048: the best of up to 8 of the heuristic's
// algorithms, each the mean of graph replays over 16 copies of the weight
// (so that it comes from HBM).
#include <cublasLt.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "experiment_common.cuh"

namespace {

struct Mode {
  const char* name;
  int32_t a;  // cublasLtMatmulMatrixScale_t of the weights (A)
  int32_t b;  // of the activations (B)
};

constexpr Mode kModes[] = {
    {"scalar x scalar", CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F,
     CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F},
    {"outer_vec x outer_vec", CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F,
     CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F},
    {"vec128 x vec128", CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F,
     CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F},
    {"blk128x128 x vec128", CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F,
     CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F},
    {"vec128 x blk128x128", CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F,
     CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F},
    {"outer_vec x vec128", CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F,
     CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F},
    {"vec128 x outer_vec", CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F,
     CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F},
};

struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  cublasLtMatmulAlgo_t algos[8]{};
  int found = 0;
  cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
};

// D [m, n] (row-major; cuBLASLt's n x m column-major) = X W^T with the given
// scale modes and scale pointers (null for the plain product).
Plan MakePlan(cublasLtHandle_t lt, int m, int n, int k, const Mode& mode, cudaDataType_t d_type,
              size_t workspace) {
  Plan p;
  CK(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t t = CUBLAS_OP_T, nt = CUBLAS_OP_N;
  CK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t)));
  CK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &nt, sizeof(nt)));
  CK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode.a,
                                    sizeof(mode.a)));
  CK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode.b,
                                    sizeof(mode.b)));
  // Scale pointers must be set for the heuristic to see scaled operands;
  // any device address will do for the query.
  static float* dummy = [] {
    float* f = nullptr;
    CK(cudaMalloc(&f, 1 << 24));
    return f;
  }();
  CK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &dummy,
                                    sizeof(dummy)));
  CK(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &dummy,
                                    sizeof(dummy)));
  CK(cublasLtMatrixLayoutCreate(&p.a, CUDA_R_8F_E4M3, k, n, k));
  CK(cublasLtMatrixLayoutCreate(&p.b, CUDA_R_8F_E4M3, k, m, k));
  CK(cublasLtMatrixLayoutCreate(&p.d, d_type, n, m, n));
  cublasLtMatmulPreference_t pref;
  CK(cublasLtMatmulPreferenceCreate(&pref));
  CK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                          &workspace, sizeof(workspace)));
  cublasLtMatmulHeuristicResult_t r[8]{};
  p.status = cublasLtMatmulAlgoGetHeuristic(lt, p.desc, p.a, p.b, p.d, p.d, pref, 8, r, &p.found);
  for (int i = 0; i < p.found; ++i) p.algos[i] = r[i].algo;
  if (p.status == CUBLAS_STATUS_SUCCESS && p.found > 0) p.algo = r[0].algo;
  cublasLtMatmulPreferenceDestroy(pref);
  return p;
}

cublasStatus_t Run(cublasLtHandle_t lt, const Plan& p, const void* w, const void* x, void* d,
                   const float* w_scales, const float* x_scales, void* ws, size_t ws_bytes,
                   cudaStream_t s, float beta = 0.0f, const cublasLtMatmulAlgo_t* algo = nullptr) {
  cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &w_scales,
                                 sizeof(w_scales));
  cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &x_scales,
                                 sizeof(x_scales));
  const float alpha = 1.0f;
  return cublasLtMatmul(lt, p.desc, &alpha, w, p.a, x, p.b, &beta, d, p.d, d, p.d,
                        algo != nullptr ? algo : &p.algo, ws, ws_bytes, s);
}

float Bf16ToFloat(uint16_t h) {
  uint32_t u = uint32_t{h} << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Part 2: the product against a host reference on a small shape, with the
// VEC128 scales of an operand laid out [k / 128][rows] (`rows_major` false)
// or [rows][k / 128], OUTER_VEC scales one a row; beta = 1 adds a BF16
// residual already in D.
void Check(cublasLtHandle_t lt, cudaStream_t s, void* ws, size_t ws_bytes, const Mode& mode,
           bool rows_major, float beta) {
  const int m = 32, n = 256, k = 512, kb = k / 128;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-4.0f, 4.0f), sc(0.25f, 4.0f);
  std::vector<__nv_fp8_e4m3> w(size_t(n) * k), x(size_t(m) * k);
  std::vector<float> wf(w.size()), xf(x.size());
  for (size_t i = 0; i < w.size(); ++i) wf[i] = float(w[i] = __nv_fp8_e4m3(u(rng)));
  for (size_t i = 0; i < x.size(); ++i) xf[i] = float(x[i] = __nv_fp8_e4m3(u(rng)));
  // scale of row r's block b: per block for VEC128, per row for OUTER_VEC.
  const bool w_vec = mode.a == CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
  const bool x_vec = mode.b == CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
  std::vector<float> w_s(size_t(n) * kb), x_s(size_t(m) * kb);
  for (int r = 0; r < n; ++r)
    for (int c = 0; c < kb; ++c)
      w_s[size_t(r) * kb + c] = w_vec || c == 0 ? sc(rng) : w_s[size_t(r) * kb];
  for (int r = 0; r < m; ++r)
    for (int c = 0; c < kb; ++c)
      x_s[size_t(r) * kb + c] = x_vec || c == 0 ? sc(rng) : x_s[size_t(r) * kb];
  std::vector<uint16_t> residual(size_t(m) * n);
  for (uint16_t& v : residual) v = uint16_t(0x4000 + (rng() & 0x3ff));  // 2..4
  std::vector<double> ref(size_t(m) * n);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double acc = 0;
      for (int c = 0; c < k; ++c) {
        acc += double(xf[size_t(i) * k + c]) * x_s[size_t(i) * kb + c / 128] *
               wf[size_t(j) * k + c] * w_s[size_t(j) * kb + c / 128];
      }
      ref[size_t(i) * n + j] = acc + beta * Bf16ToFloat(residual[size_t(i) * n + j]);
    }
  auto arrange = [&](const std::vector<float>& v, int rows, bool vec) {
    std::vector<float> o;
    if (!vec) {
      for (int r = 0; r < rows; ++r) o.push_back(v[size_t(r) * kb]);
      return o;
    }
    o.resize(v.size());
    for (int r = 0; r < rows; ++r)
      for (int b = 0; b < kb; ++b)
        o[rows_major ? size_t(r) * kb + b : size_t(b) * rows + r] = v[size_t(r) * kb + b];
    return o;
  };
  const std::vector<float> wa = arrange(w_s, n, w_vec), xa = arrange(x_s, m, x_vec);
  void *dw, *dx, *dd;
  float *dws, *dxs;
  CK(cudaMalloc(&dw, w.size()));
  CK(cudaMalloc(&dx, x.size()));
  CK(cudaMalloc(&dd, ref.size() * 2));
  CK(cudaMalloc(&dws, wa.size() * 4));
  CK(cudaMalloc(&dxs, xa.size() * 4));
  CK(cudaMemcpy(dw, w.data(), w.size(), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dx, x.data(), x.size(), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dws, wa.data(), wa.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dxs, xa.data(), xa.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dd, residual.data(), residual.size() * 2, cudaMemcpyHostToDevice));
  Plan p = MakePlan(lt, m, n, k, mode, CUDA_R_16BF, ws_bytes);
  if (p.status != CUBLAS_STATUS_SUCCESS || p.found == 0) {
    printf("check %-22s beta %.0f: no algorithm (status %d)\n", mode.name, beta, int(p.status));
    return;
  }
  const cublasStatus_t st = Run(lt, p, dw, dx, dd, dws, dxs, ws, ws_bytes, s, beta);
  CK(cudaStreamSynchronize(s));
  std::vector<uint16_t> got(ref.size());
  CK(cudaMemcpy(got.data(), dd, got.size() * 2, cudaMemcpyDeviceToHost));
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    num += std::pow(Bf16ToFloat(got[i]) - ref[i], 2);
    den += ref[i] * ref[i];
  }
  printf("check %-22s vec128 layout %s, beta %.0f: status %d, relative RMS error %.3g\n", mode.name,
         rows_major ? "[rows][k/128]" : "[k/128][rows]", beta, int(st), std::sqrt(num / den));
  cudaFree(dw), cudaFree(dx), cudaFree(dd), cudaFree(dws), cudaFree(dxs);
}

}  // namespace

int main() {
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cublasLtHandle_t lt;
  CK(cublasLtCreate(&lt));
  const size_t ws_bytes = 64 << 20;
  void* ws;
  CK(cudaMalloc(&ws, ws_bytes));
  int version = 0;
  version = int(cublasLtGetVersion());
  printf("cuBLASLt %d\n", version);

  // Part 1.
  for (const Mode& mode : kModes) {
    for (cudaDataType_t d : {CUDA_R_16BF, CUDA_R_32F}) {
      Plan p = MakePlan(lt, 128, 6144, 4096, mode, d, ws_bytes);
      printf("modes %-22s D %s: status %d, algorithms %d\n", mode.name,
             d == CUDA_R_16BF ? "bf16" : "fp32", int(p.status), p.found);
    }
  }
  // Part 2.
  Check(lt, s, ws, ws_bytes, kModes[2], true, 0.0f);
  for (const int i : {2, 5, 6, 1}) {
    for (float beta : {0.0f, 1.0f}) Check(lt, s, ws, ws_bytes, kModes[i], false, beta);
  }

  // Part 3: the best of up to 8 heuristic algorithms a form.
  struct Shape {
    const char* name;
    int n, k;
  } shapes[] = {{"8b_qkv", 6144, 4096},       {"8b_o", 4096, 4096},     {"8b_gate_up", 28672, 4096},
                {"8b_down", 4096, 14336},     {"70b_qkv", 10240, 8192}, {"70b_o", 8192, 8192},
                {"70b_gate_up", 57344, 8192}, {"70b_down", 8192, 28672}};
  const int copies = 16;
  for (const Shape& sh : shapes) {
    std::vector<void*> w(copies);
    for (void*& p : w) {
      CK(cudaMalloc(&p, size_t(sh.n) * sh.k));
      CK(cudaMemset(p, 0x38, size_t(sh.n) * sh.k));
    }
    float* w_scales;
    CK(cudaMalloc(&w_scales, size_t(sh.n) * (sh.k / 128) * 4));
    CK(cudaMemset(w_scales, 0, size_t(sh.n) * (sh.k / 128) * 4));
    for (int m : {8, 32, 128, 2048}) {
      void *x, *d;
      float* x_scales;
      CK(cudaMalloc(&x, size_t(m) * sh.k));
      CK(cudaMemset(x, 0x38, size_t(m) * sh.k));
      CK(cudaMalloc(&d, size_t(m) * sh.n * 4));
      CK(cudaMalloc(&x_scales, size_t(m) * (sh.k / 128) * 4));
      CK(cudaMemset(x_scales, 0, size_t(m) * (sh.k / 128) * 4));
      printf("%-12s m=%4d:", sh.name, m);
      // plain into fp32, vec x vec, outer x vec, outer x outer, blk x vec (BF16 D)
      for (const int f : {0, 2, 5, 1, 3}) {
        const Mode& mode = kModes[f];
        const cudaDataType_t dt = f == 0 ? CUDA_R_32F : CUDA_R_16BF;
        Plan p = MakePlan(lt, m, sh.n, sh.k, mode, dt, ws_bytes);
        if (p.status != CUBLAS_STATUS_SUCCESS || p.found == 0) {
          printf(" | %s -", mode.name);
          continue;
        }
        double best = 1e30;
        int best_i = -1;
        for (int i = 0; i < p.found; ++i) {
          cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
          const double us = CaptureReplayUs(s, 10, [&] {
            for (int c = 0; c < copies; ++c) {
              const cublasStatus_t r =
                  Run(lt, p, w[c], x, d, w_scales, x_scales, ws, ws_bytes, s, 0.0f, &p.algos[i]);
              if (r != CUBLAS_STATUS_SUCCESS) st = r;
            }
          });
          if (st == CUBLAS_STATUS_SUCCESS && us < best) best = us, best_i = i;
        }
        if (best_i < 0) {
          printf(" | %s failed", mode.name);
          continue;
        }
        printf(" | %s %.1f us (algo %d of %d)", mode.name, best / copies, best_i, p.found);
      }
      printf("\n");
      fflush(stdout);
      CK(cudaFree(x));
      CK(cudaFree(d));
      CK(cudaFree(x_scales));
    }
    for (void* p : w) CK(cudaFree(p));
    CK(cudaFree(w_scales));
  }
  return 0;
}
