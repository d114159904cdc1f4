// Round-to-nearest 4-bit quantization as GPTQ quantizes, and GPTQ's v1
// checkpoint layout (the one hf_int4.h reads).
//
// The quantizer follows GPTQ's published code: IST-DASLab/gptq quant.py
// Quantizer.find_params (weight=True, per channel, no MSE search) and
// quantize(), as AutoGPTQ and GPTQModel keep them. For one group x of a row,
// in fp32:
//   xmin = min(min(x), 0), xmax = max(max(x), 0)
//   sym:  xmax = max(|xmin|, xmax); xmin = -xmax where xmin < 0
//         (a group with no negative value keeps xmin = 0: scale xmax / 15)
//   xmin = -1, xmax = 1 where both are 0
//   scale = (xmax - xmin) / 15
//   zero  = sym ? 8 : round(-xmin / scale)
//   code  = clamp(round(x / scale) + zero, 0, 15)      (round: half to even)
// The scales are stored as fp16 (GPTQ's pack: scales.half()). Its pack
// recomputes each code as round((Q + zero scale) / fp16(scale)) from the
// fake-quantized Q = scale (code - zero): the code itself whenever fp16(scale)
// is normal (relative error <= 2^-11, times at most 15, is under 1/2), which
// is what is stored here.
//
// The layout, for W [n, k] (n outputs, k inputs), groups of g columns,
// G = k / g (AutoGPTQ qlinear pack, 4 bits into int32):
//   qweight I32 [k / 8, n]: code (r, c) in bits 4 (c % 8) of word [c / 8][r]
//   qzeros  I32 [G, n / 8]: zero (r, group) in bits 4 (r % 8) of word
//           [group][r / 8], then v1's "zero - 1": each word minus 0x11111111
//           (GPTQModel's convert_gptq_v2_to_v1_format; a loader adds it back)
//   scales  F16 [G, n]
//   g_idx   I32 [k] = c / g (no act order)
// Tested by tests/engine/model/gptq_quantizer_test.cc.
#ifndef ONECARD_ENGINE_MODEL_GPTQ_QUANTIZER_H_
#define ONECARD_ENGINE_MODEL_GPTQ_QUANTIZER_H_

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"

namespace onecard::engine {

// W quantized, in the row-major logical form.
struct GptqQuantized {
  int64_t n = 0;
  int64_t k = 0;
  int32_t group = 0;           // columns a scale covers
  std::vector<uint8_t> codes;  // [n, k], 0..15
  std::vector<float> scales;   // [n, k / group], fp32 as the quantizer found them
  std::vector<uint8_t> zeros;  // [n, k / group], 0..15 (8 when symmetric)
  int64_t num_groups() const { return k / group; }
};

// GPTQ's scale and zero point of one group (the rules above).
struct GptqGroupParams {
  float scale = 1.0f;
  uint8_t zero = 8;
};
GptqGroupParams FindGptqGroupParams(std::span<const float> x, bool sym);

// The code of x under the params (the rule above).
uint8_t GptqCode(float x, const GptqGroupParams& params);

// RTN of W [n, k] (row-major fp32). InvalidArgument when w's size is not
// n k, or group <= 0 or does not divide k.
absl::StatusOr<GptqQuantized> QuantizeGptqRtn(std::span<const float> w, int64_t n, int64_t k,
                                              int32_t group, bool sym);

// The dequantized W [n, k]: fp16(scale) (code - zero), what a loader of
// the packed tensors reads.
std::vector<float> DequantizeGptq(const GptqQuantized& q);

// The four tensors of the v1 layout.
struct GptqV1Tensors {
  std::vector<int32_t> qweight;  // [k / 8, n]
  std::vector<int32_t> qzeros;   // [G, n / 8]
  std::vector<uint16_t> scales;  // [G, n] fp16 bits
  std::vector<int32_t> g_idx;    // [k]
};

// Packs q. InvalidArgument when n or k is not a multiple of 8.
absl::StatusOr<GptqV1Tensors> PackGptqV1(const GptqQuantized& q);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_MODEL_GPTQ_QUANTIZER_H_
