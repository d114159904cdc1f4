// CpuForward: the decoder's forward pass on the cpu backend, over a checked
// FlatBatch (cpu_batch.h), all chunks' tokens together:
//   embedding -> per layer [rmsnorm, qkv linear (+bias), rope, kv write,
//   paged attention, o linear, residual add + rmsnorm, gate_up linear,
//   silu*mul, down linear] -> residual add + final rmsnorm -> lm_head on the
//   rows whose logits are wanted.
// Norms, rope, silu*mul and the kv write are the kernels' references
// (engine/kernels/*_ref.cc), run over token ranges in parallel; the embedding
// is CpuLinear::RowF32 of each token's row; the linears are CpuLinearForward
// (cpu_linear.h: fp32 runs as fp32 dot products, block runs over 8-bit
// activations) and attention PagedAttentionCpu (cpu_attention.h). Every step
// computes a token's values from that token's inputs alone in a fixed order,
// so logits are batch-invariant.
// Owns the weights, the per-layer paged K/V pools (fp32: an FP8 cache's values
// are held as E4m3ToFloat(code) * scale), the FP8 scales, the activations and
// the linears' scratch.
// Not thread-safe: one Run at a time. Tested through cpu_model_runner_test.cc.
#ifndef ONECARD_ENGINE_RUNTIME_CPU_CPU_FORWARD_H_
#define ONECARD_ENGINE_RUNTIME_CPU_CPU_FORWARD_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "engine/common/thread_pool.h"
#include "engine/kv_cache/kv_layout.h"
#include "engine/model/model_config.h"
#include "engine/runtime/cpu/cpu_batch.h"
#include "engine/runtime/cpu/cpu_weights.h"
#include "engine/runtime/cpu/linear_inputs.h"
#include "engine/runtime/kv_scales.h"
#include "engine/runtime/model_runner.h"

namespace onecard::engine {

class CpuForward {
 public:
  // config must have passed CheckCpuConfig; weights come from PackCpuWeights
  // or LoadCpuWeights; layout.num_blocks > 0.
  // kv_dtype: kAuto keeps K and V exact; kBf16 / kFp8E4m3 round each value
  // written to the pools to that format (model_runner.h), kFp8E4m3 with the
  // layer's and kv head's scales (SetKvScales or CalibrateKvScales first).
  CpuForward(const ModelConfig& config, CpuWeights weights, const KvLayout& layout, int num_threads,
             LinearInputObserver observer = nullptr, KvCacheDtype kv_dtype = KvCacheDtype::kAuto);

  // Writes the batch's K/V into the pools and sets *logits to
  // [flat.logit_rows.size(), vocab_size]. FailedPrecondition for kFp8E4m3
  // before the scales are set.
  absl::Status Run(const FlatBatch& flat, std::vector<float>* logits);

  // kFp8E4m3's scales, [num_layers, num_kv_heads] for K and for V.
  void SetKvScales(KvScales scales) { kv_scales_ = std::move(scales); }
  // Runs the batch as Run does (its K/V written to the pools; logits
  // dropped) with each layer's scales set from that layer's largest |K|
  // (after bias and RoPE) and |V| a kv head over the batch (KvScaleFromAmax)
  // just before its K/V are rounded with them: the calibration of
  // kv_scales.h, itself an FP8 pass with the final scales. `source` names
  // them (KvScales::source). The observer sees the pass like any other.
  absl::Status CalibrateKvScales(const FlatBatch& flat, std::string source);
  // Empty until set (and for kAuto and kBf16).
  const KvScales& kv_scales() const { return kv_scales_; }

  int num_threads() const { return pool_.num_threads(); }
  // Layer `layer`'s K (v false) or V pool, for KV swap (cpu_kv_swap.h).
  float* KvPool(int64_t layer, bool v) { return (v ? v_pools_ : k_pools_)[layer].data(); }

 private:
  // Activations of one Run, [num_tokens, ...] each; reused between runs.
  struct Activations {
    std::vector<float> residual;  // [n, hidden]: the residual stream
    std::vector<float> normed;    // [n, hidden]: the current norm's output
    std::vector<float> qkv;       // [n, (num_heads + 2 * num_kv_heads) * head_dim]
    std::vector<float> attn;      // [n, num_heads * head_dim]
    std::vector<float> proj;      // [n, hidden]: o or down projection, to add
    std::vector<float> gate_up;   // [n, 2 * intermediate]
    std::vector<float> act;       // [n, intermediate]
  };

  void Resize(int32_t num_tokens);
  // y [n, w.out_features()] = x [n, w.in_features()] W^T (+ bias).
  void Linear(const CpuLinear& w, const float* x, const float* bias, float* y, int32_t n);
  absl::Status Embed(const FlatBatch& flat);
  absl::Status AttentionBlock(int64_t layer, const FlatBatch& flat);
  // Rounds the n tokens' K and V heads in qkv (k: the first token's K) to
  // the KV cache's format: BF16, or E4M3 with layer's scales (first set from
  // the amax while calibrating).
  absl::Status RoundKv(int64_t layer, float* k, int32_t n);
  // Layer `layer`'s scales from the largest |K| and |V| a kv head of n tokens.
  absl::Status SetScalesFromAmax(int64_t layer, const float* k, int32_t n);
  absl::Status MlpBlock(int64_t layer, int32_t num_tokens);
  absl::Status Logits(const FlatBatch& flat, std::vector<float>* logits);
  // normed = RmsNorm(residual) for the first layer, else residual += proj and
  // normed = RmsNorm(residual).
  absl::Status AddAndNorm(bool add_proj, const std::vector<float>& weight, int32_t num_tokens);
  // Shows the observer (if any) a linear's input of n rows.
  void Observe(int64_t layer, LinearInput input, const std::vector<float>& x, int32_t n) const;
  // ThreadPool::ParallelForStatus over [0, num_tokens) with int32 token
  // indices: the error of the lowest failing range, if any.
  absl::Status ForTokenRanges(int32_t num_tokens,
                              const std::function<absl::Status(int32_t, int32_t)>& fn);

  const ModelConfig config_;
  const CpuWeights weights_;
  const KvLayout layout_;
  const int64_t q_dim_, kv_dim_, qkv_dim_;
  const std::vector<float> inv_freq_;  // [head_dim / 2]
  // A zero-filled float array in its own anonymous mapping: its pages become
  // resident when first written, so a KV pool costs memory for the blocks
  // that sequences use, not for its size. Throws std::bad_alloc when the
  // mapping fails, as a std::vector would (the runner makes it a status).
  class ZeroedFloats {
   public:
    explicit ZeroedFloats(int64_t n);
    ~ZeroedFloats();
    ZeroedFloats(ZeroedFloats&& other) noexcept;
    ZeroedFloats(const ZeroedFloats&) = delete;
    ZeroedFloats& operator=(const ZeroedFloats&) = delete;
    ZeroedFloats& operator=(ZeroedFloats&&) = delete;
    float* data() const { return data_; }

   private:
    float* data_ = nullptr;
    size_t bytes_ = 0;
  };

  std::vector<ZeroedFloats> k_pools_;  // per layer: [num_blocks, block_size, kv_heads, head_dim]
  std::vector<ZeroedFloats> v_pools_;  // per layer, the same
  Activations act_;
  CpuLinearScratch scratch_;  // every linear's quantized activations, in turn
  ThreadPool pool_;
  const LinearInputObserver observer_;
  const KvCacheDtype kv_dtype_;
  KvScales kv_scales_;        // kFp8E4m3: the pools' values are RoundThroughE4m3 with these
  bool calibrating_ = false;  // inside CalibrateKvScales
};

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_RUNTIME_CPU_CPU_FORWARD_H_
