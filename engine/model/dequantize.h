// Dequantization of whole tensors to fp32 on the host, over the block layouts
// of quant_blocks.h. DequantizeToF32 (declared in model_weights.h) allocates;
// DequantizeInto writes into a caller's buffer. Tested by
// tests/engine/model/dequantize_test.cc against the gguf package's dequantizers.
#ifndef ONECARD_ENGINE_MODEL_DEQUANTIZE_H_
#define ONECARD_ENGINE_MODEL_DEQUANTIZE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "engine/model/weight_source.h"

namespace onecard::engine {

// True for the dtypes DequantizeInto handles: F32, F16, BF16, Q8_0, Q4_0,
// Q4_1, Q4_K, Q5_K, Q6_K.
bool IsDequantizable(DType dtype);

// Writes tensor.NumElements() floats, row-major, to out // [numel]
// InvalidArgument (naming the tensor and file) when size_bytes does not match
// the shape, or the row length is not a multiple of the block size;
// Unimplemented for integer dtypes.
absl::Status DequantizeInto(const TensorView& tensor, float* out);

// The same on raw data, unchecked: numel values of a dequantizable `dtype`
// (numel a multiple of its block) from `data` to out.
void DequantizeElements(DType dtype, const uint8_t* data, int64_t numel, float* out);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_MODEL_DEQUANTIZE_H_
