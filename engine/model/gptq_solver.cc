// GPTQ's error-compensating quantization (see gptq_solver.h).
#include "engine/model/gptq_solver.h"

#include <algorithm>
#include <cmath>

#include "Eigen/Cholesky"
#include "Eigen/Core"
#include "absl/strings/str_cat.h"

namespace onecard::engine {
namespace {

using RowMajor = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using RowMajorMap = Eigen::Map<RowMajor, Eigen::Unaligned, Eigen::OuterStride<>>;
using ConstRowMajorMap = Eigen::Map<const RowMajor, Eigen::Unaligned, Eigen::OuterStride<>>;

// The [rows, cols] block of a row-major matrix of `stride` columns at data.
RowMajorMap Block(double* data, int64_t rows, int64_t cols, int64_t stride) {
  return RowMajorMap(data, rows, cols, Eigen::OuterStride<>(stride));
}
ConstRowMajorMap Block(const double* data, int64_t rows, int64_t cols, int64_t stride) {
  return ConstRowMajorMap(data, rows, cols, Eigen::OuterStride<>(stride));
}

// U, the upper Cholesky factor of (H + damp mean(diag H) I)^-1 (gptq.py's
// dampening; (...)^-1 = U^T U); an empty vector when that is not positive
// definite. gptq.py computes it as cholesky(cholesky_inverse(
// cholesky(H)), upper); here with one factorization and one triangular
// inverse, reversing the order of the columns (P: the reversal):
//   P H P = L L^T  =>  H^-1 = P L^-T L^-1 P = (P L^-1 P)^T (P L^-1 P),
// and P L^-1 P is upper with a positive diagonal, so it is U (the factor is
// unique). Eigen's blocked Cholesky and triangular solve.
std::vector<double> InverseFactor(const std::vector<double>& h, int64_t k, double damp) {
  double mean = 0.0;
  for (int64_t i = 0; i < k; ++i) mean += h[i * k + i];
  mean /= static_cast<double>(k);
  Eigen::MatrixXd reversed(k, k);
  for (int64_t i = 0; i < k; ++i) {
    for (int64_t j = 0; j < k; ++j) reversed(i, j) = h[(k - 1 - i) * k + (k - 1 - j)];
  }
  reversed.diagonal().array() += damp * mean;
  Eigen::LLT<Eigen::Ref<Eigen::MatrixXd>> llt(reversed);  // in place: L in the lower triangle
  if (llt.info() != Eigen::Success) return {};
  Eigen::MatrixXd inverse = Eigen::MatrixXd::Identity(k, k);
  llt.matrixL().solveInPlace(inverse);  // L^-1
  std::vector<double> u(k * k, 0.0);
  for (int64_t i = 0; i < k; ++i) {
    for (int64_t j = i; j < k; ++j) u[i * k + j] = inverse(k - 1 - i, k - 1 - j);
  }
  return u;
}

// Each row's scale and zero point for the group starting at column col,
// from W as the blocks before have left it (gptq.py: find_params on W, not
// on the block's working copy).
void FindGroupParams(const std::vector<double>& wd, int64_t col, bool sym,
                     std::vector<GptqGroupParams>& params, GptqQuantized& q) {
  const int64_t groups = q.num_groups();
  std::vector<float> values(q.group);
  for (int64_t r = 0; r < q.n; ++r) {
    for (int32_t j = 0; j < q.group; ++j) values[j] = static_cast<float>(wd[r * q.k + col + j]);
    params[r] = FindGptqGroupParams(values, sym);
    q.scales[r * groups + col / q.group] = params[r].scale;
    q.zeros[r * groups + col / q.group] = params[r].zero;
  }
}

// Columns [i1, i2) of W (wd [n, k]): each quantized in turn, its error
// spread over the block's later columns; then the columns after the block
// updated at once (GPTQ's lazy batch).
void QuantizeBlock(int64_t i1, int64_t i2, const std::vector<double>& u, const GptqOptions& o,
                   std::vector<double>& wd, std::vector<GptqGroupParams>& params,
                   GptqQuantized& q) {
  const int64_t n = q.n, k = q.k, bs = i2 - i1;
  std::vector<double> w1(n * bs), err(n * bs);  // [n, bs]
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t j = 0; j < bs; ++j) w1[r * bs + j] = wd[r * k + i1 + j];
  }
  for (int64_t i = 0; i < bs; ++i) {
    const int64_t col = i1 + i;
    if (col % o.group == 0) FindGroupParams(wd, col, o.sym, params, q);
    const double d = u[col * k + col];
    for (int64_t r = 0; r < n; ++r) {
      const double x = w1[r * bs + i];
      const uint8_t code = GptqCode(static_cast<float>(x), params[r]);
      q.codes[r * k + col] = code;
      const float value = params[r].scale * static_cast<float>(code - params[r].zero);
      const double e = (x - value) / d;
      err[r * bs + i] = e;
      for (int64_t j = i; j < bs; ++j) w1[r * bs + j] -= e * u[col * k + i1 + j];
    }
  }
  if (i2 < k) {
    Block(wd.data() + i2, n, k - i2, k).noalias() -=
        Block(err.data(), n, bs, bs) * Block(u.data() + i1 * k + i2, bs, k - i2, k);
  }
}

}  // namespace

void GptqHessian::Add(std::span<const float> x, int64_t rows) {
  // X^T X += X_c^T X_c for chunks X_c of rows in double (a symmetric rank
  // update: Eigen's blocked kernel fills the upper triangle).
  constexpr int64_t kChunk = 256;
  RowMajor chunk;
  for (int64_t r0 = 0; r0 < rows; r0 += kChunk) {
    const int64_t m = std::min(kChunk, rows - r0);
    chunk = Eigen::Map<const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(
                x.data() + r0 * k_, m, k_)
                .cast<double>();
    Block(h_.data(), k_, k_, k_).selfadjointView<Eigen::Upper>().rankUpdate(chunk.transpose());
  }
  num_rows_ += rows;
}

std::vector<double> GptqHessian::Matrix() const {
  std::vector<double> m(k_ * k_, 0.0);
  if (num_rows_ == 0) return m;
  const double f = 2.0 / static_cast<double>(num_rows_);
  for (int64_t i = 0; i < k_; ++i) {
    for (int64_t j = i; j < k_; ++j) m[i * k_ + j] = m[j * k_ + i] = f * h_[i * k_ + j];
  }
  return m;
}

absl::StatusOr<GptqQuantized> QuantizeGptq(std::span<const float> w, int64_t n, int64_t k,
                                           std::span<const double> h_in, const GptqOptions& o) {
  if (static_cast<int64_t>(w.size()) != n * k || static_cast<int64_t>(h_in.size()) != k * k ||
      o.group <= 0 || k % o.group != 0 || o.block <= 0 || o.damp < 0) {
    return absl::InvalidArgumentError(absl::StrCat("QuantizeGptq: ", w.size(), " values for ", n,
                                                   " x ", k, ", H of ", h_in.size(), ", group ",
                                                   o.group));
  }
  std::vector<double> h(h_in.begin(), h_in.end());
  std::vector<double> wd(w.begin(), w.end());  // W, updated block by block
  for (int64_t i = 0; i < k; ++i) {
    if (h[i * k + i] != 0.0) continue;
    h[i * k + i] = 1.0;
    for (int64_t r = 0; r < n; ++r) wd[r * k + i] = 0.0;
  }
  const std::vector<double> u = InverseFactor(h, k, o.damp);
  if (u.empty()) {
    return absl::FailedPreconditionError("GPTQ: H + damp I is not positive definite; raise --damp");
  }
  GptqQuantized q;
  q.n = n, q.k = k, q.group = o.group;
  q.codes.resize(n * k);
  q.scales.resize(n * (k / o.group));
  q.zeros.resize(n * (k / o.group));
  std::vector<GptqGroupParams> params(n);
  for (int64_t i1 = 0; i1 < k; i1 += o.block) {
    QuantizeBlock(i1, std::min<int64_t>(i1 + o.block, k), u, o, wd, params, q);
  }
  return q;
}

double GptqOutputError(std::span<const float> w, const GptqQuantized& q,
                       std::span<const double> h) {
  const std::vector<float> deq = DequantizeGptq(q);
  const int64_t k = q.k;
  double total = 0.0;
  std::vector<double> delta(k);
  for (int64_t r = 0; r < q.n; ++r) {
    for (int64_t c = 0; c < k; ++c) delta[c] = double{w[r * k + c]} - deq[r * k + c];
    for (int64_t i = 0; i < k; ++i) {
      double s = 0.0;
      for (int64_t j = 0; j < k; ++j) s += h[i * k + j] * delta[j];
      total += delta[i] * s;
    }
  }
  return total;
}

}  // namespace onecard::engine
