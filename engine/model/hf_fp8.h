// HF FP8 E4M3 projections: a module's ".weight" stored as F8_E4M3 [n, k]
// (one byte a value, engine/common/fp8.h) with fp32-convertible scales beside
// it, found through the checkpoint's quantization config (hf_quant_config.h)
// and read into an Fp8Matrix (engine/kernels/fp8_weight.h) without
// re-rounding. For module m, W [n, k]:
//   compressed-tensors float-quantized, fbgemm_fp8, AutoFP8 (fp8 without a
//     block size): m.weight_scale, per tensor: a scalar [] or [1]; per
//     channel: [n, 1] (or [n]); per 128 x 128 block: [ceil(n / 128),
//     ceil(k / 128)].
//   fp8 with weight_block_size [128, 128] (transformers' FineGrainedFP8,
//     DeepSeek-V3): m.weight_scale_inv [ceil(n / 128), ceil(k / 128)].
// In every layout the stored scale multiplies the code: W[r][c] =
// E4m3ToFloat(code) * scale. weight_scale_inv is a multiplier too, despite
// its name: DeepSeek-V3's inference/kernel.py weight_dequant computes
// y = x * s with s the "_scale_inv" tensor (fp8_cast_bf16.py), and
// transformers' FP8Linear (integrations/finegrained_fp8.py) passes
// weight_scale_inv as the weight scale Bs that w8a8_block_fp8_matmul
// multiplies into the accumulator.
// Scales are F32, BF16 or F16 in the file and read exactly as fp32. A
// per-tensor scale becomes Fp8Scales::kRow (the scale repeated), a
// per-channel one kRow, a block one kBlock128.
// Refused with InvalidArgument naming the file, the tensor and what is
// wrong: an F8_E4M3 weight that the config does not make FP8 (no config, a
// 4-bit config, an ignored module, a compressed-tensors group that is not
// float 8-bit), a missing scales tensor, scales of another dtype or shape
// than the config's granularity gives, a NaN code, a scale that is not
// finite and positive.
// Tested by tests/engine/model/hf_fp8_test.cc (against the dequantizations
// in tests/golden/hf_fp8/, made with ml_dtypes) and hf_fp8_bad_input_test.cc.
#ifndef ONECARD_ENGINE_MODEL_HF_FP8_H_
#define ONECARD_ENGINE_MODEL_HF_FP8_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "engine/kernels/fp8_weight.h"
#include "engine/model/checkpoint.h"

namespace onecard::engine {

// One module's FP8 tensors, dtypes and shapes checked.
struct HfFp8Tensors {
  HfQuantMethod method = HfQuantMethod::kNone;
  std::string module;                  // "model.layers.0.self_attn.q_proj"
  const TensorView* weight = nullptr;  // F8_E4M3 [n, k]
  const TensorView* scale = nullptr;   // weight_scale / weight_scale_inv
  const char* scale_field = "";        // "weight_scale" or "weight_scale_inv"
  int64_t n = 0;                       // [n, k]
  int64_t k = 0;
  Fp8Scheme scheme;  // the config's, for this module
  // The Fp8Matrix's scale kind: kRow (per tensor or channel) or kBlock128.
  Fp8Scales kind() const {
    return scheme.weights == Fp8WeightScales::kBlock128 ? Fp8Scales::kBlock128 : Fp8Scales::kRow;
  }
};

// Module `module`'s FP8 tensors for W [n, k] when its ".weight" is F8_E4M3;
// nullopt when it is not (or is absent).
absl::StatusOr<std::optional<HfFp8Tensors>> FindHfFp8(const Checkpoint& checkpoint,
                                                      const std::string& module, int64_t n,
                                                      int64_t k);

// The codes as stored and the scales in fp32, checked (Fp8Matrix::Validate,
// errors naming the file and the tensor).
absl::StatusOr<Fp8Matrix> ReadHfFp8(const HfFp8Tensors& tensors);

// The scales tensor of an FP8 module (".weight_scale" or
// ".weight_scale_inv" beside an F8_E4M3 ".weight"): its module; nullopt for
// another tensor.
std::optional<std::string> HfFp8ScaleModuleOf(const Checkpoint& checkpoint,
                                              const std::string& name);

// The format of `module`'s FP8 weight as the config gives it, for inspect:
// "compressed-tensors e4m3 channel", "fp8 e4m3 block128", "fbgemm_fp8 e4m3
// channel"; "e4m3 (not in the config)" when the config gives it none.
std::string HfFp8FormatName(const HfQuantConfig& config, const std::string& module);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_MODEL_HF_FP8_H_
