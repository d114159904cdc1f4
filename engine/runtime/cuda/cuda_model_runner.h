// The cuda backend: a ModelRunner (model_runner.h) for one GPU, with BF16 or
// 4-bit projections (weight_spec.h; a checkpoint's 4-bit GGUF tensors stay
// 4-bit, repacked without re-rounding).
//
// - Memory is planned up front (memory_plan.h) from options.gpu_memory_budget
//   (default: the card's free memory) and printed; a budget that cannot hold
//   one full-context sequence is refused ("needs X GiB, budget Y GiB"), or,
//   with options.cpu_memory_budget, the layers that do not fit are streamed
//   from pinned host memory (placement_plan.h, weight_stream.h).
// - A step is: the metadata packed into one pinned buffer and copied once;
//   embedding; per layer RMSNorm -> QKV -> bias + RoPE + KV write -> paged
//   attention -> O (+ residual) -> RMSNorm -> gate_up -> SiLU*up -> down
//   (+ residual); final norm and LM head on the rows that want logits.
//   Each projection picks its kernel from its weight's format and the rows
//   (cuda_projection.cc): BF16 up to 4 rows Gemv (gemv.h) with the norms,
//   SiLU and residual adds fused, more cuBLAS with the residual add as
//   beta = 1; 4-bit up to 256 rows Int4Gemm (int4_gemm.h: its stream
//   kernel to 16 rows, its tiled one past), more dequantized to BF16 for
//   cuBLAS.
// - Decode steps (every chunk one token) run as CUDA graphs captured per
//   batch bucket (1, 2, 3, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128, ...),
//   padded rows writing no KV (slot -1); the first step of a bucket runs
//   eagerly, the second captures.
// - ForwardSample samples on the GPU (sample.h) and returns only token ids.
// The scheduler drives it through ModelRunner unchanged.
// Tested by tests/gpu/cuda_model_runner_test.cc (against the cpu runner) and
// measured by tools/bench/cuda.
#ifndef ONECARD_ENGINE_RUNTIME_CUDA_CUDA_MODEL_RUNNER_H_
#define ONECARD_ENGINE_RUNTIME_CUDA_CUDA_MODEL_RUNNER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/kernels/blas_tuner.h"
#include "engine/kernels/sample.h"
#include "engine/model/checkpoint.h"
#include "engine/runtime/cuda/cuda_weights.h"
#include "engine/runtime/cuda/memory_plan.h"
#include "engine/runtime/cuda/placement_plan.h"
#include "engine/runtime/cuda/weight_spec.h"
#include "engine/runtime/kv_scales.h"
#include "engine/runtime/model_runner.h"

namespace onecard::engine {

// Where a decode step's RoPE and cache write run inside the attention
// kernel: after every projection (what serves), only after a cuBLAS one, or
// nowhere (RopeKvWrite everywhere); the last two for comparisons.
enum class FusedRope { kAll, kAfterCublas, kOff };

// How KV swap moves a swap's blocks (kv_swap.h): the copy engines (one copy
// a contiguous run and part), the SMs (CopyKvBlocks: one launch, any
// blocks), or kAuto, which picks per swap from its runs' lengths (what
// serves); the other two for comparisons and tests.
enum class KvSwapCopy { kAuto, kCopyEngines, kSms };

struct CudaRunnerOptions {
  int32_t device = 0;
  int64_t gpu_memory_budget = 0;  // bytes; 0 = the card's free memory
  int32_t kv_block_size = 16;
  int64_t num_kv_blocks = 0;   // 0 = every block the budget holds
  int32_t max_context = 0;     // 0 = the model's max_position_embeddings
  int32_t max_num_seqs = 128;  // chunks (and logit rows) in a step
  int32_t max_batched_tokens = 2048;
  bool use_cuda_graphs = true;
  bool use_gemv = true;    // Gemv for steps of <= 4 tokens
  bool tune_gemms = true;  // time cuBLASLt algorithms for the decode buckets
                           // at creation (blas_tuner.h)
  // The o / down products of the tuned decode buckets: 0 = whole or as
  // split-K partials folded by the next norm, whichever TuneGemms times
  // faster; 1 = always whole; N > 1 = N partials wherever k allows (tests).
  int32_t gemm_splits = 0;
  FusedRope fused_rope = FusedRope::kAll;
  KvSwapCopy kv_swap_copy = KvSwapCopy::kAuto;
  int32_t kv_swap_sm_blocks = 0;  // blocks of CopyKvBlocks' grid; 0 = its default (32)
  BlasTunerOptions tuner;         // blas_tuner.h: the search and power-cap ranking
  // A file of tuned choices (BlasTuner::Serialize plus the split counts):
  // loaded at creation when it exists and was made on the same card and
  // cuBLASLt, so only missing shapes are timed (and those whose cuBLASLt
  // configuration cannot be rebuilt: blas_tuner.h); rewritten after tuning.
  // A file that cannot be read or parsed is reported and tuned over. Empty:
  // no file.
  std::string tuning_cache;
  bool time_steps = false;      // CudaStepTiming::gpu_us (benchmarks)
  uint64_t synthetic_seed = 1;  // synthetic models only
  // The format of every projection of a synthetic model (BF16 by default).
  ProjectionSpec synthetic_weights;
  // Checkpoints: keep 4-bit projections (GGUF Q4_0 / Q4_1 / Q4_K, HF 4-bit)
  // 4-bit and FP8 ones (compressed-tensors, HF fp8 / fbgemm_fp8) FP8 (true),
  // or expand every projection to BF16 (false: 2-4x the memory, the BF16
  // kernels).
  bool keep_quantized = true;
  // FP8 projections of steps past the GEMV's rows (model_runner.h).
  Fp8Compute fp8_compute = Fp8Compute::kW8A8;
  // The KV cache: BF16 (kAuto, kBf16) or FP8 E4M3 (kFp8E4m3: a byte an
  // element, per-layer per-kv-head scales, engine/runtime/kv_scales.h). The
  // scales: kv_scales when set (a checkpoint's: CreateCudaModelRunner reads
  // them), else calibrated at creation on kv_calibration_prompts (token ids;
  // empty: KvCalibrationPrompts' seeded ids), and printed with the plan.
  KvCacheDtype kv_cache_dtype = KvCacheDtype::kAuto;
  std::optional<KvScales> kv_scales;
  std::vector<std::vector<int32_t>> kv_calibration_prompts;
  bool print_plan = true;  // the memory plan to stderr at creation
  // Weights larger than gpu_memory_budget (placement_plan.h, weight_stream.h):
  // with cpu_memory_budget > 0 the layers the card cannot hold live in that
  // much pinned host memory, each computed by the CPU or streamed through a
  // ring of offload_ring_layers device slots, as the cost model splits them;
  // 0: such a model is refused. With
  // offload the KV cache gets num_kv_blocks blocks, or one full-context
  // sequence's when that is 0, and the rest of the budget goes to weights.
  // gpu_layers >= 0 keeps at most that many layers on the card and offloads
  // the rest (llama.cpp's -ngl; with cpu_memory_budget > 0); -1: as many as
  // fit. The offloaded layers are spread among the card's (placement_plan.h).
  int64_t cpu_memory_budget = 0;
  int32_t offload_ring_layers = 2;
  int32_t gpu_layers = -1;
  // Threads the CPU computes offloaded layers with (steps of up to
  // PlacementPlan::cpu_max_rows rows; the cost model decides how many layers,
  // cpu_span.h); 0: one a hardware thread but one (the runner's);
  // -1: the CPU computes none (every offloaded layer streams).
  int32_t offload_cpu_threads = 0;
  // This many of the offloaded layers on the CPU; -1: the cost model's count.
  int32_t offload_cpu_layers = -1;
};

// Host-side time of the last step (what the CPU spent before waiting).
struct CudaStepTiming {
  double enqueue_us = 0;     // packing metadata + copies + launches (or graph launch)
  double total_us = 0;       // until the outputs were on the host
  double gpu_us = 0;         // on the device: the metadata copy in to the outputs' copy out
                             // (options.time_steps; 0 for steps returning every token's logits)
  bool graph = false;        // ran as a CUDA graph replay
  double cpu_us = 0;         // the CPU computing offloaded layers (its host nodes, summed)
  double cpu_linear_us = 0;  // of which in the products (HostLinearForward)
  // The streamed layers' copies (weight_stream.h) of a step not run as a
  // graph, with options.time_steps: their bytes, the sum of their times on
  // the copy engine, and the first one's start to the last one's end.
  int64_t stream_bytes = 0;
  double stream_busy_us = 0;
  double stream_span_us = 0;
};

class CudaModelRunner : public ModelRunner {
 public:
  // ForwardSample (model_runner.h) samples on the GPU (engine/kernels/sample.h).
  virtual const MemoryPlan& memory_plan() const = 0;
  virtual void set_use_cuda_graphs(bool on) = 0;
  virtual CudaStepTiming last_step_timing() const = 0;
  virtual int num_sms() const = 0;
  virtual std::string device_name() const = 0;
  // The tuned GEMM choices, a line each ("(cached)" where the tuning cache
  // gave them), after a line on what the tuning cache held when one was
  // loaded; empty without tuning.
  virtual std::string tuning_summary() const = 0;
  // Where the layers live when some are offloaded (with its rates and
  // predicted step: the offload benchmarks' floor); null when all are on
  // the card.
  virtual const PlacementPlan* placement() const = 0;
};

absl::StatusOr<std::unique_ptr<CudaModelRunner>> CreateCudaModelRunner(
    const Checkpoint& checkpoint, const CudaRunnerOptions& options);

// The memory plan's input a runner of these options makes for the model: the
// budget options.gpu_memory_budget, else `free_bytes` (the card's free
// memory), and the card's `num_sms`.
MemoryPlanInput CudaMemoryPlanInput(const ModelConfig& config, const ModelWeightsSpec& spec,
                                    const CudaRunnerOptions& options, int64_t free_bytes,
                                    int32_t num_sms);

// A synthetic model (synthetic_shapes.h) with seeded random BF16 weights
// generated in device memory.
absl::StatusOr<std::unique_ptr<CudaModelRunner>> CreateSyntheticCudaModelRunner(
    std::string_view shape, const CudaRunnerOptions& options);

// The same from an explicit config (tests use small shapes).
absl::StatusOr<std::unique_ptr<CudaModelRunner>> CreateRandomCudaModelRunner(
    const ModelConfig& config, const CudaRunnerOptions& options);

// Weights in the formats `spec` gives, read from `source` one tensor at a
// time (tests give 4-bit weights of their own this way).
absl::StatusOr<std::unique_ptr<CudaModelRunner>> CreateCudaModelRunnerFromSource(
    const ModelConfig& config, const ModelWeightsSpec& spec, HostTensorSource& source,
    const CudaRunnerOptions& options);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_RUNTIME_CUDA_CUDA_MODEL_RUNNER_H_
