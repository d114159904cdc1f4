// EngineImpl: the Engine of engine.h over one ModelRunner. CreateEngine
// builds one from injected parts (tests pass a fake runner and tokenizer;
// Engine::Create opens a checkpoint and a backend, see engine_create.cc).
//
// The step loop (its own thread, or the caller of Step()):
//   admit submitted requests -> end cancelled / expired ones -> Schedule ->
//   the plan's swaps (runner->SwapOut, then SwapIn) -> build the BatchInput
//   -> runner->Forward -> sample each logits row -> RequestState
//   (detokenize, stop checks) -> callbacks.
// With options.async_scheduling, while every request can be sampled ahead
// (engine_lookahead.cc): admit -> end cancelled / expired -> Schedule (the
// sequences of the step in flight hold a pending token) -> swaps -> build ->
// runner->LaunchSample -> the step's tokens become pending tokens -> wait for
// the step launched before (runner->WaitSample) -> resolve its tokens ->
// RequestState -> callbacks. A request that ends while its row is in flight
// has that row dropped; its blocks are freed at once (the runner keeps the
// device's order: the step in flight writes them before any later step).
// Threads: Submit, Cancel, Stats and Drain may be called from any thread;
// they touch only the mu_-guarded hand-over state. Everything else (the
// scheduler, the requests, the sampler) belongs to the step loop. Callbacks
// run on the step loop without any lock held, so they may call Cancel or
// Submit. A runner error ends the requests of that batch with kError (a
// failed swap: those of the step's chunks and the sequences it swapped out);
// the engine keeps serving. Destroying the engine cancels what is left (each
// request still gets its one final output). Drain returns OK when everything
// finished in time, else DeadlineExceeded after cancelling the rest (each
// cancelled request's final output is delivered before Drain returns). Its
// timeout is measured with the injected clock when the caller drives Step(),
// and in real time (a condition wait) when the engine runs its own thread.
// Tested by tests/engine/runtime/engine_impl_test.cc with a fake runner and
// tokenizer, and by engine_cpu_test.cc on SmolLM2.
#ifndef ONECARD_ENGINE_RUNTIME_ENGINE_IMPL_H_
#define ONECARD_ENGINE_RUNTIME_ENGINE_IMPL_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "engine/model/checkpoint.h"
#include "engine/runtime/engine.h"
#include "engine/runtime/model_runner.h"
#include "engine/runtime/request_state.h"
#include "engine/sampling/sampler.h"
#include "engine/scheduler/scheduler.h"

namespace onecard::engine {

// The penalty kinds, whose histories differ (sampler.h): prompt + output for
// the repetition penalty, the output alone for presence and frequency.
inline bool RepetitionPenalized(const SamplingParams& p) { return p.repetition_penalty != 1.0f; }
inline bool PresenceOrFrequencyPenalized(const SamplingParams& p) {
  return p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f;
}

struct EngineParts {
  std::unique_ptr<ModelRunner> runner;
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<Checkpoint> checkpoint;  // optional: kept alive for the runner
};

// Builds an engine from its parts. Uses options' scheduling fields
// (max_num_seqs, max_batched_tokens, aging_interval, max_context,
// enable_prefix_caching, max_waiting, start_thread, clock: the scheduler ages
// on the same clock); the KV pool is the runner's kv_layout(), and with
// swap_space_bytes > 0 the swap space is the runner's AllocateSwapSpace.
// InvalidArgument naming the option when one is out of range; the runner's
// error prefixed with "EngineOptions.swap_space_bytes: " when it cannot
// swap or the host lacks the memory.
absl::StatusOr<std::unique_ptr<Engine>> CreateEngine(EngineParts parts,
                                                     const EngineOptions& options);

class EngineImpl : public Engine {
 public:
  EngineImpl(EngineParts parts, const EngineOptions& options, int32_t max_context,
             KvSwapSpace swap_space = {});
  ~EngineImpl() override;

  absl::StatusOr<uint64_t> Submit(GenerationRequest request) override;
  void Cancel(uint64_t id) override;
  EngineStats Stats() const override;
  absl::Status Drain(absl::Duration timeout) override;
  absl::StatusOr<bool> Step() override;

  const ModelConfig& config() const override { return parts_.runner->config(); }
  const Tokenizer& tokenizer() const override { return *parts_.tokenizer; }
  int32_t max_context() const override { return max_context_; }

  void StartThread();  // called once by CreateEngine when options.start_thread

 private:
  void Loop();
  // One step; false when nothing ran and no request changed state.
  bool RunStep();
  bool AdmitIncoming();
  bool EndCancelledAndExpired();
  void OnScheduled(const SchedulerOutput& plan);
  // The plan's swaps (scheduler.h: swap_out, then swap_in); on a runner
  // error, fails the plan's requests (those of its chunks and those it
  // swapped out) and returns false.
  bool RunSwaps(const SchedulerOutput& plan);
  BatchInput BuildBatch(const SchedulerOutput& plan, size_t* rows) const;
  absl::Status RunForward(const SchedulerOutput& plan, std::vector<float>* logits);
  void SampleAndEmit(const SchedulerOutput& plan, const std::vector<float>& logits);
  // Device sampling (EngineOptions::device_sampling): whether every row of
  // the plan can take its token from the runner, then the step doing so.
  bool CanSampleOnDevice(const SchedulerOutput& plan) const;
  absl::Status RunForwardSample(const SchedulerOutput& plan, std::vector<int32_t>* tokens);
  void EmitTokens(const SchedulerOutput& plan, const std::vector<int32_t>& tokens);
  // Appends a sampled token to its sequence and streams it (or finishes).
  void EmitToken(const ScheduledChunk& chunk, const SampleResult& sample, absl::Time now);
  // Streams a token already in the sequence (num_seq_tokens: up to and
  // including it), or finishes the request with it.
  void StreamToken(RequestState& state, const SampleResult& sample, int32_t num_seq_tokens,
                   absl::Time now);
  // The device sampler's parameters of a logits row of `seq`, which samples
  // by `p`.
  static SampleRowParams RowParams(const SamplingParams& p, const Sequence& seq);
  void FailBatch(const SchedulerOutput& plan, const absl::Status& status);
  // Calls options_.on_step (when set) for a step that ran `plan`.
  void ReportStep(const SchedulerOutput& plan, absl::Time step_start, absl::Duration forward,
                  absl::Duration gap, bool consecutive,
                  const std::optional<RunnerStepTimes>& runner_times) const;

  // engine_lookahead.cc (EngineOptions::async_scheduling).
  // Whether this step may launch ahead: the option, a runner and requests
  // that sample on the device without histories, logprobs or masks.
  bool CanLookAhead() const;
  bool RunStepAhead(absl::Time step_start, bool progressed);
  // Waits for the step in flight and streams its tokens.
  void CompleteInFlight();
  // Whether the token a sequence's row samples now will be its last
  // (max_tokens or the context reached).
  bool LastTokenAhead(const Sequence& seq, const RequestState& state) const;
  // Ends a request: removes it everywhere, then delivers its final output.
  void FinishRequest(uint64_t id, const StreamOutput& final_output);
  void CancelEverything();  // at destruction
  void PublishStats(int64_t generated_tokens);
  bool StepUntilIdle(absl::Duration timeout);
  bool HasWorkOrStop() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool Idle() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return num_active_ == 0; }

  const EngineOptions options_;
  EngineParts parts_;
  Clock* const clock_;
  const int32_t max_context_;
  const int64_t vocab_size_;
  const absl::Time start_time_;
  const KvSwapSpace swap_space_;  // num_blocks 0: no swap

  // The step loop's own state (step_mu_ only serializes Step/Drain callers).
  absl::Mutex step_mu_;
  Scheduler scheduler_;
  Sampler sampler_;
  std::map<uint64_t, std::unique_ptr<RequestState>> requests_;
  std::deque<std::pair<absl::Time, int64_t>> recent_tokens_;  // (step end, tokens)
  int64_t prompt_tokens_total_ = 0;
  int64_t generation_tokens_total_ = 0;
  int64_t steps_total_ = 0;
  int64_t swapped_out_blocks_total_ = 0;  // copied by the runner
  int64_t swapped_in_blocks_total_ = 0;
  // When the last step's runner call ended; reset by a step that ran none.
  std::optional<absl::Time> last_forward_end_;
  // The launched step whose tokens are not back yet (look-ahead): its logits
  // rows' sequences, in order.
  struct InFlight {
    std::vector<int64_t> row_seqs;
  };
  std::optional<InFlight> in_flight_;

  // Hand-over state shared with callers.
  mutable absl::Mutex mu_;
  std::vector<std::unique_ptr<RequestState>> incoming_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> cancels_ ABSL_GUARDED_BY(mu_);
  bool cancel_all_ ABSL_GUARDED_BY(mu_) = false;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  int64_t num_active_ ABSL_GUARDED_BY(mu_) = 0;  // accepted and not finished
  EngineStats stats_ ABSL_GUARDED_BY(mu_);       // published after each step
  std::thread thread_;
};

}  // namespace onecard::engine

#endif  // ONECARD_ENGINE_RUNTIME_ENGINE_IMPL_H_
