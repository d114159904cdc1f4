// Where each layer's weights live and run when the model is larger than the
// device memory given to weights (issue 19's placement plan): on the card,
// streamed from pinned host memory through a ring of device buffers and
// computed on the card, or computed on the CPU from host memory. Decided by
// a cost model of one decode step of `batch` sequences, from rates measured
// at start:
//   a layer on the card or streamed: max(bytes / device read rate,
//                                        2 params batch / device FLOP rate)
//   a layer on the CPU:              max(bytes / host read rate,
//                                        2 params batch / host FLOP rate)
//   the step's chain (layers run in order): the card's layers, the streamed
//     ones and the LM head on the card, the CPU's span, plus one span
//     overhead (activations down and back) when the CPU computes any layer
//   the stream: streamed bytes / pinned host-to-device rate, running
//     beside the chain (the copy engine fills the ring ahead of compute)
//   step = max(chain, stream)
// The CPU's layers are the last ones (one span, so one activation round trip
// a step); the streamed ones are spread evenly among the card's, so that
// their copies overlap the card's compute in a long prefill.
// The card holds as many layers as fit beside the other weights (embeddings,
// LM head, norms) and, when any layer streams, the ring (at most
// max_device_layers when that is set); the rest is split
// between streaming and the CPU at the count that minimises the step at the
// expected batch. The predicted step is the floor of that split (perfect
// overlap at the measured rates).
// Plain C++. Tested by tests/gpu/placement_plan_test.cc (label unit).
#ifndef ONECARD_ENGINE_RUNTIME_CUDA_PLACEMENT_PLAN_H_
#define ONECARD_ENGINE_RUNTIME_CUDA_PLACEMENT_PLAN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/model_config.h"
#include "engine/runtime/cuda/weight_spec.h"

namespace onecard::engine {

enum class LayerPlace : uint8_t { kDevice, kStreamed, kCpu };

const char* LayerPlaceName(LayerPlace place);  // "device", "streamed", "cpu"

// Rates measured at start (bytes and FLOPs a second; seconds).
struct OffloadRates {
  double device_read_bytes_per_s = 0;  // HBM read (the copy ceiling)
  double device_flops_per_s = 0;       // the card's matrix rate for the weights' format
  double h2d_bytes_per_s = 0;          // pinned host -> device; 0: no streaming
  double host_read_bytes_per_s = 0;    // the CPU kernels reading weights; 0: no CPU compute
  double host_flops_per_s = 0;         // the CPU kernels' arithmetic rate
  double span_s = 0;                   // a CPU span's activations down and back, and its sync
};

struct PlacementInput {
  ModelConfig config;
  ModelWeightsSpec weights;         // empty layers: every projection BF16
  int64_t device_weight_bytes = 0;  // device memory for weights (and the ring)
  int64_t host_weight_bytes = 0;    // pinned host memory for offloaded weights
  int32_t ring_layers = 2;          // device buffers the streamed layers pass through
  int32_t expected_batch = 1;       // the batch the split is chosen for
  // At most this many layers on the card (the worker's --gpu-layers,
  // llama.cpp's -ngl); -1: as many as fit.
  int32_t max_device_layers = -1;
  OffloadRates rates;
};

// The predicted decode step of a placement at one batch size.
struct StepPrediction {
  int32_t batch = 1;
  double chain_s = 0;   // card + CPU span + its overhead, in order
  double device_s = 0;  // the card's part of the chain (its layers, streamed ones, LM head)
  double cpu_s = 0;     // the CPU's layers and the span overhead
  double stream_s = 0;  // streamed bytes over the host-to-device link
  double step_s = 0;    // max(chain_s, stream_s)
  double tokens_per_s() const { return step_s > 0 ? batch / step_s : 0; }
};

struct PlacementPlan {
  std::string model;
  std::vector<LayerPlace> layers;  // [num_layers]
  int32_t device_layers = 0, streamed_layers = 0, cpu_layers = 0;
  int64_t device_bytes = 0;    // the card's layers and the other weights
  int64_t other_bytes = 0;     // embeddings, LM head, final norm (on the card)
  int64_t ring_bytes = 0;      // min(ring_layers, streamed layers) x the largest layer
  int64_t streamed_bytes = 0;  // pinned host memory
  int64_t cpu_bytes = 0;       // host memory the CPU kernels read
  int64_t device_weight_bytes = 0;
  OffloadRates rates;
  StepPrediction batch1;
  StepPrediction expected;  // at PlacementInput::expected_batch

  bool offloads() const { return streamed_layers + cpu_layers > 0; }
  // Multi-line: the layers of each place and their bytes, the rates, and
  // the predicted step at batch 1 and the expected batch.
  std::string ToString() const;
};

// InvalidArgument for missing rates or sizes; ResourceExhausted naming
// --gpu-memory-budget when the card cannot hold the other weights (and a
// ring, when a layer must stream), or --cpu-memory-budget when host memory
// cannot hold the offloaded layers, with the bytes each needs.
absl::StatusOr<PlacementPlan> PlanPlacement(const PlacementInput& input);

// The predicted step of `layers` (a placement of input's model) at `batch`.
StepPrediction PredictStep(const PlacementInput& input, const std::vector<LayerPlace>& layers,
                           int32_t batch);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_RUNTIME_CUDA_PLACEMENT_PLAN_H_
