// Int4DequantizeBf16: a 4-bit weight (int4_layout.h) to BF16 [n, k], each
// value computed in fp32 (Int4Value: s * (q - 8), s * (q - z), s * q + m) and
// rounded to nearest even. Steps of more rows than Int4Gemm takes (prefill)
// run cuBLAS on this. gate_up: the weight's rows are gate and up interleaved
// by 8 (InterleavedGateUpRows); the output is [gate rows; up rows], the order
// the BF16 path and SiluMul read. columns (act order): stored column j is
// output column columns[j] (Int4Matrix::columns), so the output is W in the
// source's column order, for cuBLAS with the activations as they are.
// Reference: Int4DequantizeBf16Ref (int4_dequant_ref.cc). CUDA: int4_dequant.cu
// (a warp a 16 x 64 tile). Outputs are equal bit for bit.
// Tested by tests/gpu/int4_gemm_test.cc (Int4DequantTest).
#ifndef ONECARD_ENGINE_KERNELS_INT4_DEQUANT_H_
#define ONECARD_ENGINE_KERNELS_INT4_DEQUANT_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "engine/common/host_device.h"
#include "engine/kernels/int4_gemm.h"
#include "engine/kernels/stream.h"

namespace onecard::engine {

struct Int4DequantParams {
  Int4WeightView w;
  void* out = nullptr;               // BF16 [w.n, w.k]
  bool gate_up = false;              // de-interleave gate and up rows (above)
  const int32_t* columns = nullptr;  // [w.k] or null: where stored columns go (above)
};

// Checks shared by both implementations.
absl::Status CheckInt4DequantParams(const Int4DequantParams& params, absl::string_view op);

// The output row of weight row r.
ONECARD_HOST_DEVICE inline int64_t Int4DequantOutputRow(int64_t r, int64_t n, bool gate_up) {
  if (!gate_up) return r;
  const int64_t b = r / 16, j = r % 16;
  return j < 8 ? 8 * b + j : n / 2 + 8 * b + j - 8;
}

absl::Status Int4DequantizeBf16Ref(const Int4DequantParams& params);
absl::Status Int4DequantizeBf16(const Int4DequantParams& params, cudaStream_t stream);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_KERNELS_INT4_DEQUANT_H_
