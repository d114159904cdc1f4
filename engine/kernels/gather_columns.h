// GatherColumns: y[r][j] = x[r][columns[j]] for r < rows and j < k, BF16
// activations (a copy: bit for bit). A 4-bit weight whose columns are stored
// in another order (GPTQ act order, sorted by group at load:
// Int4Matrix::columns) multiplies the activations gathered so:
// (stored W) y = W x.
// Reference: GatherColumnsRef (gather_columns_ref.cc). CUDA: GatherColumns
// (gather_columns.cu).
// Tested by tests/engine/kernels/gather_columns_ref_test.cc and
// tests/gpu/elementwise_test.cc.
#ifndef ONECARD_ENGINE_KERNELS_GATHER_COLUMNS_H_
#define ONECARD_ENGINE_KERNELS_GATHER_COLUMNS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "engine/kernels/stream.h"

namespace onecard::engine {

struct GatherColumnsParams {
  const void* x = nullptr;           // BF16 [rows, x_row_stride]
  int64_t x_row_stride = 0;          // elements, >= every columns[j] + 1
  const int32_t* columns = nullptr;  // [k], each in [0, x_row_stride)
  void* y = nullptr;                 // BF16 [rows, k]
  int32_t rows = 0;
  int64_t k = 0;
};

// The checks of both implementations (sizes and pointers; the reference also
// checks every column index, which the CUDA version cannot read).
absl::Status CheckGatherColumnsParams(const GatherColumnsParams& params, absl::string_view op);

absl::Status GatherColumnsRef(const GatherColumnsParams& params);
absl::Status GatherColumns(const GatherColumnsParams& params, cudaStream_t stream);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_KERNELS_GATHER_COLUMNS_H_
