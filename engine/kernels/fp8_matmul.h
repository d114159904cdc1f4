// Fp8Matmul: the cuBLASLt half of Fp8Gemm (fp8_gemm.h), also what
// onecard-bench's ceilings time as the card's FP8 matrix rate:
//   acc[i][j] = sum_c x[i][c] * w[j][c]
// for E4M3 codes x [m, k] and w [n, k], both row-major (K-major: the "TN"
// layout Hopper's FP8 tensor-core kernels need), products summed in fp32
// (CUBLAS_COMPUTE_32F; fast accumulation off, so cuBLASLt promotes the
// tensor cores' partial sums to fp32 as it goes), scale factors 1, acc fp32
// [m, acc_row_stride] row-major. cuBLASLt is reached through cuda::CublasLt
// (cublas_lt.h: opened on first use, never linked).
//
// Plans: a shape's matmul descriptor, layouts and algorithm (the cuBLASLt
// heuristic's first choice within the workspace, for operands aligned to 16
// bytes) are made once and cached by (m, n, k, acc_row_stride). Prepare
// makes them ahead; Run makes a missing one itself, unless `stream` is being
// captured into a CUDA graph, where it returns FailedPrecondition: prepare
// every shape a graph will hold before capturing it (Run then only
// enqueues cublasLtMatmul, which allocates nothing and can be captured).
// One thread at a time (the cache is not locked); the workspace serves one
// stream at a time.
//
// Supported: m >= 1; n and k positive multiples of 16 (cuBLASLt's FP8
// kernels want the operands' rows and the output's columns 16-byte aligned);
// acc_row_stride >= n and a multiple of 4; x, w and acc 16-byte aligned; a
// device with FP8 tensor cores (sm_89 and later; elsewhere the heuristic has
// no algorithm: Unimplemented). Tested by tests/gpu/fp8_gemm_test.cc (through Fp8Gemm).
#ifndef ONECARD_ENGINE_KERNELS_FP8_MATMUL_H_
#define ONECARD_ENGINE_KERNELS_FP8_MATMUL_H_

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/kernels/stream.h"

namespace onecard::engine {
namespace cuda {
struct CublasLt;  // cublas_lt.h
}  // namespace cuda

struct Fp8MatmulArgs {
  const void* x = nullptr;  // E4M3 [m, k]
  const void* w = nullptr;  // E4M3 [n, k]
  float* acc = nullptr;     // [m, acc_row_stride]; columns n.. are not written
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
  int64_t acc_row_stride = 0;  // elements between rows of acc
  // The scaled form (acc unused): cuBLASLt multiplies each sum by its row's
  // and column's scales (CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F on both
  // operands) and writes BF16, adding out's old value first when accumulate:
  //   out[i][j] = bf16(acc[i][j] * x_scales[i] * w_scales[j] (+ out[i][j]))
  // (one rounding; cuBLASLt's order of the fp32 products). Its plans are
  // its own (the same shape may have either form or both); a device whose
  // cuBLASLt has no such algorithm gets Unimplemented from Prepare.
  bool scaled = false;
  const float* x_scales = nullptr;  // [m]
  const float* w_scales = nullptr;  // [n]
  void* out = nullptr;              // BF16 [m, out_row_stride]
  int64_t out_row_stride = 0;       // >= n, a multiple of 8
  bool accumulate = false;
};

class Fp8Matmul {
 public:
  // `workspace` (device, `workspace_bytes`; may be null and 0) is what the
  // chosen algorithms may use; it must outlive this object and be used only
  // on the stream the products run on (it may be the cuBLAS handle's
  // workspace: both run in stream order). FailedPrecondition when cuBLASLt
  // cannot be opened.
  static absl::StatusOr<std::unique_ptr<Fp8Matmul>> Create(void* workspace,
                                                           int64_t workspace_bytes);
  ~Fp8Matmul();
  Fp8Matmul(const Fp8Matmul&) = delete;
  Fp8Matmul& operator=(const Fp8Matmul&) = delete;

  // The checks Run makes of `args`' shape and pointers (null pointers are
  // allowed here, for Prepare): Unimplemented or InvalidArgument naming the
  // field (scaled: out_row_stride >= n and a multiple of 8, out 16-byte
  // aligned).
  static absl::Status CheckShape(const Fp8MatmulArgs& args);
  // Makes the plan of `args`' shape and form (its pointers are not read):
  // no device work, no synchronization. Unimplemented when cuBLASLt has no
  // FP8 algorithm for it on this device (remembered: asking again answers
  // the same at once).
  absl::Status Prepare(const Fp8MatmulArgs& args);
  bool Prepared(const Fp8MatmulArgs& args) const;
  // Enqueues the product on `stream` (plans a new shape first, outside graph
  // capture: above).
  absl::Status Run(const Fp8MatmulArgs& args, cudaStream_t stream);

 private:
  struct Plan;  // fp8_matmul.cc
  // m, n, k, acc_row_stride (out_row_stride when scaled), scaled
  using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, bool>;
  static Key KeyOf(const Fp8MatmulArgs& args);

  Fp8Matmul() = default;
  absl::StatusOr<std::unique_ptr<Plan>> NewPlan(const Fp8MatmulArgs& args) const;

  std::unique_ptr<cuda::CublasLt> lt_;
  void* workspace_ = nullptr;
  int64_t workspace_bytes_ = 0;
  std::map<Key, std::unique_ptr<Plan>> plans_;
  std::map<Key, absl::Status> unsupported_;  // shapes cuBLASLt has no algorithm for
};

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_KERNELS_FP8_MATMUL_H_
