// The cpu backend: a clear, multi-threaded implementation of the decoder
// (Llama / Qwen2 / Mistral) over the paged KV cache, built from the kernels'
// plain references (engine/kernels/*_ref.cc) and the CpuLinear products
// (cpu_linear.h). It is the CI backend and, with CpuWeightFormat::kF32 (every
// weight in fp32), the correctness oracle of the project; kNative (the
// default) holds a GGUF file's quantized weights as stored. Its math is
// batch-invariant: a sequence's logits do not depend on which other
// sequences share the batch.
// Tested by tests/engine/runtime/cpu/*_test.cc against HF goldens (kF32) and
// kNative against kF32.
#ifndef ONECARD_ENGINE_RUNTIME_CPU_CPU_MODEL_RUNNER_H_
#define ONECARD_ENGINE_RUNTIME_CPU_CPU_MODEL_RUNNER_H_

#include <cstdint>
#include <memory>
#include <optional>

#include "absl/status/statusor.h"
#include "engine/model/checkpoint.h"
#include "engine/model/model_weights.h"
#include "engine/runtime/cpu/cpu_weights.h"
#include "engine/runtime/cpu/linear_inputs.h"
#include "engine/runtime/kv_scales.h"
#include "engine/runtime/model_runner.h"

namespace onecard::engine {

struct CpuRunnerOptions {
  int32_t num_threads = 0;  // 0 = std::thread::hardware_concurrency()
  int32_t kv_block_size = 16;
  int64_t num_kv_blocks = 0;  // 0 = from kv_cache_bytes
  int64_t kv_cache_bytes = 256ll << 20;
  // kAuto keeps K and V in fp32; kBf16 / kFp8E4m3 round them to that format
  // as they are written (model_runner.h), the storage staying fp32. FP8's
  // scales a layer and kv head (ModelRunner::kv_scales()) are the
  // checkpoint's (ReadCheckpointKvScales) when it has them, else calibrated
  // at creation: one batch of KvCalibrationPrompts (at most
  // kKvCalibrationTokens, each prompt cut to the model's context and the
  // prompts to the pool's blocks, taken in order from block 0; they are free
  // again afterwards) through the model as kv_scales.h describes.
  KvCacheDtype kv_cache_dtype = KvCacheDtype::kAuto;
  // kFp8E4m3: these scales (and their bf16_layers) instead of the
  // checkpoint's or calibration's, e.g. another runner's kv_scales();
  // InvalidArgument naming the field when their layers or kv heads are not
  // the model's.
  std::optional<KvScales> kv_scales;
  // How CreateCpuModelRunner loads the checkpoint's weights (model_runner.h;
  // LoadCpuWeights). Weights given in memory are fp32 whatever it says.
  CpuWeightFormat weight_format = CpuWeightFormat::kNative;
  // Sees every layer's linear inputs and residual stream (calibration:
  // onecard quantize), the FP8 KV calibration pass's too; none when empty.
  LinearInputObserver linear_input_observer;
};

// The checkpoint's weights loaded in options.weight_format (LoadCpuWeights),
// then as CreateCpuModelRunnerFromCpuWeights with the checkpoint.
absl::StatusOr<std::unique_ptr<ModelRunner>> CreateCpuModelRunner(const Checkpoint& checkpoint,
                                                                  const CpuRunnerOptions& options);

// The same from weights already in memory (synthetic models, tests). The
// config's shapes are checked (InvalidArgument naming the field), then every
// weight's size against them (naming the layer and part). The KV pool gets
// options.num_kv_blocks blocks, or as many as fit in options.kv_cache_bytes
// (K and V of every layer); fewer than one block is an InvalidArgument, a
// pool larger than the host's memory (or one whose allocation fails)
// ResourceExhausted.
// Forward is serialized: concurrent calls take turns.
absl::StatusOr<std::unique_ptr<ModelRunner>> CreateCpuModelRunnerFromWeights(
    const ModelConfig& config, ModelWeightsF32 weights, const CpuRunnerOptions& options);

// The same from weights already in the backend's form (LoadCpuWeights,
// PackCpuWeights). `checkpoint`, when set, is where an fp8 KV cache's scales
// and its calibration prompts' tokenizer come from; null: calibrated on
// seeded token ids. Logs one line: the weights' format and bytes, the
// kernels' instruction set, the KV pool, its dtype and the threads; with
// fp8, a second: KvScales::Describe() and the calibration's time.
absl::StatusOr<std::unique_ptr<ModelRunner>> CreateCpuModelRunnerFromCpuWeights(
    const ModelConfig& config, CpuWeights weights, const CpuRunnerOptions& options,
    const Checkpoint* checkpoint = nullptr);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_RUNTIME_CPU_CPU_MODEL_RUNNER_H_
