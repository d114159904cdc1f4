// Checkpoint: an opened model, whatever its format. OpenCheckpoint takes a
// .gguf file or an HF directory (config.json + model.safetensors or sharded
// model-*.safetensors with model.safetensors.index.json + tokenizer.json) and
// yields the ModelConfig, an HF folder's quantization config (hf_quant_config.h)
// and a WeightSource over the mapped tensor bytes. A path
// "synthetic:<shape>[:<weights>]" (synthetic_shapes.h) yields a synthetic
// model: its config and weight format, no file and no weights (the CUDA
// runner makes them on the device).
// Tested by tests/engine/model/checkpoint_test.cc.
#ifndef ONECARD_ENGINE_MODEL_CHECKPOINT_H_
#define ONECARD_ENGINE_MODEL_CHECKPOINT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/model/hf_quant_config.h"
#include "engine/model/model_config.h"
#include "engine/model/weight_source.h"

namespace onecard::engine {

class GgufFile;

enum class CheckpointFormat { kGguf, kSafetensors, kSynthetic };

struct Checkpoint {
  std::string path;
  CheckpointFormat format = CheckpointFormat::kGguf;
  ModelConfig config;
  HfQuantConfig quant;                    // method kNone for GGUF and unquantized folders
  std::unique_ptr<WeightSource> weights;  // a GgufFile for kGguf; null for kSynthetic
  // kSynthetic: the projections' format ("bf16", "int4", ...: weight_spec.h).
  std::string synthetic_weights;
  // HF directory files (empty for GGUF).
  std::string tokenizer_json_path;
  std::string tokenizer_config_path;

  // The GGUF file (tokenizer metadata lives there); nullptr for safetensors.
  const GgufFile* gguf() const;
};

absl::StatusOr<Checkpoint> OpenCheckpoint(const std::string& path);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_MODEL_CHECKPOINT_H_
