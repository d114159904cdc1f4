// What the cpu backend's forward pass can show of each decoder layer: the
// inputs of its linears and the residual stream entering it, for
// calibration (GPTQ's Hessians and each layer's inputs: onecard quantize)
// and tests. An observer sees them as they are computed, in layer order.
#ifndef ONECARD_ENGINE_RUNTIME_CPU_LINEAR_INPUTS_H_
#define ONECARD_ENGINE_RUNTIME_CPU_LINEAR_INPUTS_H_

#include <cstdint>
#include <functional>
#include <span>

namespace onecard::engine {

enum class LinearInput : uint8_t {
  kQkv,     // q, k and v projections' input  [rows, hidden]
  kO,       // o projection's input           [rows, num_heads * head_dim]
  kGateUp,  // gate and up projections' input [rows, hidden]
  kDown,    // down projection's input        [rows, intermediate]
  // The residual stream entering the layer [rows, hidden] (the embedding
  // for layer 0); layer == num_layers: the stream entering the final norm.
  kResidual,
};

// x: [rows, cols] row-major; valid during the call only.
using LinearInputObserver =
    std::function<void(int64_t layer, LinearInput input, std::span<const float> x, int32_t rows)>;

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_RUNTIME_CPU_LINEAR_INPUTS_H_
