// Shared pieces of onecard-bench's CUDA presets (tools/bench/cuda/*.cc):
// the ceilings measured in the same run (device-to-device copy bandwidth
// counting bytes read + written, the bf16 GEMM rate of 8192^3 through cuBLAS
// on random data, the E4M3 GEMM rate of 8192^3 through cuBLASLt (Fp8Matmul)
// on random codes, pinned host<->device bandwidth), CUDA-event timing, the
// floors of a decode step and of a prefill, and a driver that feeds
// synthetic prompts to a CudaModelRunner. Not unit tested: the presets run
// only on the GPU machine (scripts/device/run.sh); their arithmetic is
// written out here where the note (bench/results/*.md) can quote it.
#ifndef ONECARD_TOOLS_BENCH_CUDA_CUDA_BENCH_H_
#define ONECARD_TOOLS_BENCH_CUDA_CUDA_BENCH_H_

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/common/status_macros.h"
#include "engine/kernels/cuda_check.h"
#include "engine/model/model_config.h"
#include "engine/runtime/cuda/cuda_model_runner.h"
#include "engine/runtime/cuda/cuda_weights.h"
#include "engine/runtime/cuda/weight_spec.h"

namespace onecard::bench {

struct Ceilings {
  double copy_bytes_per_s = 0;  // D2D, read + written
  double gemm_flops_per_s = 0;  // bf16 8192^3, cuBLAS, random data
  double h2d_bytes_per_s = 0;   // pinned
  double d2h_bytes_per_s = 0;   // pinned
  // E4M3 8192^3, cuBLASLt (fp32 sums and output), random codes; 0 before sm_89
  double gemm_fp8_flops_per_s = 0;
};

// Measured once per process (about a second), then cached.
absl::StatusOr<Ceilings> MeasureCeilings();

// The runner options every preset starts from: the defaults, with the
// comparison arms onecard-bench-cuda's flags set (main.cc: --gemm_splits,
// --fused_rope, --tuner_search, --tuner_at_cap).
engine::CudaRunnerOptions& BenchRunnerOptions();

// What a run of onecard-bench-cuda measures of a preset (main.cc's --batches
// and --shape): empty = all of it.
struct BenchSelection {
  std::vector<int32_t> batches;  // decode presets: these batch sizes only
  std::string shape;             // kernels-int4 / kernels-fp8: this shape only ("llama3-70b_down")
  // decode presets: the projections in this format instead of the preset's,
  // of the same kind ("int4-g32-min" for an int4 preset; ParseProjectionSpec)
  std::string weights;
};
BenchSelection& CurrentBenchSelection();

// A decode projection of a synthetic model, as the runner fuses it.
struct ProjectionCase {
  std::string name;  // "<model>_<projection>", e.g. "llama3-70b_down"
  int64_t n = 0;
  int64_t k = 0;
  engine::Projection projection = engine::Projection::kQkv;
};
// The four projections of llama3-8b, llama3-70b and mistral-large-123b, or
// the one --shape names (InvalidArgument naming it when none is).
absl::StatusOr<std::vector<ProjectionCase>> SelectedProjectionCases();

// Median of `runs` timings (ms, CUDA events on `stream`) of fn() after
// `warmup` untimed calls.
absl::StatusOr<double> MedianMs(cudaStream_t stream, int warmup, int runs,
                                const std::function<absl::Status()>& fn);

// The same for work captured once into a CUDA graph (fn's launches, which
// must be capturable) and replayed: the GPU's time, not the host's launch
// rate, for kernels of a few microseconds (the decode step runs as a graph).
absl::StatusOr<double> GraphMedianMs(cudaStream_t stream, int warmup, int runs,
                                     const std::function<absl::Status()>& fn);

double Median(std::vector<double> v);

// Device memory of seeded random BF16 values in +-0.05 (never zero), freed
// with its owner.
class DeviceMem {
 public:
  static absl::StatusOr<DeviceMem> Random(int64_t bytes, uint64_t seed, cudaStream_t stream) {
    DeviceMem m;
    CUDA_RETURN_IF_ERROR(cudaMalloc(&m.p_, bytes));
    RETURN_IF_ERROR(engine::FillUniformBf16(m.p_, bytes / 2, seed, 0.0f, 0.05f, stream));
    return m;
  }
  static absl::StatusOr<DeviceMem> Zeroed(int64_t bytes) {
    DeviceMem m;
    CUDA_RETURN_IF_ERROR(cudaMalloc(&m.p_, bytes));
    CUDA_RETURN_IF_ERROR(cudaMemset(m.p_, 0, bytes));
    return m;
  }
  DeviceMem() = default;
  DeviceMem(DeviceMem&& o) noexcept : p_(o.p_) { o.p_ = nullptr; }
  DeviceMem& operator=(DeviceMem&& o) noexcept {
    std::swap(p_, o.p_);
    return *this;
  }
  ~DeviceMem() {
    if (p_ != nullptr) cudaFree(p_);
  }
  char* get() const { return static_cast<char*>(p_); }

 private:
  void* p_ = nullptr;
};

// "NVIDIA H200 (132 SMs, 139.8 GiB)".
std::string CudaDeviceDescription();

// Bytes a decode step must move for batch sequences whose context (keys read,
// the new token included) is `context`: every weight once in its format
// (codes + scales + offsets for 4-bit projections; the LM head, norms and
// biases BF16; the embedding table only where it is the tied LM head), plus
// K and V of every context position, plus the new token's K/V written
// (kv_element_bytes a K or V element: 2 for BF16, 1 for an FP8 cache, whose
// scales are a few KiB).
double DecodeStepBytes(const engine::ModelConfig& c, const engine::ModelWeightsSpec& spec,
                       int64_t batch, int64_t context, int64_t kv_element_bytes = 2);
// FLOPs of that step: 2 per matrix weight per token, plus attention.
double DecodeStepFlops(const engine::ModelConfig& c, int64_t batch, int64_t context);
// FLOPs of a one-sequence prefill of `tokens` (causal attention, one logits row).
double PrefillFlops(const engine::ModelConfig& c, int64_t tokens);

// Deterministic ids spread over the vocabulary, distinct per index.
std::vector<int32_t> SyntheticPrompt(int32_t tokens, int32_t index, int64_t vocab);

// Sequences of one batch with fixed block tables (sequence s owns blocks
// [first_block + s * blocks_each, ...)), fed through ForwardSample greedily.
class BatchDriver {
 public:
  BatchDriver(engine::CudaModelRunner* runner, int32_t batch, int32_t prompt_tokens,
              int32_t max_tokens, int32_t first_block = 0);
  // Prefills every prompt (as many per step as the plan allows); each
  // sequence's first token comes from its last prompt position.
  // ResourceExhausted naming the blocks when the runner's KV cache holds
  // fewer than the batch's tables reach.
  absl::Status Prefill();
  // One decode step for every sequence; returns the step's wall time (ms).
  absl::StatusOr<double> DecodeStep();
  // Moves every sequence back to `position` (re-decoding positions there).
  void Rewind(int32_t position);
  int32_t position() const { return position_; }

 private:
  engine::CudaModelRunner* runner_;
  int32_t batch_;
  int32_t prompt_tokens_;
  int32_t position_ = 0;  // of the next token to decode
  std::vector<std::vector<int32_t>> tables_;
  std::vector<std::vector<int32_t>> prompts_;
  std::vector<int32_t> last_;
};

}  // namespace onecard::bench

#endif  // ONECARD_TOOLS_BENCH_CUDA_CUDA_BENCH_H_
