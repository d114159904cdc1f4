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
  cublasLtMatrixLayout_t w = nullptr, x = nullptr, acc = nullptr;  // acc: out when scaled
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
  if (a.scaled) {
    if (a.out_row_stride < a.n || a.out_row_stride % 8 != 0) {
      return absl::InvalidArgumentError(absl::StrCat("Fp8Matmul: out_row_stride ", a.out_row_stride,
                                                     " must be >= n (", a.n,
                                                     ") and a multiple of 8"));
    }
    if (!Aligned(a.x) || !Aligned(a.w) || !Aligned(a.out)) {
      return absl::InvalidArgumentError("Fp8Matmul: x, w and out must be 16-byte aligned");
    }
    return absl::OkStatus();
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

Fp8Matmul::Key Fp8Matmul::KeyOf(const Fp8MatmulArgs& a) {
  return Key{a.m, a.n, a.k, a.scaled ? a.out_row_stride : a.acc_row_stride, a.scaled};
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
  if (a.scaled) {  // w's scales along cuBLASLt's rows (A), x's along its columns (B)
    const int32_t mode = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
    CUDA_RETURN_IF_ERROR(
        lt.desc_set(plan->desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode, sizeof(mode)));
    CUDA_RETURN_IF_ERROR(
        lt.desc_set(plan->desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode, sizeof(mode)));
    // The heuristic is asked with scale pointers set (each call sets its
    // own): a 16-byte-aligned stand-in that is never read.
    const void* stand_in = reinterpret_cast<const void*>(uintptr_t{256});
    CUDA_RETURN_IF_ERROR(
        lt.desc_set(plan->desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &stand_in, sizeof(stand_in)));
    CUDA_RETURN_IF_ERROR(
        lt.desc_set(plan->desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &stand_in, sizeof(stand_in)));
    CUDA_RETURN_IF_ERROR(lt.layout_create(&plan->acc, CUDA_R_16BF, a.n, a.m, a.out_row_stride));
  } else {
    CUDA_RETURN_IF_ERROR(lt.layout_create(&plan->acc, CUDA_R_32F, a.n, a.m, a.acc_row_stride));
  }

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
        "Fp8Matmul: cuBLASLt has no E4M3 algorithm", a.scaled ? " with outer-vector scales" : "",
        " for ", ShapeName(a), " within ", workspace_bytes_,
        " workspace bytes on this device (FP8 needs sm_89 or later)"));
  }
  CUDA_RETURN_IF_ERROR(st);
  plan->algo = result.algo;
  plan->workspace = result.workspaceSize;
  return plan;
}

absl::Status Fp8Matmul::Prepare(const Fp8MatmulArgs& a) {
  Fp8MatmulArgs shape = a;  // only the shape is checked here
  shape.x = shape.w = shape.acc = nullptr;
  shape.out = nullptr;
  RETURN_IF_ERROR(CheckShape(shape));
  if (Prepared(a)) return absl::OkStatus();
  const Key key = KeyOf(a);
  if (auto it = unsupported_.find(key); it != unsupported_.end()) return it->second;
  absl::StatusOr<std::unique_ptr<Plan>> plan = NewPlan(a);
  if (plan.status().code() == absl::StatusCode::kUnimplemented) {
    unsupported_.emplace(key, plan.status());
  }
  if (!plan.ok()) return plan.status();
  plans_[key] = *std::move(plan);
  return absl::OkStatus();
}

bool Fp8Matmul::Prepared(const Fp8MatmulArgs& a) const { return plans_.contains(KeyOf(a)); }

absl::Status Fp8Matmul::Run(const Fp8MatmulArgs& a, cudaStream_t stream) {
  RETURN_IF_ERROR(CheckShape(a));
  if (a.x == nullptr || a.w == nullptr ||
      (a.scaled ? a.out == nullptr || a.x_scales == nullptr || a.w_scales == nullptr
                : a.acc == nullptr)) {
    return absl::InvalidArgumentError(a.scaled ? "Fp8Matmul: x, w, out or a scale is null"
                                               : "Fp8Matmul: x, w or acc is null");
  }
  auto it = plans_.find(KeyOf(a));
  if (it == plans_.end()) {
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    CUDA_RETURN_IF_ERROR(cudaStreamIsCapturing(stream, &capture));
    if (capture != cudaStreamCaptureStatusNone) {
      return absl::FailedPreconditionError(
          absl::StrCat("Fp8Matmul: ", ShapeName(a),
                       " was not prepared; Prepare every shape before capturing a graph"));
    }
    RETURN_IF_ERROR(Prepare(a));
    it = plans_.find(KeyOf(a));
  }
  const Plan& plan = *it->second;
  const float alpha = 1.0f, beta = a.scaled && a.accumulate ? 1.0f : 0.0f;
  void* d = a.acc;
  if (a.scaled) {  // the scales' addresses go with the call (a graph keeps them)
    const void* w_scales = a.w_scales;
    const void* x_scales = a.x_scales;
    CUDA_RETURN_IF_ERROR(lt_->desc_set(plan.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &w_scales,
                                       sizeof(w_scales)));
    CUDA_RETURN_IF_ERROR(lt_->desc_set(plan.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &x_scales,
                                       sizeof(x_scales)));
    d = a.out;
  }
  CUDA_RETURN_IF_ERROR(lt_->matmul(lt_->handle, plan.desc, &alpha, a.w, plan.w, a.x, plan.x, &beta,
                                   d, plan.acc, d, plan.acc, &plan.algo, workspace_, plan.workspace,
                                   stream));
  return absl::OkStatus();
}

}  // namespace onecard::engine
