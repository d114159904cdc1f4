// OffloadedLayers: decoder layers of a CUDA-served model that the CPU
// computes (issue 19's placement plan, engine/runtime/cuda/placement_plan.h),
// from their weights as the CUDA backend lays them out in pinned host memory
// (the same bytes the card streams when a step is too large for the CPU), over
// the card's BF16 residual stream, with their own paged K/V pools in host
// memory.
//
// A span of consecutive offloaded layers runs over the step's tokens:
//   per layer [RmsNorm, qkv (+bias), RoPE, K/V written to the host pools,
//   paged attention, o + residual, RmsNorm, gate_up, SiLU * up, down +
//   residual]
// with the CUDA runner's storage roundings: the residual stream, the norms'
// outputs, the projections' outputs, q / k after RoPE, the attention output
// and SiLU * up are BF16 values (the kernels' references, engine/kernels/*_ref.cc,
// in BF16), the products HostLinearForward's (host_linear.h: BF16 activations
// against the exact weights, fp32 sums), attention PagedAttentionCpu over fp32
// pools that hold BF16 values. So a span's K/V equal what the card's BF16
// pools hold for the same inputs up to the products' summation order.
// Each layer's K/V rows of the step are also handed back (BF16, after RoPE),
// for the card's pools: a layer computed here in one step and on the card in
// another reads the same cache. WriteKv takes the reverse direction (a step
// that ran the layer on the card).
// Not thread-safe: one call at a time (the CUDA runner calls it from a host
// node of its stream, then from its own thread after the step).
// Tested by tests/engine/runtime/cpu/offloaded_layers_test.cc against the cpu
// backend's forward pass.
#ifndef ONECARD_ENGINE_RUNTIME_CPU_OFFLOADED_LAYERS_H_
#define ONECARD_ENGINE_RUNTIME_CPU_OFFLOADED_LAYERS_H_

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/common/thread_pool.h"
#include "engine/kv_cache/kv_layout.h"
#include "engine/model/model_config.h"
#include "engine/runtime/cpu/host_linear.h"

namespace onecard::engine {

// One layer's weights in host memory, in the CUDA backend's layout.
struct OffloadedLayerWeights {
  int64_t layer = 0;
  HostWeight qkv;                       // [(heads + 2 kv_heads) head_dim, hidden]: [Wq; Wk; Wv]
  HostWeight o;                         // [hidden, heads head_dim]
  HostWeight gate_up;                   // [2 inter, hidden]: [Wgate; Wup], or interleaved by 8 rows
  HostWeight down;                      // [hidden, inter]
  bool gate_up_interleaved = false;     // 4-bit: InterleavedGateUpRows (int4_matrix.h)
  const uint16_t* attn_norm = nullptr;  // BF16 [hidden]
  const uint16_t* ffn_norm = nullptr;   // BF16 [hidden]
  const uint16_t* bqkv = nullptr;       // BF16 [(heads + 2 kv_heads) head_dim] or null
};

// Host copies of a step's metadata (the CUDA runner's pinned StepLayout).
struct OffloadedStep {
  int32_t num_tokens = 0;
  int32_t num_seqs = 0;
  const int32_t* positions = nullptr;      // [num_tokens]
  const int32_t* slots = nullptr;          // [num_tokens]; < 0: no K/V written (padding)
  const int32_t* cu_query_lens = nullptr;  // [num_seqs + 1]
  const int32_t* start_pos = nullptr;      // [num_seqs]
  const int32_t* block_tables = nullptr;   // [num_seqs, max_blocks_per_seq]
  int32_t max_blocks_per_seq = 0;
};

class OffloadedLayers {
 public:
  // layout: the card's KV layout (the same block ids); max_tokens: the most
  // tokens a Run takes. Checks every weight's shape against config.
  static absl::StatusOr<std::unique_ptr<OffloadedLayers>> Create(
      const ModelConfig& config, const KvLayout& layout, std::vector<OffloadedLayerWeights> layers,
      int num_threads, int32_t max_tokens);

  bool Holds(int64_t layer) const {
    return layer >= 0 && layer < static_cast<int64_t>(index_.size()) && index_[layer] >= 0;
  }
  // Values of a layer's K/V rows: 2 * num_kv_heads * head_dim (K, then V).
  int64_t kv_row() const { return 2 * kv_dim_; }
  int64_t pool_bytes() const;
  int num_threads() const { return pool_.num_threads(); }
  // Time spent in HostLinearForward since the last call (microseconds).
  double TakeLinearMicros() { return std::exchange(linear_us_, 0.0); }

  // Layers first..last (each held) over residual (BF16 [num_tokens, hidden],
  // in place); the i-th layer's K/V rows go to
  // kv_out + i * num_tokens * kv_row() (BF16 [num_tokens, kv_row()]).
  absl::Status Run(int64_t first, int64_t last, const OffloadedStep& step, uint16_t* residual,
                   uint16_t* kv_out);
  // Writes K/V rows computed on the card (BF16 [num_tokens, kv_row()]) into
  // the layer's pools at the step's slots.
  absl::Status WriteKv(int64_t layer, const OffloadedStep& step, const uint16_t* kv);

 private:
  OffloadedLayers(const ModelConfig& config, const KvLayout& layout, int num_threads);
  absl::Status RunLayer(const OffloadedLayerWeights& w, int64_t index, const OffloadedStep& step,
                        uint16_t* residual, uint16_t* kv_out);
  // y_bf16 [t, w.n] = bf16(x [t, w.k] W^T).
  void Linear(const HostWeight& w, const uint16_t* x, int32_t t, uint16_t* y);
  absl::Status Attention(int64_t index, const OffloadedStep& step);

  ModelConfig config_;
  KvLayout layout_;
  int64_t q_dim_ = 0, kv_dim_ = 0, qkv_dim_ = 0;
  std::vector<float> inv_freq_;
  std::vector<OffloadedLayerWeights> layers_;
  std::vector<int64_t> index_;                         // layer -> index in layers_, or -1
  std::vector<std::vector<float>> k_pools_, v_pools_;  // per held layer [PoolElements()]
  ThreadPool pool_;
  HostLinearScratch scratch_;
  double linear_us_ = 0;
  // Activations of one Run, for max_tokens tokens.
  std::vector<uint16_t> normed_, qkv_, attn_, proj_, gate_up_, act_;  // BF16
  std::vector<float> x_f32_, y_f32_, q_f32_, kv_f32_, attn_f32_;
};

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_RUNTIME_CPU_OFFLOADED_LAYERS_H_
