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
// Calibration also measures, a layer, how much FP8 rounding costs K
// (KvFp8KError): a layer over kKvFp8MaxKError keeps its K and V in BF16
// (KvScales::bf16_layers). Measured on Qwen2.5-Coder-1.5B (bench/results,
// fp8.md): its layer 0's K (k_proj bias, post-RoPE channels near +-300 that
// barely vary over tokens) was the whole of an FP8 cache's +12.8 % perplexity.
// Scales given by a checkpoint or a caller bring their own bf16_layers
// (none for a checkpoint's).
// Both runners (cpu, cuda) use them the same way; the source and the scales'
// range are printed with the memory plan.
// Tested by tests/engine/runtime/kv_scales_test.cc.
#ifndef ONECARD_ENGINE_RUNTIME_KV_SCALES_H_
#define ONECARD_ENGINE_RUNTIME_KV_SCALES_H_

#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/kv_cache/kv_layout.h"
#include "engine/model/checkpoint.h"
#include "engine/model/model_config.h"
#include "engine/runtime/model_runner.h"

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

// A layer whose KvFp8KError exceeds this keeps its KV cache in BF16: FP8's
// rounding of K is then over 5 % of K's variation across tokens, where an
// unbiased channel costs ~0.13 % (E4M3's relative rounding error, RMS ~3.6 %).
// Calibrated (bench/results/fp8.md): SmolLM2's layers measure 0.0014-0.0027;
// Qwen2.5-Coder-1.5B's 0.0012 to 0.018, and 2.2 for its layer 0, the one
// whose BF16 K brings an FP8 cache from +12.8 % to +0.22 % perplexity
// (layers 0 and 1 together: +0.32 %, no better).
inline constexpr float kKvFp8MaxKError = 0.05f;

// The FP8 rounding error of K relative to its variation over tokens:
// sum (k - RoundThroughE4m3(k, scale of its head))^2 / sum (k - mean of its
// channel over the tokens)^2, over k [tokens][num_kv_heads * head_dim]
// (fp32, after bias and RoPE) and k_scales [num_kv_heads]. Large where a
// channel sits far from zero and barely moves (a bias), so FP8's relative
// step swamps what distinguishes one key from another. 0 for no variation.
double KvFp8KError(std::span<const float> k, int64_t tokens, int64_t num_kv_heads, int64_t head_dim,
                   const float* k_scales);

struct KvScales {
  int64_t num_layers = 0;
  int64_t num_kv_heads = 0;
  std::vector<float> k;  // [num_layers * num_kv_heads], > 0
  std::vector<float> v;
  // "checkpoint" or "calibrated on N tokens".
  std::string source;
  // Per layer, 1 where the layer keeps its KV cache in BF16 (calibration:
  // KvFp8KError over kKvFp8MaxKError); empty: every layer FP8.
  std::vector<uint8_t> bf16_layers;
  // Per layer, calibration's KvFp8KError (empty otherwise), for Describe.
  std::vector<double> k_error;

  // Every scale 1: what a calibration pass starts from.
  static KvScales Ones(int64_t num_layers, int64_t num_kv_heads, std::string source);
  // Layer `layer`'s scales, pointing into k and v (host memory).
  KvFp8Scales Layer(int64_t layer) const {
    return {k.data() + layer * num_kv_heads, v.data() + layer * num_kv_heads};
  }
  // Sets layer `layer`'s scales from its maxima: amax[h] of K head h, then
  // amax[num_kv_heads + h] of V head h (KvScaleFromAmax).
  void SetLayerFromAmax(int64_t layer, std::span<const float> amax);
  // Records layer `layer`'s K error (KvFp8KError of the calibration's K
  // with the layer's scales) and marks the layer BF16 over kKvFp8MaxKError.
  void SetLayerKError(int64_t layer, std::span<const float> k, int64_t tokens, int64_t head_dim);
  bool LayerBf16(int64_t layer) const { return !bf16_layers.empty() && bf16_layers[layer] != 0; }
  // OK when these are the scales of a model of layers x kv_heads (k, v and,
  // when not empty, bf16_layers sized for it); else InvalidArgument naming
  // `field` (the option that gave them) and both shapes.
  absl::Status CheckFits(int64_t layers, int64_t kv_heads, absl::string_view field) const;
  int64_t NumBf16Layers() const;
  // One line for the plan printout: source, the K and V scales' range, and
  // the layers kept in BF16 (with their K errors).
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

// What one calibration step may hold.
struct KvCalibrationLimits {
  int64_t max_context = 0;                                   // a prompt is cut to it
  int64_t max_tokens = std::numeric_limits<int64_t>::max();  // tokens in the step
  int64_t max_seqs = std::numeric_limits<int64_t>::max();    // prompts in the step
  int64_t min_tokens = 1;                                    // a prompt cut shorter ends the batch
  bool want_logits = false;
};

// The calibration prompts as one prefill batch of a runner's pool: prompts
// in order, each cut to max_context and to what is left of max_tokens and of
// the pool (its blocks taken in order from block 0, free before any
// request), until max_seqs or a prompt left shorter than min_tokens. The
// chunks view `prompts` (keep them alive) and the block tables held here.
class KvCalibrationBatch {
 public:
  KvCalibrationBatch(const std::vector<std::vector<int32_t>>& prompts, const KvLayout& layout,
                     const KvCalibrationLimits& limits);
  KvCalibrationBatch(const KvCalibrationBatch&) = delete;  // chunks view tables_
  KvCalibrationBatch& operator=(const KvCalibrationBatch&) = delete;

  const BatchInput& batch() const { return batch_; }
  int64_t num_tokens() const { return num_tokens_; }
  // "calibrated on N tokens" (KvScales::source).
  std::string Source() const;

 private:
  std::vector<std::vector<int32_t>> tables_;
  BatchInput batch_;
  int64_t num_tokens_ = 0;
};

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_RUNTIME_KV_SCALES_H_
