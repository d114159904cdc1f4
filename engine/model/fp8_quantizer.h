// Per-output-channel FP8 E4M3 quantization of a weight, as onecard quantize
// --format fp8 writes it (compressed-tensors float-quantized, strategy
// channel: llm-compressor's FP8_DYNAMIC weights): for each row r of W [n, k],
// scale_r = max_c |W[r][c]| / 448 in fp32, and code = FloatToE4m3(W[r][c] /
// scale_r) (engine/common/fp8.h: nearest even, saturating at 448, which
// |W / scale| reaches at most by an fp32 rounding). A row of zeros gets
// scale 1 (its codes are 0); a scale below the smallest normal fp32 is
// raised to it, so every scale is finite and positive. Tested by
// tests/engine/model/fp8_quantizer_test.cc and, against ml_dtypes' codes,
// tests/tools/onecard/quantize_command_test.cc.
#ifndef ONECARD_ENGINE_MODEL_FP8_QUANTIZER_H_
#define ONECARD_ENGINE_MODEL_FP8_QUANTIZER_H_

#include <cstdint>
#include <span>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/kernels/fp8_weight.h"

namespace onecard::engine {

// W [n, k], row-major, to an Fp8Matrix with kRow scales. InvalidArgument
// naming `name` for a size that is not n * k or a value that is not finite.
absl::StatusOr<Fp8Matrix> QuantizeFp8Rows(std::span<const float> w, int64_t n, int64_t k,
                                          absl::string_view name);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_MODEL_FP8_QUANTIZER_H_
