// CudaRunnerImpl: the CudaModelRunner of cuda_model_runner.h. Internal to
// engine/runtime/cuda: cuda_model_runner.cc (creation, tuning cache file, steps, graphs),
// step_pack.cc (batch checks, metadata packing), cuda_forward.cc (the kernel
// sequence of a step), cuda_projection.cc (a projection: one switch on the
// weight's format). Tested by tests/gpu/cuda_model_runner_test.cc.
#ifndef ONECARD_ENGINE_RUNTIME_CUDA_CUDA_RUNNER_IMPL_H_
#define ONECARD_ENGINE_RUNTIME_CUDA_CUDA_RUNNER_IMPL_H_

#include <cuda_runtime.h>

#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "engine/kernels/blas_tuner.h"
#include "engine/kernels/fp8_matmul.h"
#include "engine/kernels/gemv.h"
#include "engine/kernels/l2_prefetch.h"
#include "engine/runtime/cpu/host_linear.h"
#include "engine/runtime/cpu/offloaded_layers.h"
#include "engine/runtime/cuda/cuda_model_runner.h"
#include "engine/runtime/cuda/cuda_weights.h"
#include "engine/runtime/cuda/device_context.h"
#include "engine/runtime/cuda/kv_swap.h"
#include "engine/runtime/cuda/memory_plan.h"
#include "engine/runtime/cuda/step_layout.h"
#include "engine/runtime/cuda/weight_stream.h"

namespace onecard::engine {

// What one step runs: sizes (padded for graphs), where its metadata is, and
// which outputs it makes.
struct StepShape {
  int32_t tokens = 0;            // T
  int32_t seqs = 0;              // S
  int32_t rows = 0;              // logit rows R (<= max_num_seqs), or all tokens in chunks
  bool rows_are_tokens = false;  // row r is token r: no gather
  bool all_logits = false;       // every token's logits, in chunks of max_num_seqs
  bool decode = false;           // every chunk one token (attention may do the RoPE)
  int32_t splits = 1;            // attention split-K (decode steps)
  bool sample = false;
  bool has_history = false;
  bool graph = false;  // a decode bucket run through a CUDA graph
  StepLayout layout;
};

// Device pointers of the step workspace (memory_plan.h WorkspaceSizes).
struct StepBuffers {
  void* residual = nullptr;
  void* normed = nullptr;
  void* qkv = nullptr;
  void* attn_out = nullptr;
  void* gate_up = nullptr;
  void* act = nullptr;
  void* rows = nullptr;
  float* logits = nullptr;
  void* attn_split = nullptr;
  float* gemm_partials = nullptr;
  void* int4_gemm = nullptr;     // Int4Gemm's workspace (4-bit weights only)
  float* norm_sum_sq = nullptr;  // a folded RMSNorm's sums of squares (Int4NormFold)
  void* dequant = nullptr;       // a 4-bit or FP8 weight as BF16 (steps past their kernels' rows)
  void* fp8_gemm = nullptr;      // Fp8Gemm's workspace (kFp8GemmChunkRows rows)
  void* int4_gather = nullptr;   // an act-order weight's input, gathered (GatherColumns)
  void* sample = nullptr;
  int32_t* out_tokens = nullptr;
  char* meta = nullptr;  // device mirror of the pinned metadata
  float* inv_freq = nullptr;
  void* cublas = nullptr;
};

struct SampleInputs {
  std::span<const SampleRowParams> rows;
  std::span<const std::span<const int32_t>> histories;
};

class CudaRunnerImpl : public CudaModelRunner {
 public:
  // A step's matrix products (Projection's four and the LM head).
  enum class Product { kQkv, kO, kGateUp, kDown, kLmHead };

  static absl::StatusOr<std::unique_ptr<CudaRunnerImpl>> Create(const ModelConfig& config,
                                                                const ModelWeightsSpec& spec,
                                                                const CudaRunnerOptions& options);
  ~CudaRunnerImpl() override;

  // Fills the weights in the formats `spec` (the one passed to Create)
  // gives (exactly one of these, once, after Create).
  absl::Status LoadWeights(HostTensorSource& source);
  absl::Status LoadRandomWeights(uint64_t seed);
  // After the weights, with CPU layers in the placement: their host copies
  // handed to an OffloadedLayers and the span buffers made (cpu_span.cc).
  absl::Status PrepareCpuLayers();
  // After the weights: tunes the cuBLAS products of the decode buckets that
  // do not use Gemv (options.tune_gemms; cuda_forward.cc).
  absl::Status TuneGemms();

  const ModelConfig& config() const override { return config_; }
  const KvLayout& kv_layout() const override { return kv_layout_; }
  absl::Status Forward(const BatchInput& batch, std::vector<float>* logits) override;
  std::string name() const override { return "cuda"; }
  bool SamplesOnDevice() const override { return true; }
  absl::Status ForwardSample(const BatchInput& batch, std::span<const SampleRowParams> rows,
                             std::span<const std::span<const int32_t>> histories,
                             std::vector<int32_t>* tokens) override;
  // step_ahead.cc: the step is enqueued and its tokens copied back into one
  // of two pinned buffers; a pending token is filled in on the device from
  // the previous step's sampled tokens (FillPendingTokens). With offloaded
  // layers (their host work is inside the step), ModelRunner's default.
  absl::Status LaunchSample(const BatchInput& batch,
                            std::span<const SampleRowParams> rows) override;
  absl::Status WaitSample(std::vector<int32_t>* tokens) override;
  const MemoryPlan& memory_plan() const override { return plan_; }
  void set_use_cuda_graphs(bool on) override { options_.use_cuda_graphs = on; }
  CudaStepTiming last_step_timing() const override { return timing_; }
  std::optional<RunnerStepTimes> last_step_times() const override { return step_times_; }
  int num_sms() const override { return ctx_->num_sms(); }
  std::string device_name() const override { return ctx_->device_name(); }
  std::string tuning_summary() const override { return tuning_summary_; }
  const PlacementPlan* placement() const override {
    return placement_.has_value() ? &*placement_ : nullptr;
  }
  // The FP8 KV cache's scales (host copy); null for a BF16 cache.
  const KvScales* kv_scales() const override {
    return kv_k_scale_ == nullptr ? nullptr : &kv_scales_;
  }
  // kv_swap.cc: a KvSwap over the pools (model_runner.h, kv_swap.h).
  absl::StatusOr<KvSwapSpace> AllocateSwapSpace(int64_t bytes) override;
  absl::Status SwapOut(std::span<const KvBlockCopy> copies) override;
  absl::Status SwapIn(std::span<const KvBlockCopy> copies) override;
  // After the weights, for an FP8 KV cache: its scales from the options, or
  // calibrated by a forward pass over the calibration prompts
  // (kv_calibration.cc); uploaded and printed.
  absl::Status PrepareKvScales();

 private:
  struct Graph {
    bool warm = false;  // ran once eagerly (module loads, attributes)
    cudaGraphExec_t exec = nullptr;
  };
  // A run of consecutive CPU layers, the data of its host node.
  struct CpuSpan {
    CudaRunnerImpl* runner = nullptr;
    int64_t first = 0, last = 0;
  };

  CudaRunnerImpl() = default;
  // With options_.cpu_memory_budget, when the model does not fit the budget
  // (or options_.gpu_layers leaves layers off the card): the rates measured,
  // placement_ planned and plan_ made for the card's part (else plan_ alone).
  absl::Status PlanDevice();
  absl::Status Allocate();
  // Where the weights go (null without streamed layers).
  std::optional<WeightHomes> Homes();
  absl::Status Run(const BatchInput& batch, const SampleInputs* sample, std::vector<float>* logits,
                   std::vector<int32_t>* tokens);
  absl::Status RunAllLogits(const StepShape& shape, std::vector<float>* logits);
  absl::Status Launch(const StepShape& shape);

  // step_pack.cc. pending_allowed: a chunk's last token may be kPendingToken.
  absl::Status CheckBatch(const BatchInput& batch, const SampleInputs* sample,
                          bool pending_allowed = false) const;
  StepShape ShapeStep(const BatchInput& batch, const SampleInputs* sample) const;
  // Into `base` (a pinned buffer of step_layout.size_bytes); returns the bytes
  // to copy. pending_rows (empty, or one a chunk): >= 0 where the chunk's last
  // token is pending, the previous step's row it stands for.
  int64_t PackStep(const BatchInput& batch, const SampleInputs* sample, const StepShape& shape,
                   char* base, std::span<const int32_t> pending_rows = {}) const;

  // cpu_span.cc (cpu_span.h says how a step runs the CPU's layers).
  // Whether the CPU may compute layers: offload_cpu_threads >= 0, a BF16 KV
  // cache, no FP8 weights, 4-bit groups the host kernels take
  // (HostLinearTakesGroup: not 96, 160, ...; such layers stream).
  bool CpuCanCompute() const;
  int CpuThreads() const;
  // Whether the CPU computes its layers in this step (else they stream).
  bool CpuComputes(const StepShape& shape) const {
    return cpu_layers_ != nullptr && shape.tokens <= placement_->cpu_max_rows;
  }
  HostWeight HostCopy(const CudaWeight& w, int64_t layer) const;
  OffloadedStep HostStep(const StepShape& shape) const;
  // Where the span starting at layer `first` leaves its layers' K/V rows.
  uint16_t* CpuKvRows(int64_t first) const;
  static void RunCpuSpan(void* span);  // the host node
  absl::Status EnqueueCpuSpan(CpuSpan& span, const StepShape& shape, int32_t* partials);
  // After a CPU layer ran on the card: its K/V rows of the step down to kv_mirror_.
  absl::Status EnqueueKvMirror(int64_t layer, const StepShape& shape);
  // After the step: a host node's error, or the mirrored K/V rows into the
  // CPU's pools.
  absl::Status FinishCpuStep(const StepShape& shape);
  // After a step completed: its streamed copies' times into timing_
  // (options_.time_steps).
  absl::Status TakeStreamTimes();

  // cuda_forward.cc
  absl::Status EnqueueStep(const StepShape& shape);
  // One layer; `partials`: split-K partials its first norm folds in (the
  // previous layer's down), then those of its own down.
  absl::Status EnqueueLayer(int layer, const StepShape& shape, int32_t* partials);
  absl::Status EnqueueLogits(const StepShape& shape, const void* x, int32_t num_rows);
  // The FP8 KV scales of `layer` (device; both null for a BF16 cache and,
  // past calibration, for a layer kv_scales_ keeps in BF16).
  KvFp8Scales LayerKvScales(int layer) const;
  // Takes the KV pools of num_blocks blocks from kv_arena_ (from its start,
  // a layer's K and V of 1 byte an element where it is FP8, 2 where BF16),
  // sets kv_layout_ and plan_.num_kv_blocks, and zeroes them (finite KV
  // everywhere: padded graph rows read block 0).
  absl::Status TakeKvPools(int64_t num_blocks);
  // Whether layer `layer`'s pools hold FP8 codes.
  bool LayerKvFp8(int64_t layer) const {
    return kv_k_scale_ != nullptr && !kv_scales_.LayerBf16(layer);
  }
  // kv_calibration.cc, while calibrating_: after the layer's RopeKvWrite,
  // sets its scales from the step's K / V maxima (KvScaleFromAmax) and
  // rewrites the step's K / V into the pools with them.
  absl::Status CalibrateLayer(int layer, const StepShape& shape);
  bool UseGemv(int32_t tokens) const;
  // The cuBLAS products of a step of `rows` rows: input and output buffers,
  // shape and beta. The weight (.w) is the caller's: one layer's when a step
  // runs, every layer's when TuneGemms times them.
  BlasGemmParams ProductParams(Product product, int32_t rows) const;
  // cuda_projection.cc. Projection p of layer for a step of t tokens:
  //   kQkv:    buf_.qkv = RmsNorm(residual; attn_norm) Wqkv^T
  //   kO:      residual += attn_out Wo^T
  //   kGateUp: buf_.act = SiluMul(RmsNorm(residual; ffn_norm) Wgate_up^T)
  //   kDown:   residual += act Wdown^T
  // in_partials (> 1): split-K partials of the previous product, folded into
  // the residual stream by the norm first. Returns the partials this
  // product left instead of adding to the stream (1: none). `fold`: its part
  // in a folded RMSNorm (4-bit weights, FoldsNorms).
  struct NormFold {
    bool input = false;               // kQkv, kGateUp: buf_.normed holds g . h, buf_.norm_sum_sq
                                      // h's sums of squares (the residual product before left them)
    const void* next_norm = nullptr;  // kO, kDown: leave them for the next product's norm weight
  };
  absl::StatusOr<int32_t> Project(Projection p, int layer, int32_t t, int32_t in_partials,
                                  const NormFold& fold);
  // Whether layer's RMSNorms fold into its products this step
  // (LaunchSettings::int4_fold_norm): the layer on the card, its four
  // projections 4-bit, and the step's tokens within kInt4GemmFoldMaxRows
  // (kStream's). Its qkv takes a folded input where layer - 1 folds too,
  // its down leaves one where layer + 1 does.
  bool FoldsNorms(int layer, const StepShape& shape) const;
  absl::StatusOr<int32_t> ProjectBf16(Projection p, int layer, int32_t t, int32_t in_partials,
                                      const void* weight, bool allow_splits);
  absl::StatusOr<int32_t> ProjectInt4(Projection p, int layer, int32_t t, int32_t in_partials,
                                      const CudaWeight& w, const NormFold& fold);
  // FP8 weights (cuda_projection.cc says how).
  absl::StatusOr<int32_t> ProjectFp8(Projection p, int layer, int32_t t, int32_t in_partials,
                                     const CudaWeight& w);
  // Whether a W8A8 step of t tokens leaves layer's gate_up product as its
  // BF16 [gate | up] rows (buf_.gate_up) and down takes SiLU·mul in its
  // activations' pass: both FP8 row-scaled through Fp8Gemm, and every chunk
  // of gate_up in cuBLASLt's scaled form (else gate_up's epilogue applies
  // SiLU·mul into buf_.act).
  absl::StatusOr<bool> Fp8SiluInDown(int layer, int32_t t);
  // The GEMV of projection p (UseGemv(t) steps) with its norm prologue and
  // SiLU·mul / residual epilogue; the weight fields are the caller's.
  GemvParams GemvFor(Projection p, int layer, int32_t t) const;
  const void* NormWeight(Projection p, int layer) const;
  // The o projection's weights of `layer` for the decode attention to ask
  // the L2 cache for (LaunchSettings::prefetch_o_in_attention), when they
  // take at most three quarters of it and every layer lives on the card;
  // else none.
  L2Prefetch OWeightsForL2(int layer) const;
  // Whether the projection runs through cuBLAS (whose kernels let the next
  // kernel start only at their end: where attention may fuse the RoPE).
  bool ProjectsByLibrary(Projection p, int layer, int32_t t) const;
  // How many split-K partials the o or down product of a `rows`-row step
  // writes (1: the product adds into the residual stream itself); chosen by
  // TuneGemms when the partials and the FusedAddRmsNorm that folds them run
  // faster than the whole product and a plain RmsNorm.
  int32_t GemmSplits(Product product, int32_t rows) const;
  // The residual-stream product `product` as `splits` partials into
  // buf_.gemm_partials (splits > 1), else as ProductParams.
  BlasGemmParams ResidualProductParams(Product product, int32_t rows, int32_t splits) const;
  // Times the o or down product of `m` rows with `splits` partials (1: whole)
  // together with the norm after it, over every layer's weight (us a layer).
  absl::StatusOr<double> TimeResidualProduct(Product product, int32_t m, int32_t splits,
                                             std::span<const void* const> weights);
  // RmsNorm of the residual stream (`partials` splits > 1: folded into it
  // first) into buf_.normed.
  absl::Status NormResidual(const void* weight, int32_t tokens, int32_t partials);
  // cuda_model_runner.cc. options_.tuning_cache: the choices loaded into
  // tuner_, and a line saying how many ("" without a file, or with one that
  // does not load, which is logged, as are choices that cannot be rebuilt);
  // written back by TuneGemms.
  std::string LoadTuningCache();
  void SaveTuningCache() const;

  ModelConfig config_;
  ModelWeightsSpec spec_;
  CudaRunnerOptions options_;
  MemoryPlan plan_;
  std::optional<PlacementPlan> placement_;       // offload only
  std::unique_ptr<WeightStream> weight_stream_;  // with offloaded layers
  // The token embedding table in pinned host memory (placement_plan.h), which
  // the embedding kernel reads over the link; null when it is on the card.
  std::unique_ptr<PinnedBuffer> host_embedding_;
  // With CPU layers: the CPU's side, its spans, each CPU layer's index, the
  // pinned span buffers (BF16: the residual [kCpuMaxRows, hidden], then
  // [cpu layers, kCpuMaxRows, kv_row] K/V rows) and the K/V rows the card
  // wrote for them in a step that streamed them ([cpu layers,
  // max_batched_tokens, kv_row]); the step the host nodes read, and their
  // error.
  std::unique_ptr<OffloadedLayers> cpu_layers_;
  std::vector<std::unique_ptr<CpuSpan>> cpu_spans_;
  std::map<int64_t, int64_t> cpu_index_;
  std::unique_ptr<PinnedBuffer> cpu_io_;
  std::unique_ptr<PinnedBuffer> kv_mirror_;
  StepShape cpu_shape_;
  absl::Status cpu_status_;
  double cpu_us_ = 0;  // the host nodes' time in the step (CudaStepTiming::cpu_us)
  cudaEvent_t cpu_step_done_ = nullptr;  // cudaEventBlockingSync: a CPU step's end
  KvLayout kv_layout_;
  std::unique_ptr<DeviceContext> ctx_;
  std::unique_ptr<DeviceArena> weight_arena_;
  std::unique_ptr<DeviceArena> workspace_arena_;
  std::unique_ptr<DeviceArena> kv_arena_;
  std::unique_ptr<PinnedBuffer> meta_host_;
  std::unique_ptr<PinnedBuffer> out_host_;  // logits [max_num_seqs, vocab] fp32 or tokens
  CudaWeights weights_;
  StepBuffers buf_;
  std::vector<void*> k_cache_;  // per layer [num_blocks, block_size, kv_heads, head_dim]
  std::vector<void*> v_cache_;
  std::map<std::pair<int32_t, int>, Graph> graphs_;  // (bucket, sample | history << 1)
  std::vector<int32_t> buckets_;
  CudaStepTiming timing_;
  // Around a step's device work, every step: gpu_us (time_steps) and the
  // device's idle gap since the previous step's end (RunnerStepTimes). The
  // ends alternate, so the previous one holds while this one is recorded.
  cudaEvent_t step_start_ = nullptr;
  cudaEvent_t step_ends_[2] = {nullptr, nullptr};
  int64_t steps_run_ = 0;      // steps whose end was recorded (step_ends_[n % 2])
  bool previous_end_ = false;  // step_ends_[(steps_run_ - 1) % 2] ended the last step
  std::optional<RunnerStepTimes> step_times_;
  // Look-ahead (step_ahead.cc). Steps launched by LaunchSample alternate
  // between two pinned metadata and token buffers (slot 0 is meta_host_ and
  // out_host_, which Forward and ForwardSample use); their events form a
  // ring of four, so the previous step's end outlives two launches.
  struct Launched {
    int slot = 0;
    int32_t rows = 0;
    int64_t index = 0;  // launches_made_ at its launch: events [index % 4]
    bool graph = false;
    bool follows_launch = false;  // the previous launch's end event precedes it
    double enqueue_us = 0;
  };
  std::unique_ptr<PinnedBuffer> meta_host_ahead_;  // slot 1
  std::unique_ptr<PinnedBuffer> out_host_ahead_;   // slot 1: tokens [max_num_seqs]
  cudaEvent_t ahead_starts_[4] = {};
  cudaEvent_t ahead_ends_[4] = {};
  std::vector<Launched> launched_;  // oldest first, at most two
  int64_t launches_made_ = 0;
  std::vector<int64_t> last_launch_seqs_;  // the logits rows' sequences of the newest launch
  bool launch_chain_ = false;              // launches since the last Forward / ForwardSample
  std::unique_ptr<Fp8Matmul> fp8_matmul_;  // with row-scaled FP8 weights (W8A8)
  std::unique_ptr<BlasTuner> tuner_;       // null: cuBLAS's default everywhere
  std::map<std::pair<Product, int32_t>, int32_t> gemm_splits_;  // (product, rows) -> splits
  std::string tuning_summary_;
  // FP8 KV cache (workspace.kv_scales): fp32 [layers, kv_heads] K and V
  // scales and [2, kv_heads] maxima; null for a BF16 cache.
  float* kv_k_scale_ = nullptr;
  float* kv_v_scale_ = nullptr;
  float* kv_amax_ = nullptr;
  KvScales kv_scales_;        // the host copy (source, values)
  bool calibrating_ = false;  // the calibration pass: EnqueueLayer calls CalibrateLayer

  // KV swap's pinned host memory and copy stream; null until AllocateSwapSpace.
  std::unique_ptr<KvSwap> kv_swap_;
};

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_RUNTIME_CUDA_CUDA_RUNNER_IMPL_H_
