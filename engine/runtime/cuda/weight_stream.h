// Streamed layers (issue 19, placement_plan.h): a layer the card cannot hold
// keeps its weights in pinned host memory, in the very layout CarveWeights
// gives a layer on the card, and passes through a ring of device slots each
// step. The i-th streamed layer is carved in slot i % slots, so its
// CudaWeight pointers never change and decode steps stay captured as graphs.
//
//   host (pinned):  [ streamed 0 ][ streamed 1 ][ streamed 2 ][ streamed 3 ] ...
//                        |             |             |
//                        v             v             v   one cudaMemcpyAsync
//   device ring:    [  slot 0   ][  slot 1   ]     (slot 0 again once streamed 0 ran)
//
// A step, on a copy stream beside the compute stream: at its start (after
// the compute stream's earlier work) the first `slots` streamed layers are
// copied, beside the card's own layers; the kernels of streamed layer i wait
// for its copy; once they have run, the copy of streamed layer i + slots
// into the freed slot starts. Events only (edges of the graph when the step
// is captured); no host synchronisation. Every step copies every streamed
// layer: a copy serves all the step's rows.
// Also MeasureOffloadRates, the start-up measurements of the cost model.
// Tested by tests/gpu/cuda_model_runner_offload_test.cc.
#ifndef ONECARD_ENGINE_RUNTIME_CUDA_WEIGHT_STREAM_H_
#define ONECARD_ENGINE_RUNTIME_CUDA_WEIGHT_STREAM_H_

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/runtime/cuda/device_context.h"
#include "engine/runtime/cuda/placement_plan.h"

namespace onecard::engine {

class WeightStream {
 public:
  // The streamed layers of `places`, of layer_bytes[l] bytes each (as
  // LayerWeightBytes counts them: what CarveWeights takes for the layer); a
  // ring of min(ring_layers, streamed layers) slots of the largest taken from
  // `arena`, and the pinned host memory for all of them.
  static absl::StatusOr<std::unique_ptr<WeightStream>> Create(
      const std::vector<LayerPlace>& places, const std::vector<int64_t>& layer_bytes,
      int32_t ring_layers, DeviceArena* arena);
  ~WeightStream();
  WeightStream(const WeightStream&) = delete;
  WeightStream& operator=(const WeightStream&) = delete;

  bool Streams(int64_t layer) const { return index_[layer] >= 0; }
  // An arena over a streamed layer's slot, its tensors carved from the
  // start; null for a layer that is not streamed.
  std::unique_ptr<DeviceArena> LayerArena(int64_t layer) const;
  // After streamed layer `layer` was filled in its slot by work on `stream`:
  // waits for it and copies the slot to the layer's host memory (before the
  // next layer of the slot is filled).
  absl::Status StoreLayer(int64_t layer, cudaStream_t stream);

  // The step's copies around the compute stream's work (above).
  absl::Status BeginStep(cudaStream_t compute);
  absl::Status BeforeLayer(int64_t layer, cudaStream_t compute);
  absl::Status AfterLayer(int64_t layer, cudaStream_t compute);

  int32_t num_slots() const { return static_cast<int32_t>(slots_.size()); }
  int64_t slot_bytes() const { return slot_bytes_; }
  int64_t host_bytes() const { return host_bytes_; }

 private:
  WeightStream() = default;
  absl::Status Copy(int64_t i);  // streamed layer i into its slot, on copy_

  std::vector<int64_t> index_;    // layer -> its index among the streamed, or -1
  std::vector<int64_t> layers_;   // streamed index -> layer
  std::vector<int64_t> bytes_;    // streamed index -> bytes
  std::vector<int64_t> host_at_;  // streamed index -> offset in host_
  std::vector<char*> slots_;
  int64_t slot_bytes_ = 0;
  int64_t host_bytes_ = 0;
  char* host_ = nullptr;  // cudaMallocHost
  cudaStream_t copy_ = nullptr;
  cudaEvent_t start_ = nullptr;      // the compute stream at a step's start
  std::vector<cudaEvent_t> filled_;  // streamed index -> its copy done
  std::vector<cudaEvent_t> freed_;   // slot -> its last layer's kernels done
};

// The cost model's rates measured on the card (placement_plan.h): the device
// read rate by a 256 MiB device-to-device copy (bytes read and written over
// its time, as onecard-bench's copy ceiling), the matrix rate by a 4096^3
// BF16 cuBLAS product, and the pinned host-to-device rate by 256 MiB copies
// from page-locked memory; each the best of a few runs after a warm-up. The
// host's read and arithmetic rates and the CPU span stay 0 (the CUDA runner
// computes no layer on the CPU).
absl::StatusOr<OffloadRates> MeasureOffloadRates(cublasHandle_t cublas, cudaStream_t stream);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_RUNTIME_CUDA_WEIGHT_STREAM_H_
