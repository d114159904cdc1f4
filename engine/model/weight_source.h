// WeightSource: the tensors of a checkpoint, as views over mapped file bytes
// (GGUF or safetensors), with no copy in RAM. Tensor names are the loader's
// own (GGUF "blk.0.attn_q.weight", HF "model.layers.0.self_attn.q_proj.weight");
// engine/model/model_weights.h maps them to the model's parts.
#ifndef ONECARD_ENGINE_MODEL_WEIGHT_SOURCE_H_
#define ONECARD_ENGINE_MODEL_WEIGHT_SOURCE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "engine/common/dtype.h"

namespace onecard::engine {

// Shape is in row-major order, outermost first (the HF / PyTorch order):
// a Linear weight is [out_features, in_features]. GGUF's reversed ne[] order is
// turned around by the GGUF reader.
struct TensorView {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;  // points into the mapped file; not owned
  uint64_t size_bytes = 0;
  uint64_t file_offset = 0;       // absolute offset of data in its file
  std::string file_path;          // for error messages

  int64_t NumElements() const;
};

class WeightSource {
 public:
  virtual ~WeightSource() = default;
  // nullptr when absent.
  virtual const TensorView* Find(const std::string& name) const = 0;
  virtual std::vector<std::string> TensorNames() const = 0;
};

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_MODEL_WEIGHT_SOURCE_H_
