// FP8 E4M3 weights (issue 18): Fp8WeightView, where the CUDA kernels read
// one, and Fp8Matrix, the host form every source turns into (compressed-tensors
// float-quantized, Hugging Face fp8 / fbgemm_fp8 checkpoints, onecard
// quantize --format fp8). W [n, k] is stored row-major as E4M3 codes
// (engine/common/fp8.h), one byte a value, with fp32 scales:
//   kRow:      one scale a row, scales[r] (per-tensor sources repeat theirs);
//   kBlock128: one scale a 128 x 128 block (DeepSeek-style checkpoints),
//              scales[(r / 128) * ceil(k / 128) + c / 128].
// The value of W[r][c] is E4m3ToFloat(codes[r * k + c]) * scale. Fused
// projections (qkv, gate_up) stack their parts' rows as the BF16 weights do
// ([q; k; v], [gate; up]). Plain C++. Tested by
// tests/engine/kernels/fp8_weight_test.cc.
#ifndef ONECARD_ENGINE_KERNELS_FP8_WEIGHT_H_
#define ONECARD_ENGINE_KERNELS_FP8_WEIGHT_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "engine/common/host_device.h"

namespace onecard::engine {

enum class Fp8Scales : uint8_t { kRow, kBlock128 };
inline constexpr int64_t kFp8Block = 128;

// "row" or "block128".
absl::string_view Fp8ScalesName(Fp8Scales kind);

// Scales a [n, k] weight of this kind holds: n, or ceil(n / 128) * ceil(k / 128).
int64_t Fp8ScaleCount(int64_t n, int64_t k, Fp8Scales kind);

// The index in `scales` of W[r][c]'s scale (the layouts above), on the host
// and the device.
ONECARD_HOST_DEVICE inline int64_t Fp8ScaleIndex(int64_t r, int64_t c, int64_t k, Fp8Scales kind) {
  if (kind == Fp8Scales::kRow) return r;
  return (r / kFp8Block) * ((k + kFp8Block - 1) / kFp8Block) + c / kFp8Block;
}

// Device pointers of a weight (codes [n, k], scales as above).
struct Fp8WeightView {
  const void* codes = nullptr;
  const float* scales = nullptr;
  int64_t n = 0;
  int64_t k = 0;
  Fp8Scales scales_kind = Fp8Scales::kRow;
};

struct Fp8Matrix {
  int64_t n = 0;
  int64_t k = 0;
  Fp8Scales scales_kind = Fp8Scales::kRow;
  std::vector<uint8_t> codes;  // [n, k] E4M3
  std::vector<float> scales;   // Fp8ScaleCount(n, k, scales_kind)
  // InvalidArgument naming `name` and what is wrong: a shape that is not
  // positive, arrays of the wrong size, a NaN code (index given), a scale
  // that is not finite and positive (index given).
  absl::Status Validate(absl::string_view name) const;
  float Scale(int64_t r, int64_t c) const;
  float Value(int64_t r, int64_t c) const;  // E4m3ToFloat(code) * Scale(r, c)
};

// W [n, k] in fp32, row-major.
std::vector<float> DequantizeFp8(const Fp8Matrix& m);

// Rows of `parts` stacked in order ([q; k; v], [gate; up]): the parts must
// share k and the scale kind, and for kBlock128 every part but the last must
// have n % 128 == 0 (blocks never straddle parts). InvalidArgument naming
// `name` otherwise.
absl::Status StackFp8Rows(const std::vector<const Fp8Matrix*>& parts, absl::string_view name,
                          Fp8Matrix* out);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_KERNELS_FP8_WEIGHT_H_
