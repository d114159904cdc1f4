// GPTQ calibration for `onecard quantize --method gptq`: the calibration
// text's first N tokens (encoded without special tokens), in sequences of
// `sequence_tokens`, run through the model on the cpu backend layer by layer
// as GPTQ does it: layer l's inputs come from the model whose layers before
// l are already quantized (their dequantized 4-bit weights), the layer's
// four linear inputs give each projection's H = 2 X^T X / N (q, k and v
// share one, gate and up another), and engine/model/gptq_solver.h quantizes
// the seven projections; their dequantized weights replace the originals
// before the next layer runs. Within a layer the projections see the
// unquantized layer's inputs (GPTQ's true_sequential off).
// The residual stream entering the next layer is kept ([tokens, hidden]
// fp32), so each layer runs twice in all (once for its Hessians, once
// quantized for the next layer's stream): the cost is linear in the layers.
// Tested by tests/tools/onecard/quantize_gptq_test.cc.
#ifndef ONECARD_TOOLS_ONECARD_QUANTIZE_GPTQ_H_
#define ONECARD_TOOLS_ONECARD_QUANTIZE_GPTQ_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/checkpoint.h"
#include "engine/model/gptq_solver.h"
#include "engine/model/layer_tensors.h"
#include "engine/model/model_weights.h"

namespace onecard::tools {

struct GptqCalibrationOptions {
  std::string text_path;
  int64_t num_tokens = 2048;      // the text's first N tokens
  int32_t sequence_tokens = 512;  // tokens a calibration sequence holds
  double damp = 0.01;
  int32_t group_size = 128;  // -1: one group a row
  bool sym = true;
  int32_t num_threads = 0;  // cpu backend; 0 = all cores
};

// One projection of a layer, quantized, with the H it was quantized under.
struct GptqProjection {
  engine::TensorPart part;
  engine::GptqQuantized quantized;
  std::shared_ptr<const std::vector<double>> hessian;  // [k, k]
};

class GptqLayerQuantizer {
 public:
  // Reads the text and the model's fp32 weights. InvalidArgument when the
  // text has fewer than 2 tokens.
  static absl::StatusOr<std::unique_ptr<GptqLayerQuantizer>> Create(
      const engine::Checkpoint& checkpoint, const GptqCalibrationOptions& options);

  // Quantizes layer `layer` (in order 0, 1, ...; FailedPrecondition
  // otherwise): the seven projections in TensorPart order q, k, v, o, gate,
  // up, down.
  absl::StatusOr<std::vector<GptqProjection>> QuantizeLayer(int64_t layer);

  int64_t num_calibration_tokens() const { return static_cast<int64_t>(tokens_.size()); }

 private:
  GptqLayerQuantizer(const engine::ModelConfig& config, GptqCalibrationOptions options,
                     engine::ModelWeightsF32 weights, std::vector<int32_t> tokens);
  // Runs layer `layer` alone (layer 0 on the tokens, a later one on
  // stream_), adding its linear inputs to *hessians (LinearInput order) when
  // set; returns the stream leaving it [tokens, hidden].
  absl::StatusOr<std::vector<float>> RunLayer(int64_t layer,
                                              std::vector<engine::GptqHessian>* hessians) const;

  const engine::ModelConfig config_;
  const GptqCalibrationOptions options_;
  engine::ModelWeightsF32 weights_;  // layers before the next one: dequantized 4-bit
  const std::vector<int32_t> tokens_;
  int64_t next_layer_ = 0;
  std::vector<float> stream_;  // [tokens, hidden]: the residual stream entering next_layer_
};

}  // namespace onecard::tools

#endif  // ONECARD_TOOLS_ONECARD_QUANTIZE_GPTQ_H_
