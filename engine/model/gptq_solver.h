// GPTQ (Frantar et al., "GPTQ: Accurate Post-Training Quantization for
// Generative Pre-trained Transformers", 2022): 4-bit quantization of a linear
// layer W [n, k] that compensates each column's rounding error in the columns
// not yet quantized, weighted by the layer's input statistics H = 2 X^T X / N
// (X [N, k]: the inputs the layer saw on calibration text). As the authors'
// gptq.py fasterquant (and AutoGPTQ's / GPTQModel's port of it) does it, with
// static_groups false and no act order:
//   dead inputs (H[i][i] == 0): H[i][i] = 1, W[:, i] = 0;
//   H += damp * mean(diag H) * I;
//   U = upper Cholesky factor of H^-1;
//   for blocks of `block` columns, column by column: at the start of each
//   group, the group's scale and zero point from the current W (the blocks
//   before it already updated; GptqGroupParams, the RTN rules); q = its
//   code; err = (w - dequant(q)) / U[i][i]; the block's later columns
//   -= err U[i][j]; after the block, the later columns -= Err U[block, later].
// With H = I this is round-to-nearest. The result is in the GptqQuantized
// form of gptq_quantizer.h (the same packing). Sums are in double, by
// Eigen's blocked kernels (the Hessian's rank updates, the Cholesky factor,
// the triangular inverse, the lazy batch's product), so they are not added
// in gptq.py's order: equal to it within rounding, not bit for bit.
// Tested by tests/engine/model/gptq_solver_test.cc.
#ifndef ONECARD_ENGINE_MODEL_GPTQ_SOLVER_H_
#define ONECARD_ENGINE_MODEL_GPTQ_SOLVER_H_

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/gptq_quantizer.h"

namespace onecard::engine {

// H = 2 X^T X / N over the rows added so far (gptq.py add_batch).
class GptqHessian {
 public:
  explicit GptqHessian(int64_t k) : k_(k), h_(k * k, 0.0) {}
  // x: [rows, k], row-major.
  void Add(std::span<const float> x, int64_t rows);
  int64_t k() const { return k_; }
  int64_t num_rows() const { return num_rows_; }
  // [k, k]: 2 X^T X / N (zero before any row).
  std::vector<double> Matrix() const;

 private:
  int64_t k_;
  std::vector<double> h_;  // [k, k]: X^T X, the upper triangle filled
  int64_t num_rows_ = 0;
};

struct GptqOptions {
  int32_t group = 128;
  bool sym = true;
  double damp = 0.01;   // fraction of mean(diag H) added to the diagonal
  int32_t block = 128;  // columns a lazy batch updates together
};

// GPTQ of W [n, k] (row-major fp32) under h ([k, k], symmetric).
// InvalidArgument for mismatched sizes or a group that does not divide k;
// FailedPrecondition when H + damp is not positive definite (raise damp).
absl::StatusOr<GptqQuantized> QuantizeGptq(std::span<const float> w, int64_t n, int64_t k,
                                           std::span<const double> h, const GptqOptions& options);

// ||(W - Q) X||^2 / N * 2 = trace((W - Q) H (W - Q)^T), Q the dequantized
// codes (fp16 scales, as stored): the layer's output error on the
// calibration inputs.
double GptqOutputError(std::span<const float> w, const GptqQuantized& q, std::span<const double> h);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_MODEL_GPTQ_SOLVER_H_
