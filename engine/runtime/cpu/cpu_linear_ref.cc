// CpuLinearRef (see cpu_linear.h): the weights dequantized row by row by the
// GGUF dequantizers (CpuLinear::RowF32), the activations as each run's kernel
// takes them (QuantizeRowsQ8's d * q, or QuantizeRowsQ8KRef's for the K-quant
// runs; exact), every dot product summed in double. And QuantizeRowsQ8KRef,
// the spec of QuantizeRowsQ8K.
// Tested by tests/engine/runtime/cpu/cpu_linear_test.cc.
#include <algorithm>
#include <cassert>
#include <cmath>
#include <vector>

#include "engine/runtime/cpu/cpu_linear.h"

namespace onecard::engine {

void QuantizeRowsQ8KRef(const float* x, int64_t rows, int64_t cols, QuantizedRowsK* out) {
  assert(cols % 256 == 0 && "QuantizeRowsQ8KRef: cols must be a multiple of 256");
  out->rows = rows;
  out->cols = cols;
  out->q.assign(rows * cols, 0);
  out->d.assign(rows * cols / 256, 0.0f);
  out->sum16.assign(rows * cols / 16, 0);
  for (int64_t b = 0; b < rows * cols / 256; ++b) {
    float amax = 0.0f;
    for (int64_t i = 0; i < 256; ++i) amax = std::max(amax, std::fabs(x[b * 256 + i]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    out->d[b] = d;
    for (int64_t i = 0; i < 256; ++i) {
      const float v = std::nearbyint(x[b * 256 + i] * id);
      const int8_t code = static_cast<int8_t>(std::min(127.0f, std::max(-127.0f, v)));
      out->q[b * 256 + i] = code;
      out->sum16[(b * 256 + i) / 16] = static_cast<int16_t>(out->sum16[(b * 256 + i) / 16] + code);
    }
  }
}

void CpuLinearRef(const CpuLinear& w, const CpuLinearArgs& args) {
  const int64_t in = w.in_features(), out = w.out_features();
  std::vector<double> x(args.num_rows * in), x_hat(args.num_rows * in), x_hat_k;
  for (int64_t i = 0; i < args.num_rows * in; ++i) x[i] = args.x[i];
  if (w.quantized()) {
    QuantizedRows xq;
    QuantizeRowsQ8(args.x, args.num_rows, in, &xq);
    for (int64_t i = 0; i < args.num_rows * in; ++i) {
      x_hat[i] = static_cast<double>(xq.d[i / 32]) * xq.q[i];
    }
  }
  if (std::any_of(w.runs().begin(), w.runs().end(),
                  [](const CpuWeightRows& r) { return IsKQuant(r.dtype); })) {
    QuantizedRowsK xk;
    QuantizeRowsQ8KRef(args.x, args.num_rows, in, &xk);
    x_hat_k.resize(args.num_rows * in);
    for (int64_t i = 0; i < args.num_rows * in; ++i) {
      x_hat_k[i] = static_cast<double>(xk.d[i / 256]) * xk.q[i];
    }
  }
  std::vector<float> row(in);
  int64_t o = 0;
  for (const CpuWeightRows& run : w.runs()) {
    const std::vector<double>& xs = run.dtype == DType::kF32 ? x
                                    : IsKQuant(run.dtype)    ? x_hat_k
                                                             : x_hat;
    for (int64_t k = 0; k < run.rows; ++k, ++o) {
      w.RowF32(o, row.data());
      for (int64_t r = 0; r < args.num_rows; ++r) {
        double sum = args.bias != nullptr ? args.bias[o] : 0.0;
        for (int64_t c = 0; c < in; ++c) sum += static_cast<double>(row[c]) * xs[r * in + c];
        args.y[r * out + o] = static_cast<float>(sum);
      }
    }
  }
}

}  // namespace onecard::engine
