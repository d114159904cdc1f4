// Offloaded layers (issue 19, placement_plan.h): a layer the card cannot hold
// keeps its weights in pinned host memory, in the very layout CarveWeights
// gives a layer on the card, and passes through a ring of device slots in
// the steps that run it on the card. The streamed layers take turns in
// ring_layers slots and the CPU's in slots of their own (RingSlots: the
// k-th streamed layer in slot k % ring_layers), so each kind cycles through
// its slots whether or not the other runs on the card in a step; a layer's
// slot never changes, so its CudaWeight pointers do not either and decode
// steps stay captured as graphs.
//
//   host (pinned):  [ offloaded 0 ][ offloaded 1 ][ offloaded 2 ][ offloaded 3 ] ...
//                        |             |             |
//                        v             v             v   one cudaMemcpyAsync
//   device ring:    [  slot 0   ][  slot 1   ]     (slot 0 again once offloaded 0 ran)
//
// A step copies the layers it runs on the card (every offloaded layer, or,
// when the CPU computes its layers, the streamed ones alone), in layer
// order, on a copy stream beside the compute stream: a layer's copy starts
// once the layer that last held its slot in this step has run (a slot not
// yet used in the step: once the compute stream's earlier work has run), and
// its kernels wait for its copy. Events only (edges of the graph when the
// step is captured); no host synchronisation. A copy serves all the step's
// rows. The CPU reads a CPU layer's weights from the same host memory
// (HostAddress).
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
  // The offloaded (streamed and CPU) layers of `places`, of layer_bytes[l]
  // bytes each (as LayerWeightBytes counts them: what CarveWeights takes for
  // the layer); a ring of RingSlots(ring_layers, ...) slots of the largest
  // taken from `arena`, and the pinned host memory for all of them.
  static absl::StatusOr<std::unique_ptr<WeightStream>> Create(
      const std::vector<LayerPlace>& places, const std::vector<int64_t>& layer_bytes,
      int32_t ring_layers, DeviceArena* arena);
  ~WeightStream();
  WeightStream(const WeightStream&) = delete;
  WeightStream& operator=(const WeightStream&) = delete;

  bool Offloaded(int64_t layer) const { return index_[layer] >= 0; }
  // An arena over an offloaded layer's slot, its tensors carved from the
  // start; null for a layer on the card.
  std::unique_ptr<DeviceArena> LayerArena(int64_t layer) const;
  // After offloaded layer `layer` was filled in its slot by work on `stream`:
  // waits for it and copies the slot to the layer's host memory (before the
  // next layer of the slot is filled).
  absl::Status StoreLayer(int64_t layer, cudaStream_t stream);

  // Where the host copy of an offloaded layer's tensor at `device` (a pointer
  // into its slot, as carved) lives.
  const void* HostAddress(int64_t layer, const void* device) const;

  // The step's copies around the compute stream's work (above); with
  // `cpu_computes`, the CPU layers are neither copied nor waited for. With
  // `timed` (never in a step being captured) each copy is bracketed by
  // timing events on the copy stream, for TakeCopyTimes.
  absl::Status BeginStep(cudaStream_t compute, bool cpu_computes, bool timed = false);
  absl::Status BeforeLayer(int64_t layer, cudaStream_t compute);
  absl::Status AfterLayer(int64_t layer, cudaStream_t compute);

  // The copies of the last timed step (waits for the last one to end): their
  // bytes, the sum of their times on the copy
  // engine, and the time from the first one's start to the last one's end.
  // Zeros when the step copied nothing or was not timed. Clears them.
  struct CopyTimes {
    int64_t bytes = 0;
    int32_t copies = 0;
    double busy_us = 0;
    double span_us = 0;
  };
  absl::StatusOr<CopyTimes> TakeCopyTimes();

  int32_t num_slots() const { return static_cast<int32_t>(slots_.size()); }
  int64_t slot_bytes() const { return slot_bytes_; }
  int64_t host_bytes() const { return host_bytes_; }

 private:
  WeightStream() = default;
  absl::Status Copy(int64_t i);  // offloaded layer i into its slot, on copy_
  // Issues the step's copies in order while each one's slot is free or was
  // freed by a layer that has run (events recorded).
  absl::Status IssueCopies();
  bool Runs(int64_t i) const { return !(cpu_computes_ && cpu_[i]); }

  std::vector<int64_t> index_;    // layer -> its index among the offloaded, or -1
  std::vector<int64_t> layers_;   // offloaded index -> layer
  std::vector<bool> cpu_;         // offloaded index -> a CPU layer
  std::vector<int64_t> slot_of_;  // offloaded index -> its slot
  std::vector<int64_t> bytes_;    // offloaded index -> bytes
  std::vector<int64_t> host_at_;  // offloaded index -> offset in host_
  // The step being enqueued: whether the CPU computes its layers, the next
  // offloaded index to copy, and per slot the index that last took it in
  // this step (-1: none) and whether that one has run.
  bool cpu_computes_ = false;
  int64_t next_copy_ = 0;
  std::vector<int64_t> slot_user_;
  std::vector<bool> slot_freed_;
  std::vector<char*> slots_;
  int64_t slot_bytes_ = 0;
  int64_t host_bytes_ = 0;
  std::unique_ptr<PinnedBuffer> pinned_;  // PinnedBuffer::CreateLarge
  char* host_ = nullptr;                  // pinned_'s bytes
  cudaStream_t copy_ = nullptr;
  cudaEvent_t start_ = nullptr;      // the compute stream at a step's start
  std::vector<cudaEvent_t> filled_;  // offloaded index -> its copy done
  std::vector<cudaEvent_t> freed_;   // slot -> its last layer's kernels done
  // Timed steps: timing events around each copy (made at the first timed
  // step) and the offloaded indices copied in the step, in order.
  bool timed_ = false;
  std::vector<cudaEvent_t> copy_begin_;
  std::vector<cudaEvent_t> copy_end_;
  std::vector<int64_t> timed_copies_;
};

// The cost model's rates measured on the card (placement_plan.h): the device
// read rate by a 256 MiB device-to-device copy (bytes read and written over
// its time, as onecard-bench's copy ceiling), the matrix rate by a 4096^3
// BF16 cuBLAS product, and the pinned host-to-device rate by 256 MiB copies
// from page-locked memory; each the best of a few runs after a warm-up. The
// host's rates stay 0 (cpu_span.h measures them).
absl::StatusOr<OffloadRates> MeasureOffloadRates(cublasHandle_t cublas, cudaStream_t stream);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_RUNTIME_CUDA_WEIGHT_STREAM_H_
