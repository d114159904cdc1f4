// BlasTuner (see blas_tuner.h): cuBLASLt descriptors per tuned shape, the
// candidates of cublasLtMatmulAlgoGetHeuristic timed against cuBLAS's default
// with CUDA events, the winner kept. cuBLASLt is reached through
// cuda::CublasLtSymbol (opened on first use, like cuBLAS: cublas_loader.h).
#include "engine/kernels/blas_tuner.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/common/status_macros.h"
#include "engine/kernels/cublas_loader.h"
#include "engine/runtime/cuda_check.h"

namespace onecard::engine {
namespace {

constexpr int kTimedPasses = 3;  // over all weights, after one warm-up pass

template <typename Fn>
absl::Status Symbol(const char* name, Fn* out) {
  ASSIGN_OR_RETURN(void* address, cuda::CublasLtSymbol(name));
  *out = reinterpret_cast<Fn>(address);
  return absl::OkStatus();
}

cudaDataType_t CudaType(DType dtype) { return dtype == DType::kF32 ? CUDA_R_32F : CUDA_R_16BF; }

}  // namespace

struct BlasTuner::Lt {
  cublasLtHandle_t handle = nullptr;
  decltype(&::cublasLtCreate) create = nullptr;
  decltype(&::cublasLtDestroy) destroy = nullptr;
  decltype(&::cublasLtMatmulDescCreate) desc_create = nullptr;
  decltype(&::cublasLtMatmulDescDestroy) desc_destroy = nullptr;
  decltype(&::cublasLtMatmulDescSetAttribute) desc_set = nullptr;
  decltype(&::cublasLtMatrixLayoutCreate) layout_create = nullptr;
  decltype(&::cublasLtMatrixLayoutDestroy) layout_destroy = nullptr;
  decltype(&::cublasLtMatmulPreferenceCreate) pref_create = nullptr;
  decltype(&::cublasLtMatmulPreferenceDestroy) pref_destroy = nullptr;
  decltype(&::cublasLtMatmulPreferenceSetAttribute) pref_set = nullptr;
  decltype(&::cublasLtMatmulAlgoGetHeuristic) heuristic = nullptr;
  decltype(&::cublasLtMatmul) matmul = nullptr;

  absl::Status Load() {
    RETURN_IF_ERROR(Symbol("cublasLtCreate", &create));
    RETURN_IF_ERROR(Symbol("cublasLtDestroy", &destroy));
    RETURN_IF_ERROR(Symbol("cublasLtMatmulDescCreate", &desc_create));
    RETURN_IF_ERROR(Symbol("cublasLtMatmulDescDestroy", &desc_destroy));
    RETURN_IF_ERROR(Symbol("cublasLtMatmulDescSetAttribute", &desc_set));
    RETURN_IF_ERROR(Symbol("cublasLtMatrixLayoutCreate", &layout_create));
    RETURN_IF_ERROR(Symbol("cublasLtMatrixLayoutDestroy", &layout_destroy));
    RETURN_IF_ERROR(Symbol("cublasLtMatmulPreferenceCreate", &pref_create));
    RETURN_IF_ERROR(Symbol("cublasLtMatmulPreferenceDestroy", &pref_destroy));
    RETURN_IF_ERROR(Symbol("cublasLtMatmulPreferenceSetAttribute", &pref_set));
    RETURN_IF_ERROR(Symbol("cublasLtMatmulAlgoGetHeuristic", &heuristic));
    RETURN_IF_ERROR(Symbol("cublasLtMatmul", &matmul));
    CUDA_RETURN_IF_ERROR(create(&handle));
    return absl::OkStatus();
  }
  ~Lt() {
    if (handle != nullptr) destroy(handle);
  }
};

struct BlasTuner::Entry {
  const Lt* lt = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  size_t workspace = 0;
  bool use_lt = false;
  int candidate = -1;  // index in the heuristic's list, -1: the default
  int candidates = 0;
  double default_us = 0.0;
  double best_us = 0.0;
  ~Entry() {
    if (a != nullptr) lt->layout_destroy(a);
    if (b != nullptr) lt->layout_destroy(b);
    if (c != nullptr) lt->layout_destroy(c);
    if (desc != nullptr) lt->desc_destroy(desc);
  }
};

absl::StatusOr<std::unique_ptr<BlasTuner>> BlasTuner::Create(void* workspace,
                                                             int64_t workspace_bytes) {
  std::unique_ptr<BlasTuner> tuner(new BlasTuner());
  tuner->lt_ = std::make_unique<Lt>();
  RETURN_IF_ERROR(tuner->lt_->Load());
  tuner->workspace_ = workspace;
  tuner->workspace_bytes_ = workspace != nullptr ? workspace_bytes : 0;
  return tuner;
}

BlasTuner::~BlasTuner() { entries_.clear(); }

BlasTuner::Key BlasTuner::KeyOf(const BlasGemmParams& p) {
  return {p.m, p.n, p.k, static_cast<int>(p.dtype), static_cast<int>(p.y_dtype), p.beta != 0.0f};
}

absl::Status BlasTuner::Enqueue(const Entry& e, const BlasGemmParams& p, const void* w,
                                cudaStream_t stream) const {
  const float alpha = 1.0f;
  CUDA_RETURN_IF_ERROR(lt_->matmul(lt_->handle, e.desc, &alpha, w, e.a, p.x, e.b, &p.beta, p.y, e.c,
                                   p.y, e.c, &e.algo, workspace_, e.workspace, stream));
  return absl::OkStatus();
}

absl::StatusOr<bool> BlasTuner::TryRun(const BlasGemmParams& p, cudaStream_t stream) const {
  const auto it = entries_.find(KeyOf(p));
  if (it == entries_.end() || !it->second->use_lt) return false;
  RETURN_IF_ERROR(Enqueue(*it->second, p, p.w, stream));
  return true;
}

absl::Status BlasTuner::Tune(cublasHandle_t handle, const BlasGemmParams& p,
                             std::span<const void* const> weights, cudaStream_t stream) {
  if (p.dtype != DType::kBF16 || weights.empty() || p.m <= 0) return absl::OkStatus();
  const Lt& lt = *lt_;
  auto e = std::make_unique<Entry>();
  e->lt = lt_.get();
  // Column-major view, as BlasGemm: y^T [n, m] = op_T(W^T [k, n]) x^T [k, m].
  CUDA_RETURN_IF_ERROR(lt.desc_create(&e->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t transa = CUBLAS_OP_T, transb = CUBLAS_OP_N;
  CUDA_RETURN_IF_ERROR(lt.desc_set(e->desc, CUBLASLT_MATMUL_DESC_TRANSA, &transa, sizeof(transa)));
  CUDA_RETURN_IF_ERROR(lt.desc_set(e->desc, CUBLASLT_MATMUL_DESC_TRANSB, &transb, sizeof(transb)));
  CUDA_RETURN_IF_ERROR(lt.layout_create(&e->a, CUDA_R_16BF, p.k, p.n, p.k));
  CUDA_RETURN_IF_ERROR(lt.layout_create(&e->b, CUDA_R_16BF, p.k, p.m, p.k));
  CUDA_RETURN_IF_ERROR(lt.layout_create(&e->c, CudaType(p.y_dtype), p.n, p.m, p.n));
  cublasLtMatmulPreference_t pref = nullptr;
  CUDA_RETURN_IF_ERROR(lt.pref_create(&pref));
  const uint64_t max_workspace = static_cast<uint64_t>(workspace_bytes_);
  cublasLtMatmulHeuristicResult_t results[kCandidates] = {};
  int found = 0;
  cublasStatus_t st = lt.pref_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_workspace,
                                  sizeof(max_workspace));
  if (st == CUBLAS_STATUS_SUCCESS) {
    st = lt.heuristic(lt.handle, e->desc, e->a, e->b, e->c, e->c, pref, kCandidates, results,
                      &found);
  }
  lt.pref_destroy(pref);
  if (st == CUBLAS_STATUS_NOT_SUPPORTED) {
    found = 0;  // no cuBLASLt algorithm for this shape: the default stays
  } else {
    CUDA_RETURN_IF_ERROR(st);
  }

  cudaEvent_t start = nullptr, stop = nullptr;
  CUDA_RETURN_IF_ERROR(cudaEventCreate(&start));
  CUDA_RETURN_IF_ERROR(cudaEventCreate(&stop));
  // Microseconds a product, over every weight; an error from `run` (an
  // algorithm that turns out not to apply) is returned as is.
  auto time = [&](auto&& run) -> absl::StatusOr<double> {
    for (const void* w : weights) RETURN_IF_ERROR(run(w));
    CUDA_RETURN_IF_ERROR(cudaEventRecord(start, stream));
    for (int pass = 0; pass < kTimedPasses; ++pass) {
      for (const void* w : weights) RETURN_IF_ERROR(run(w));
    }
    CUDA_RETURN_IF_ERROR(cudaEventRecord(stop, stream));
    CUDA_RETURN_IF_ERROR(cudaEventSynchronize(stop));
    float ms = 0.0f;
    CUDA_RETURN_IF_ERROR(cudaEventElapsedTime(&ms, start, stop));
    return 1e3 * ms / (kTimedPasses * static_cast<double>(weights.size()));
  };
  absl::Status status = [&]() -> absl::Status {
    BlasGemmParams q = p;
    ASSIGN_OR_RETURN(e->default_us, time([&](const void* w) {
                       q.w = w;
                       return BlasGemm(handle, q, stream);
                     }));
    e->best_us = e->default_us;
    e->candidates = found;
    for (int i = 0; i < found; ++i) {
      if (results[i].state != CUBLAS_STATUS_SUCCESS ||
          results[i].workspaceSize > static_cast<size_t>(workspace_bytes_)) {
        continue;
      }
      e->algo = results[i].algo;
      e->workspace = results[i].workspaceSize;
      absl::StatusOr<double> us = time([&](const void* w) { return Enqueue(*e, p, w, stream); });
      if (!us.ok()) {
        CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
        continue;  // not applicable after all: the heuristic's next one
      }
      if (*us < e->best_us) {
        e->best_us = *us;
        e->candidate = i;
      }
    }
    return absl::OkStatus();
  }();
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  RETURN_IF_ERROR(status);
  e->use_lt = e->candidate >= 0;
  if (e->use_lt) {
    e->algo = results[e->candidate].algo;
    e->workspace = results[e->candidate].workspaceSize;
  }
  entries_[KeyOf(p)] = std::move(e);
  return absl::OkStatus();
}

std::string BlasTuner::Summary() const {
  std::string out;
  for (const auto& [key, e] : entries_) {
    const auto& [m, n, k, dtype, y_dtype, accumulate] = key;
    absl::StrAppend(&out, absl::StrFormat("%d x %d x %d%s: %s %.1f us (default %.1f us, %d "
                                          "candidates)\n",
                                          m, n, k, accumulate ? " +=" : "",
                                          e->use_lt ? absl::StrCat("cublasLt #", e->candidate)
                                                    : std::string("default"),
                                          e->best_us, e->default_us, e->candidates));
  }
  return out;
}

}  // namespace onecard::engine
