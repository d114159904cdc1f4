// Engine: the public C++ API of onecard's engine (no gRPC here). One engine
// owns one backend (cpu or cuda), the tokenizer, the block manager and the
// scheduler, and runs a step loop on its own thread: every step schedules a
// batch (continuous batching, chunked prefill), runs it, samples, detokenizes,
// checks stops and calls each request's callback.
//
// Contract:
// - Submit checks the request with ValidateRequest (request_validation.h:
//   the bounds every door shares) and returns InvalidArgument naming the
//   field.
// - Every accepted request gets exactly one output with finished == true,
//   carrying its FinishReason; no callback follows it.
// - Callbacks run on the engine thread and must not block; they may call
//   Cancel.
// Tested by tests/engine/runtime/engine_impl_test.cc, engine_step_test.cc and
// engine_cpu_test.cc.
#ifndef ONECARD_ENGINE_RUNTIME_ENGINE_H_
#define ONECARD_ENGINE_RUNTIME_ENGINE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "engine/common/clock.h"
#include "engine/model/checkpoint.h"
#include "engine/model/model_config.h"
#include "engine/runtime/model_runner.h"
#include "engine/tokenizer/tokenizer.h"

namespace onecard::engine {

struct SamplingParams {
  float temperature = 1.0f;         // 0 = greedy
  int32_t top_k = 0;                // 0 = off
  float top_p = 1.0f;               // (0, 1]
  float min_p = 0.0f;               // [0, 1]
  float repetition_penalty = 1.0f;  // > 0; 1 = off (HF semantics)
  float presence_penalty = 0.0f;    // OpenAI semantics, [-2, 2]
  float frequency_penalty = 0.0f;   // OpenAI semantics, [-2, 2]
  // Same seed, same prompt => same tokens. On the cpu backend whatever the
  // batch; on cuda for the same batch (its logits depend on the batch size
  // through BF16 rounding, so a draw near a boundary may differ otherwise).
  uint64_t seed = 0;
};

struct StoppingCriteria {
  int32_t max_tokens = 16;
  std::vector<std::string> stop_strings;  // not included in the output text
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  // Until this many tokens are generated, the stop token ids and (unless
  // ignore_eos) the model's end-of-sequence ids are masked out of sampling.
  int32_t min_tokens = 0;
};

enum class FinishReason {
  kNone,        // not finished
  kStop,        // a stop token id
  kLength,      // max_tokens or the context end
  kEos,         // the model's end-of-sequence token(s)
  kStopString,  // a stop string
  kCancelled,
  kDeadline,
  kPreempted,
  kError,
};
const char* FinishReasonName(FinishReason reason);

struct TokenLogprob {
  int32_t token_id = 0;
  float logprob = 0.0f;
  std::vector<std::pair<int32_t, float>> top;  // top_logprobs alternatives
};

struct Usage {
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
  int32_t cached_tokens = 0;  // prompt tokens served from the prefix cache
};

struct StreamOutput {
  std::vector<int32_t> token_ids;      // new tokens since the last output
  std::string text_delta;              // new complete UTF-8 text
  std::vector<TokenLogprob> logprobs;  // one per token, when asked
  bool finished = false;
  FinishReason finish_reason = FinishReason::kNone;
  absl::Status error;  // set when finish_reason == kError
  Usage usage;
  absl::Duration queue_time;  // submit -> first scheduled
  absl::Duration time_to_first_token;
};

using StreamCallback = std::function<void(const StreamOutput&)>;

struct GenerationRequest {
  std::string request_id;  // caller's id, for logs
  std::vector<int32_t> prompt_token_ids;
  SamplingParams sampling;
  StoppingCriteria stopping;
  // Higher runs first and preempts lower under KV pressure; the effective
  // priority rises with the time in the engine (EngineOptions::aging_interval).
  // The router's classes arrive as interactive 2, standard 1, batch 0.
  int32_t priority = 0;
  bool logprobs = false;
  int32_t top_logprobs = 0;  // 0..20
  absl::Time deadline = absl::InfiniteFuture();
  StreamCallback on_output;
};

struct EngineStats {
  int64_t num_waiting = 0;
  // num_waiting by GenerationRequest::priority; the counts sum to num_waiting
  // (a priority with none waiting is absent).
  std::map<int32_t, int64_t> num_waiting_by_priority;
  int64_t num_running = 0;
  int64_t kv_blocks_used = 0;
  int64_t kv_blocks_total = 0;
  double tokens_per_second = 0;  // generated, over the last few seconds
  int64_t num_preemptions = 0;   // by swap or by recompute
  // KV swap (EngineOptions::swap_space_bytes): sequences whose KV waits in
  // the swap space (counted in num_waiting too), the swap space's blocks in
  // use and in all, the preemptions by swap (counted in num_preemptions
  // too), and the blocks and bytes copied out to it and in from it.
  int64_t num_swapped = 0;
  int64_t kv_swap_blocks_used = 0;
  int64_t kv_swap_blocks_total = 0;
  int64_t num_swap_preemptions = 0;
  int64_t kv_swapped_out_blocks_total = 0;
  int64_t kv_swapped_in_blocks_total = 0;
  int64_t kv_swap_out_bytes_total = 0;
  int64_t kv_swap_in_bytes_total = 0;
  int64_t prompt_tokens_total = 0;
  int64_t generation_tokens_total = 0;
  int64_t steps_total = 0;
  bool draining = false;
};

// What one engine step did, for metrics (see EngineOptions::on_step).
struct StepInfo {
  absl::Duration duration;  // schedule + forward + sample + callbacks
  // The runner's call (Forward, or ForwardSample with device sampling): the
  // model's time, the device's on cuda. duration - forward is the host's
  // work of the step (admission, schedule, batch, sampling on the host,
  // detokenization, stop checks, callbacks), during which the model idles.
  absl::Duration forward;
  // The runner's own host work inside `forward` (checks, packing, launches:
  // ModelRunner::last_step_times), zero where it tells none apart. The
  // step's host work is duration - forward + runner_host.
  absl::Duration runner_host;
  // From the end of the previous step's runner call to the start of this
  // one, when the previous step ran one and left requests (the engine busy):
  // the model's idle gap between two steps. Zero otherwise, and with
  // look-ahead (async_scheduling), whose steps overlap.
  absl::Duration gap;
  // Where the runner measures it on the device and this step's work follows
  // the previous step's (gap not zero, or a step launched ahead of the one
  // it waited for): the device's idle time between the two steps' work (it
  // also holds the runner's host work before this step's launch).
  std::optional<absl::Duration> device_gap;
  int32_t num_seqs = 0;    // sequences in the batch
  int32_t num_tokens = 0;  // tokens run (prefill chunks + decode tokens)
};

struct EngineOptions {
  // .gguf file, HF checkpoint directory, or synthetic:<shape>[:<weights>]
  // (engine/model/synthetic_shapes.h; cuda backend only).
  std::string model_path;
  std::string backend = "cpu";  // "cpu" or "cuda"
  int32_t num_threads = 0;      // cpu backend; 0 = hardware concurrency
  int32_t kv_block_size = 16;
  int64_t num_kv_blocks = 0;             // 0 = from kv_cache_bytes
  int64_t kv_cache_bytes = 256ll << 20;  // cpu backend
  // How K and V are stored (model_runner.h): bf16, or fp8 with the
  // checkpoint's or calibrated scales (kv_scales.h); the cpu backend rounds
  // them as they are written (fp32 storage), the cuda backend stores BF16
  // (auto and bf16) or a byte an element (fp8).
  KvCacheDtype kv_cache_dtype = KvCacheDtype::kAuto;
  // cpu backend: how the checkpoint's weights are held (model_runner.h):
  // kNative as the file stores them where the cpu kernels multiply that
  // format, kF32 all dequantized (the oracle). The cuda backend ignores it.
  CpuWeightFormat cpu_weight_format = CpuWeightFormat::kNative;
  // cuda backend: how FP8 projections are multiplied in steps past the GEMV
  // (model_runner.h); the cpu backend ignores it.
  Fp8Compute fp8_compute = Fp8Compute::kW8A8;
  int64_t gpu_memory_budget = 0;  // cuda backend: bytes; 0 = the card's free memory
  // cuda backend: time the decode buckets' GEMM forms at startup and keep
  // the fastest (docs/cuda.md). The choice is by timing, so two engines may
  // differ in summation order (a near-tie greedy token can differ between
  // them); false: cuBLAS's default everywhere, the same in every process.
  bool tune_gemms = true;
  // cuda backend: a file that keeps the tuned choices between starts (only
  // shapes it lacks are timed; CudaRunnerOptions::tuning_cache). Empty: none.
  std::string tuning_cache;
  // cuda backend: bytes of pinned host memory for the layers the card cannot
  // hold, streamed each step through the ring (CudaRunnerOptions); 0 = no
  // offload (a model larger than gpu_memory_budget is refused).
  int64_t cpu_memory_budget = 0;
  int32_t offload_ring_layers = 2;  // cuda backend: device slots the streamed layers pass through
  // cuda backend: at most this many layers on the card (llama.cpp's -ngl),
  // needs cpu_memory_budget > 0; -1 = as many as fit.
  int32_t gpu_layers = -1;
  // cuda backend: threads the CPU computes offloaded layers with (0 = every
  // hardware thread but one, -1 = none: every offloaded layer streams), and
  // how many of them it takes (-1 = the cost model's count).
  int32_t offload_cpu_threads = 0;
  int32_t offload_cpu_layers = -1;
  int32_t max_num_seqs = 64;         // running sequences per step
  int32_t max_batched_tokens = 512;  // token budget per step (chunked prefill)
  // A request's priority rises by one each aging_interval (on `clock`) after
  // it reaches the scheduler, so no class starves: a priority-c request ranks
  // ahead of every priority <= P one that arrives (P - c + 1) * aging_interval
  // after it (engine/scheduler/scheduler.h). Zero: no aging; not negative.
  absl::Duration aging_interval = absl::Seconds(10);
  // Arrival order only, request priorities ignored (SchedulerOptions::fifo:
  // the baseline of the serving benchmarks' priority comparison).
  bool fifo_scheduling = false;
  // A prefill chunk takes at most this many tokens (SchedulerOptions::
  // long_prefill_token_threshold), so a long prompt does not fill a step of
  // a large budget alone; 0 = off. Not negative.
  int32_t long_prefill_token_threshold = 0;
  int32_t max_context = 0;  // 0 = the model's max_position_embeddings
  bool enable_prefix_caching = true;
  // Bytes of host memory (pinned on cuda) for KV swap: a sequence preempted
  // under KV pressure has its computed blocks copied there while they fit,
  // and copied back when it resumes; else it is recomputed
  // (engine/scheduler/scheduler.h). 0 = no swap space; a runner without
  // swap refuses more, as does a host without that much memory available.
  int64_t swap_space_bytes = 0;
  int32_t max_waiting = 0;   // 0 = unbounded; else Submit refuses past it
  bool start_thread = true;  // false: the caller drives Step() (tests)
  Clock* clock = nullptr;    // nullptr = RealClock (tests inject a FakeClock)
  // With a runner that samples on the device (cuda), steps whose rows need
  // no logprobs (and not both the repetition and the presence/frequency
  // penalties) take token ids from the device (engine/kernels/sample.h)
  // instead of copying logits to the host sampler. Greedy tokens are the
  // same either way; a seeded draw picks by the device's rules, so the same
  // seed gives the same tokens on the same backend. false: always the host.
  bool device_sampling = true;
  // One step of look-ahead: while the device runs step N, the host plans and
  // launches step N+1 (its decodes take step N's tokens on the device,
  // ModelRunner::LaunchSample) and then streams step N's tokens, so the
  // host's work of a step (schedule, pack, detokenize, stop checks,
  // callbacks) overlaps the device's instead of idling it. The tokens are
  // the same as without it. A request that ends by eos or a stop has had one
  // more row computed, discarded; a max_tokens or context end is foreseen.
  // Taken while every request samples on the device without penalties,
  // logprobs or min_tokens (device_sampling, a runner that samples); the
  // engine steps one at a time otherwise.
  bool async_scheduling = false;
  // Optional observer, called on the engine thread after every step that ran
  // a batch (the worker's step-duration histogram); must not block.
  std::function<void(const StepInfo&)> on_step;
};

class Engine {
 public:
  static absl::StatusOr<std::unique_ptr<Engine>> Create(const EngineOptions& options);
  virtual ~Engine() = default;

  // Returns the engine's id for the request. UNAVAILABLE while draining,
  // RESOURCE_EXHAUSTED when max_waiting is reached.
  virtual absl::StatusOr<uint64_t> Submit(GenerationRequest request) = 0;
  // Ends the request with kCancelled within one step and frees its blocks.
  // Unknown or finished ids are ignored.
  virtual void Cancel(uint64_t id) = 0;
  virtual EngineStats Stats() const = 0;
  // Stops admitting (Submit answers UNAVAILABLE) and waits until every
  // request has finished or the timeout passes; then cancels the rest.
  virtual absl::Status Drain(absl::Duration timeout) = 0;
  // Runs one step (only when start_thread == false). Returns false when idle.
  virtual absl::StatusOr<bool> Step() = 0;

  virtual const ModelConfig& config() const = 0;
  virtual const Tokenizer& tokenizer() const = 0;
  virtual int32_t max_context() const = 0;
};

// The parts Engine::Create builds, for tools that drive a runner themselves
// (onecard perplexity): the checkpoint's tokenizer (OpenTokenizer, declared
// in engine/tokenizer/tokenizer.h, included above), and the backend runner of
// options.backend with the options' KV and CUDA settings.
absl::StatusOr<std::unique_ptr<ModelRunner>> CreateModelRunner(const Checkpoint& checkpoint,
                                                               const EngineOptions& options);

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_RUNTIME_ENGINE_H_
