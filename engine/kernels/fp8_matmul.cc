// Fp8Matmul (see fp8_matmul.h): a cuBLASLt plan per shape, then one
// cublasLtMatmul a call.
#include "engine/kernels/fp8_matmul.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "engine/common/status_macros.h"
#include "engine/kernels/cublas_lt.h"
#include "engine/kernels/cuda_check.h"

namespace onecard::engine {
namespace {

constexpr uint32_t kAlignmentBytes = 16;  // what Fp8Gemm checks of its operands

bool Aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % kAlignmentBytes == 0; }

std::string ShapeName(const Fp8MatmulArgs& a) {
  return absl::StrCat(a.m, " x ", a.n, " x ", a.k, " (acc_row_stride ", a.acc_row_stride, ")");
}

}  // namespace

struct Fp8Matmul::Plan {
  const cuda::CublasLt* lt = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t w = nullptr, x = nullptr, acc = nullptr;
  cublasLtMatmulAlgo_t algo{};
  size_t workspace = 0;
  ~Plan() {
    if (w != nullptr) lt->layout_destroy(w);
    if (x != nullptr) lt->layout_destroy(x);
    if (acc != nullptr) lt->layout_destroy(acc);
    if (desc != nullptr) lt->desc_destroy(desc);
  }
};

absl::StatusOr<std::unique_ptr<Fp8Matmul>> Fp8Matmul::Create(void* workspace,
                                                             int64_t workspace_bytes) {
  if (workspace_bytes < 0 || (workspace == nullptr && workspace_bytes != 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("Fp8Matmul: workspace_bytes = ", workspace_bytes, " with a ",
                     workspace == nullptr ? "null" : "non-null", " workspace"));
  }
  std::unique_ptr<Fp8Matmul> matmul(new Fp8Matmul());
  matmul->lt_ = std::make_unique<cuda::CublasLt>();
  RETURN_IF_ERROR(matmul->lt_->Load());
  matmul->workspace_ = workspace;
  matmul->workspace_bytes_ = workspace_bytes;
  return matmul;
}

Fp8Matmul::~Fp8Matmul() { plans_.clear(); }

absl::Status Fp8Matmul::CheckShape(const Fp8MatmulArgs& a) {
  if (a.m < 1 || a.n < 1 || a.n % 16 != 0 || a.k < 1 || a.k % 16 != 0) {
    return absl::UnimplementedError(
        absl::StrCat("Fp8Matmul: m = ", a.m, ", n = ", a.n, ", k = ", a.k,
                     " is not supported; supported: m >= 1, n and k positive multiples of 16"));
  }
  if (a.acc_row_stride < a.n || a.acc_row_stride % 4 != 0) {
    return absl::InvalidArgumentError(absl::StrCat("Fp8Matmul: acc_row_stride ", a.acc_row_stride,
                                                   " must be >= n (", a.n,
                                                   ") and a multiple of 4"));
  }
  if (!Aligned(a.x) || !Aligned(a.w) || !Aligned(a.acc)) {
    return absl::InvalidArgumentError("Fp8Matmul: x, w and acc must be 16-byte aligned");
  }
  return absl::OkStatus();
}

// The column-major view cuBLASLt takes: acc^T [n, m] = op_T(w^T [k, n]) x^T [k, m],
// so w is cuBLASLt's transposed A and x its plain B (the "TN" layout).
absl::StatusOr<std::unique_ptr<Fp8Matmul::Plan>> Fp8Matmul::NewPlan(const Fp8MatmulArgs& a) const {
  const cuda::CublasLt& lt = *lt_;
  auto plan = std::make_unique<Plan>();
  plan->lt = &lt;
  CUDA_RETURN_IF_ERROR(lt.desc_create(&plan->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t transa = CUBLAS_OP_T, transb = CUBLAS_OP_N;
  const int8_t fast_accumulation = 0;
  CUDA_RETURN_IF_ERROR(
      lt.desc_set(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, &transa, sizeof(transa)));
  CUDA_RETURN_IF_ERROR(
      lt.desc_set(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, &transb, sizeof(transb)));
  CUDA_RETURN_IF_ERROR(lt.desc_set(plan->desc, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast_accumulation,
                                   sizeof(fast_accumulation)));
  CUDA_RETURN_IF_ERROR(lt.layout_create(&plan->w, CUDA_R_8F_E4M3, a.k, a.n, a.k));
  CUDA_RETURN_IF_ERROR(lt.layout_create(&plan->x, CUDA_R_8F_E4M3, a.k, a.m, a.k));
  CUDA_RETURN_IF_ERROR(lt.layout_create(&plan->acc, CUDA_R_32F, a.n, a.m, a.acc_row_stride));

  cublasLtMatmulPreference_t pref = nullptr;
  CUDA_RETURN_IF_ERROR(lt.pref_create(&pref));
  const uint64_t max_workspace = static_cast<uint64_t>(workspace_bytes_);
  cublasStatus_t st = lt.pref_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_workspace,
                                  sizeof(max_workspace));
  for (const cublasLtMatmulPreferenceAttributes_t attribute :
       {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES}) {
    if (st == CUBLAS_STATUS_SUCCESS) {
      st = lt.pref_set(pref, attribute, &kAlignmentBytes, sizeof(kAlignmentBytes));
    }
  }
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  if (st == CUBLAS_STATUS_SUCCESS) {
    st = lt.heuristic(lt.handle, plan->desc, plan->w, plan->x, plan->acc, plan->acc, pref, 1,
                      &result, &found);
  }
  lt.pref_destroy(pref);
  if (st == CUBLAS_STATUS_NOT_SUPPORTED ||
      (st == CUBLAS_STATUS_SUCCESS && (found == 0 || result.state != CUBLAS_STATUS_SUCCESS))) {
    return absl::UnimplementedError(absl::StrCat(
        "Fp8Matmul: cuBLASLt has no E4M3 algorithm for ", ShapeName(a), " within ",
        workspace_bytes_, " workspace bytes on this device (FP8 needs sm_89 or later)"));
  }
  CUDA_RETURN_IF_ERROR(st);
  plan->algo = result.algo;
  plan->workspace = result.workspaceSize;
  return plan;
}

absl::Status Fp8Matmul::Prepare(const Fp8MatmulArgs& a) {
  Fp8MatmulArgs shape = a;  // only the shape is checked here
  shape.x = shape.w = shape.acc = nullptr;
  RETURN_IF_ERROR(CheckShape(shape));
  if (Prepared(a)) return absl::OkStatus();
  ASSIGN_OR_RETURN(std::unique_ptr<Plan> plan, NewPlan(a));
  plans_[Key{a.m, a.n, a.k, a.acc_row_stride}] = std::move(plan);
  return absl::OkStatus();
}

bool Fp8Matmul::Prepared(const Fp8MatmulArgs& a) const {
  return plans_.contains(Key{a.m, a.n, a.k, a.acc_row_stride});
}

absl::Status Fp8Matmul::Run(const Fp8MatmulArgs& a, cudaStream_t stream) {
  RETURN_IF_ERROR(CheckShape(a));
  if (a.x == nullptr || a.w == nullptr || a.acc == nullptr) {
    return absl::InvalidArgumentError("Fp8Matmul: x, w or acc is null");
  }
  auto it = plans_.find(Key{a.m, a.n, a.k, a.acc_row_stride});
  if (it == plans_.end()) {
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    CUDA_RETURN_IF_ERROR(cudaStreamIsCapturing(stream, &capture));
    if (capture != cudaStreamCaptureStatusNone) {
      return absl::FailedPreconditionError(
          absl::StrCat("Fp8Matmul: ", ShapeName(a),
                       " was not prepared; Prepare every shape before capturing a graph"));
    }
    RETURN_IF_ERROR(Prepare(a));
    it = plans_.find(Key{a.m, a.n, a.k, a.acc_row_stride});
  }
  const Plan& plan = *it->second;
  const float alpha = 1.0f, beta = 0.0f;
  CUDA_RETURN_IF_ERROR(lt_->matmul(lt_->handle, plan.desc, &alpha, a.w, plan.w, a.x, plan.x, &beta,
                                   a.acc, plan.acc, a.acc, plan.acc, &plan.algo, workspace_,
                                   plan.workspace, stream));
  return absl::OkStatus();
}

}  // namespace onecard::engine
