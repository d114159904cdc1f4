// HostLinearRef (see host_linear.h): the spec of HostLinearForward. Each
// weight row is decoded value by value from the device layout
// (Int4WeightRowRef: Int4CodePosition, Int4ScalePosition, Int4Value; BF16
// bits as they are), x is rounded to BF16 and gathered by the act-order
// column map, and every dot product is summed in double. Tested as the spec of
// tests/engine/runtime/cpu/host_linear_test.cc, which also checks it against the logical
// Int4Matrix.
#include <vector>

#include "engine/kernels/bf16.h"
#include "engine/kernels/int4_gemm.h"
#include "engine/runtime/cpu/host_linear.h"

namespace onecard::engine {
namespace {

// Row r of W in fp32, in stored column order.
void WeightRow(const HostWeight& w, int64_t r, std::vector<float>* row) {
  row->resize(w.k);
  if (w.format == HostWeight::Format::kBf16) {
    const auto* bits = static_cast<const uint16_t*>(w.data) + r * w.k;
    for (int64_t c = 0; c < w.k; ++c) (*row)[c] = Bf16ToFloat(bits[c]);
    return;
  }
  Int4WeightRowRef({.codes = w.data,
                    .scales = w.scales,
                    .offsets = w.offsets,
                    .n = w.n,
                    .k = w.k,
                    .group = w.group,
                    .offset_kind = w.offset_kind},
                   r, row);
}

}  // namespace

void HostLinearRef(const HostWeight& w, const float* x, int64_t rows, float* y) {
  std::vector<float> row;
  for (int64_t o = 0; o < w.n; ++o) {
    WeightRow(w, o, &row);
    for (int64_t r = 0; r < rows; ++r) {
      double acc = 0;
      for (int64_t c = 0; c < w.k; ++c) {
        const int64_t source = w.columns == nullptr ? c : w.columns[c];
        acc += static_cast<double>(row[c]) * Bf16ToFloat(FloatToBf16(x[r * w.k + source]));
      }
      y[r * w.n + o] = static_cast<float>(acc);
    }
  }
}

}  // namespace onecard::engine
