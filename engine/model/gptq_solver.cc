// GPTQ's error-compensating quantization (see gptq_solver.h).
#include "engine/model/gptq_solver.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace onecard::engine {
namespace {

// Rows of a step's output computed together, so that the rows they share
// are read from cache once per tile instead of from memory once per row.
// Every value is the same sum in the same order as one row at a time.
constexpr int64_t kTile = 16;

// sum_{p in [begin, end)} x[p] y[p], in order.
double Dot(const double* x, const double* y, int64_t begin, int64_t end) {
  double s = 0.0;
  for (int64_t p = begin; p < end; ++p) s += x[p] * y[p];
  return s;
}

// init - x[0] y[0] - x[1] y[1] - ..., one subtraction at a time.
double SubtractProducts(double init, const double* x, const double* y, int64_t end) {
  for (int64_t p = 0; p < end; ++p) init -= x[p] * y[p];
  return init;
}

// In place: the lower Cholesky factor L of a ([k, k], L L^T = a; the upper
// triangle left as zeros). False when a is not positive definite. Column j
// of L is a[i][j] - sum_{p < j} L[i][p] L[j][p], over L[j][j]; the columns go
// in tiles of kTile, each row below a tile computing the tile's columns in
// order while its row stays in cache.
bool CholeskyLower(std::vector<double>& a, int64_t k) {
  for (int64_t j0 = 0; j0 < k; j0 += kTile) {
    const int64_t j1 = std::min(j0 + kTile, k);
    for (int64_t j = j0; j < j1; ++j) {  // the tile's own rows
      const double* rj = &a[j * k];
      const double d = SubtractProducts(a[j * k + j], rj, rj, j);
      if (!(d > 0.0)) return false;
      a[j * k + j] = std::sqrt(d);
      for (int64_t i = j + 1; i < j1; ++i) {
        a[i * k + j] = SubtractProducts(a[i * k + j], &a[i * k], rj, j) / a[j * k + j];
      }
    }
    for (int64_t i = j1; i < k; ++i) {  // the rows below it
      double* ri = &a[i * k];
      for (int64_t j = j0; j < j1; ++j) {
        ri[j] = SubtractProducts(ri[j], ri, &a[j * k], j) / a[j * k + j];
      }
    }
  }
  for (int64_t i = 0; i < k; ++i) {
    for (int64_t j = i + 1; j < k; ++j) a[i * k + j] = 0.0;
  }
  return true;
}

// (L L^T)^-1 from the lower factor L (torch.cholesky_inverse). Column j of
// L^-1 is kept as row j of t = (L^-1)^T, so that every sum reads rows.
std::vector<double> CholeskyInverse(const std::vector<double>& l, int64_t k) {
  std::vector<double> t(k * k, 0.0);  // (L^-1)^T, upper
  for (int64_t j = 0; j < k; ++j) {
    double* tj = &t[j * k];
    tj[j] = 1.0 / l[j * k + j];
    for (int64_t i = j + 1; i < k; ++i) tj[i] = -Dot(&l[i * k], tj, j, i) / l[i * k + i];
  }
  std::vector<double> out(k * k, 0.0);  // L^-T L^-1: out[i][j] = sum_{p >= i} t[i][p] t[j][p]
  for (int64_t i0 = 0; i0 < k; i0 += kTile) {
    const int64_t i1 = std::min(i0 + kTile, k);
    for (int64_t j = 0; j < i1; ++j) {
      for (int64_t i = std::max(i0, j); i < i1; ++i) {
        out[i * k + j] = out[j * k + i] = Dot(&t[i * k], &t[j * k], i, k);
      }
    }
  }
  return out;
}

// U, the upper Cholesky factor of H^-1 (H^-1 = U^T U), after gptq.py's
// dead-column and dampening steps on h (which it changes); nullopt-like
// empty vector when H is not positive definite.
std::vector<double> InverseFactor(std::vector<double>& h, int64_t k, double damp) {
  double mean = 0.0;
  for (int64_t i = 0; i < k; ++i) mean += h[i * k + i];
  mean /= static_cast<double>(k);
  for (int64_t i = 0; i < k; ++i) h[i * k + i] += damp * mean;
  if (!CholeskyLower(h, k)) return {};
  std::vector<double> hinv = CholeskyInverse(h, k);
  if (!CholeskyLower(hinv, k)) return {};
  std::vector<double> u(k * k, 0.0);
  for (int64_t i = 0; i < k; ++i) {
    for (int64_t j = i; j < k; ++j) u[i * k + j] = hinv[j * k + i];
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
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t j = i2; j < k; ++j) {
      double s = 0.0;
      for (int64_t i = 0; i < bs; ++i) s += err[r * bs + i] * u[(i1 + i) * k + j];
      wd[r * k + j] -= s;
    }
  }
}

}  // namespace

void GptqHessian::Add(std::span<const float> x, int64_t rows) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* v = x.data() + r * k_;
    for (int64_t i = 0; i < k_; ++i) {
      const double vi = v[i];
      double* row = h_.data() + i * k_;
      for (int64_t j = i; j < k_; ++j) row[j] += vi * v[j];
    }
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
