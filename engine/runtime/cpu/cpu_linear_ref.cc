// CpuLinearRef (see cpu_linear.h): the weights dequantized row by row by the
// GGUF dequantizers (CpuLinear::RowF32), the activations QuantizeRowsQ8's
// d * q (exact), every dot product summed in double.
// Tested by tests/engine/runtime/cpu/cpu_linear_test.cc.
#include <vector>

#include "engine/runtime/cpu/cpu_linear.h"

namespace onecard::engine {

void CpuLinearRef(const CpuLinear& w, const CpuLinearArgs& args) {
  const int64_t in = w.in_features(), out = w.out_features();
  std::vector<double> x(args.num_rows * in), x_hat(args.num_rows * in);
  for (int64_t i = 0; i < args.num_rows * in; ++i) x[i] = args.x[i];
  if (w.quantized()) {
    QuantizedRows xq;
    QuantizeRowsQ8(args.x, args.num_rows, in, &xq);
    for (int64_t i = 0; i < args.num_rows * in; ++i) {
      x_hat[i] = static_cast<double>(xq.d[i / 32]) * xq.q[i];
    }
  }
  std::vector<float> row(in);
  int64_t o = 0;
  for (const CpuWeightRows& run : w.runs()) {
    const std::vector<double>& xs = run.dtype == DType::kF32 ? x : x_hat;
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
