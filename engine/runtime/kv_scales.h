// The scales of an FP8 E4M3 KV cache (KvFp8Scales, engine/kv_cache/kv_layout.h)
// for every layer of a model, and where they come from:
//   - the checkpoint, when it has them: per layer
//     model.layers.{i}.self_attn.k_scale and .v_scale (or one .kv_scale for
//     both), each a scalar, a [1] or a [num_kv_heads] tensor (what
//     llm-compressor's and vLLM's FP8 KV checkpoints hold);
//   - else calibration at start: the runner runs KvCalibrationPrompts as one
//     batch through the model, takes each layer's largest |K| (after the
//     bias and RoPE) and |V| a kv head, and sets that layer's scales from it
//     (KvScaleFromAmax) before it writes the layer's K/V, so the calibration
//     pass is itself an FP8-KV forward pass with the final scales.
// Both runners (cpu, cuda) use them the same way; the source and the scales'
// range are printed with the memory plan.
// Tested by tests/engine/runtime/kv_scales_test.cc.
#ifndef ONECARD_ENGINE_RUNTIME_KV_SCALES_H_
#define ONECARD_ENGINE_RUNTIME_KV_SCALES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/kv_cache/kv_layout.h"
#include "engine/model/checkpoint.h"
#include "engine/model/model_config.h"

namespace onecard::engine {

// Calibrated scales leave this factor of headroom over the largest value
// seen: scale = amax * kKvScaleHeadroom / 448, so a later token up to twice
// the calibration's largest is still represented (E4M3's relative precision
// is the same across its range; only values below 2^-6 * scale lose bits).
inline constexpr float kKvScaleHeadroom = 2.0f;

// How many tokens of KvCalibrationPrompts the runners calibrate on, at most.
inline constexpr int32_t kKvCalibrationTokens = 1024;

// amax * kKvScaleHeadroom / 448 (at least FLT_MIN, so never 0); 1 when amax
// is 0 (a head that only held zeros) or not finite.
float KvScaleFromAmax(float amax);

struct KvScales {
  int64_t num_layers = 0;
  int64_t num_kv_heads = 0;
  std::vector<float> k;  // [num_layers * num_kv_heads], > 0
  std::vector<float> v;
  // "checkpoint" or "calibrated on N tokens".
  std::string source;

  // Layer `layer`'s scales, pointing into k and v (host memory).
  KvFp8Scales Layer(int64_t layer) const {
    return {k.data() + layer * num_kv_heads, v.data() + layer * num_kv_heads};
  }
  // One line for the plan printout: source, and the K and V scales' range.
  std::string Describe() const;
};

// The checkpoint's scales; nullopt when it has none (and for GGUF files).
// A layer's .kv_scale stands in for a missing .k_scale or .v_scale; a scalar
// or [1] tensor applies to every kv head. InvalidArgument naming the tensor
// when some layers have them and others do not, a layer has one of k_scale
// and v_scale only, or a scale has the wrong shape, dtype (F32, BF16, F16
// are read), or a value that is not finite and positive.
absl::StatusOr<std::optional<KvScales>> ReadCheckpointKvScales(const Checkpoint& checkpoint);

// The calibration prompts as token ids: a fixed text (English prose, code,
// numbers, a chat turn) through the checkpoint's tokenizer, split into
// prompts; seeded ids below config.vocab_size when `checkpoint` is null (the
// synthetic models). At most max_tokens tokens in all (>= 1, else
// InvalidArgument); ids the config's vocabulary lacks are left out; the
// tokenizer's errors are returned as they are.
absl::StatusOr<std::vector<std::vector<int32_t>>> KvCalibrationPrompts(
    const Checkpoint* checkpoint, const ModelConfig& config,
    int32_t max_tokens = kKvCalibrationTokens);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_RUNTIME_KV_SCALES_H_
