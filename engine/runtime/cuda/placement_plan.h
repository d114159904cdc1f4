// Where each layer's weights live and run when the model is larger than the
// device memory given to weights (issue 19's placement plan): on the card, or
// offloaded to pinned host memory, where each offloaded layer is either
// streamed through a ring of device buffers and computed on the card, or
// computed on the CPU from host memory. Decided by a cost model of one decode
// step of `batch` sequences, from rates measured at start:
//   a layer on the card or streamed: max(bytes / device read rate,
//                                        2 params batch / device FLOP rate)
//   a layer on the CPU:              max(bytes / host read rate,
//                                        2 params batch / host FLOP rate)
//   the step's chain (layers run in order): the card's layers, the streamed
//     ones and the LM head on the card, the CPU's layers, plus one span
//     overhead (activations down and back) per run of consecutive CPU layers
//   the stream: streamed bytes / pinned host-to-device rate, running
//     beside the chain (the copy engine fills the ring while the card and
//     the CPU compute)
//   with layers both on the CPU and streamed, the host read and upload rates
//     measured with both running at once (they share the host's memory)
//   step = max(chain, stream)
// Once a layer leaves the card, a model whose embeddings are not tied to its
// LM head keeps the token embedding table in pinned host memory too
// (llama.cpp's place for it):
// a step reads only its tokens' rows, which the embedding kernel gathers
// over the link (a 16 KB row a token for a 70B: microseconds), and the
// card holds more layers in the table's place (2 GiB for Llama 3 70B's).
// The offloaded layers are spread evenly among the card's, and the CPU's
// evenly among the offloaded: while the CPU computes a layer the copy engine
// fills the ring with the next streamed ones, so the two overlap with a ring
// of a few layers (a CPU span at the end would leave the link idle through
// it), and in a long prefill the copies overlap the card's compute.
// Steps of more than cpu_max_rows rows stream the CPU's layers too (the CPU's
// arithmetic rate is the bound there: the same layers, computed on the card),
// so every offloaded layer passes through the ring, which the card holds
// beside the other weights (embeddings, LM head, norms) and as many layers as
// fit (at most max_device_layers when that is set). The CPU's share is the
// count that minimises the batch-1 step. The predicted step is the floor of
// that split (perfect overlap at the measured rates).
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

// The most rows of a step the CPU computes its layers for (HostLinear's fast
// path); larger steps stream them.
inline constexpr int32_t kCpuMaxRows = 8;

const char* LayerPlaceName(LayerPlace place);  // "device", "streamed", "cpu"

// Rates measured at start (bytes and FLOPs a second; seconds).
struct OffloadRates {
  double device_read_bytes_per_s = 0;  // HBM read (the copy ceiling)
  double device_flops_per_s = 0;       // the card's matrix rate for the weights' format
  double h2d_bytes_per_s = 0;          // pinned host -> device; 0: no streaming
  double host_read_bytes_per_s = 0;    // the CPU kernels reading weights; 0: no CPU compute
  double host_flops_per_s = 0;         // the CPU kernels' arithmetic rate
  // The CPU kernels' weight rate at 2 rows: a bound for every step of 2 or
  // more rows (AMX's tile kernels take nearly the same time at 2 as at 8
  // rows, which host_flops_per_s alone would scale with the rows); 0: none.
  double host_rows2_bytes_per_s = 0;
  double span_s = 0;  // a CPU span's activations down and back, and its sync
  // The two host-memory readers at once (the CPU kernels and the pinned
  // uploads share the host's memory); 0: as alone. A step with CPU and
  // streamed layers is predicted at these.
  double host_read_shared_bytes_per_s = 0;
  double h2d_shared_bytes_per_s = 0;
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
  // This many of the offloaded layers (at most all) on the CPU, computed in
  // every step of up to kCpuMaxRows rows; -1: the cost model's choice.
  int32_t cpu_layers = -1;
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
  int64_t device_bytes = 0;          // the card's layers and the other weights
  int64_t other_bytes = 0;           // LM head, final norm and the embeddings held on the card
  int64_t host_embedding_bytes = 0;  // the embedding table in pinned host memory (untied)
  int64_t ring_bytes = 0;            // min(ring_layers, offloaded layers) x the largest layer
  int64_t streamed_bytes = 0;        // pinned host memory
  int64_t cpu_bytes = 0;             // host memory the CPU kernels read
  int64_t device_weight_bytes = 0;
  // Steps of at most this many rows leave the CPU layers to the CPU (those
  // where that is predicted faster than streaming them; 0 without CPU layers).
  int32_t cpu_max_rows = 0;
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
// cannot hold the offloaded layers and the embedding table, with the bytes
// each needs.
absl::StatusOr<PlacementPlan> PlanPlacement(const PlacementInput& input);

// The predicted step of `layers` (a placement of input's model) at `batch`.
StepPrediction PredictStep(const PlacementInput& input, const std::vector<LayerPlace>& layers,
                           int32_t batch);
// A placement of layers of layer_bytes: the bytes of the n_dev leading layers
// on the card, the n_stream + n_cpu others offloaded, spread evenly among
// the card's (kept behind them where spreading would change the card's
// bytes: layers of different sizes), the CPU's evenly among the offloaded.
std::vector<LayerPlace> ArrangePlacement(const std::vector<int64_t>& layer_bytes, int32_t n_dev,
                                         int32_t n_stream, int32_t n_cpu);
// The ring's slots for n_stream streamed and n_cpu CPU layers:
// min(ring_layers, n_stream) that the streamed layers take turns in, and
// min(ring_layers, n_cpu) of the CPU layers' own (which steps past
// cpu_max_rows copy them into: a prefill, copy-bound, keeps the copy engine
// busy only when a CPU layer's copy need not wait for the last one's compute).
int32_t RingSlots(int32_t ring_layers, int64_t n_stream, int64_t n_cpu);
// `layers` with every CPU layer streamed instead.
std::vector<LayerPlace> StreamedInstead(std::vector<LayerPlace> layers);
// The predicted step of `plan` at `batch`: its CPU layers on the CPU up to
// plan.cpu_max_rows rows, streamed beyond.
StepPrediction PredictPlanStep(const PlacementInput& input, const PlacementPlan& plan,
                               int32_t batch);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_RUNTIME_CUDA_PLACEMENT_PLAN_H_
