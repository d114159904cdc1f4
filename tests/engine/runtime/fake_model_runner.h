// FakeModelRunner: a ModelRunner for engine tests. Its "KV cache" stores the
// token id written at each (block, slot); a logits row is a function of the
// whole context read back through the chunk's block table, so a wrong table
// (bad sharing, stale block, lost preemption state) changes the output.
// Reading a slot never written is an error. BatchInput::all_logits gives a
// row for every token of every chunk. With swap, a host pool of token ids
// (a block of block_size ids, "4 bytes" each) that SwapOut / SwapIn copy. Used by
// tests/engine/runtime/ and tests/tools/onecard/.
#ifndef ONECARD_TESTS_ENGINE_RUNTIME_FAKE_MODEL_RUNNER_H_
#define ONECARD_TESTS_ENGINE_RUNTIME_FAKE_MODEL_RUNNER_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "engine/runtime/model_runner.h"

namespace onecard::engine::testing {

// Logits [vocab] for the next token after context.
using LogitsFn = std::function<std::vector<float>(std::span<const int32_t> context)>;

// The default: pseudo-random logits in [-4, 4) hashed from the context.
std::vector<float> HashedLogits(std::span<const int32_t> context, int32_t vocab_size);

struct FakeRunnerOptions {
  int32_t vocab_size = 64;
  int32_t num_blocks = 64;
  int32_t block_size = 4;
  LogitsFn logits_fn;          // empty: HashedLogits
  int32_t fail_on_token = -1;  // a chunk holding this token fails the whole Forward
  std::function<void(const BatchInput&)> on_forward;  // called first in Forward
  // SamplesOnDevice(): ForwardSample answers the greedy token of each row
  // (whatever the params) and shows the params and histories it was given.
  bool device_sampling = false;
  std::function<void(std::span<const SampleRowParams>, std::span<const std::span<const int32_t>>)>
      on_forward_sample;
  // KV swap: false keeps ModelRunner's defaults (Unimplemented).
  bool swap = false;
  // SwapOut leaves its device blocks unwritten (so a resumed sequence that
  // reads one not copied back fails): only where nothing else reads a freed
  // block, i.e. without prefix caching.
  bool poison_swapped_out = false;
  bool fail_swap = false;  // SwapOut and SwapIn fail (injected)
  // What last_step_times() answers after every call (nullopt: as the cpu runner).
  std::optional<RunnerStepTimes> step_times;
  // WaitSample of the launch with this index (0 = the first) answers an
  // injected error instead of its tokens (a device error found late).
  int64_t fail_wait_of_launch = -1;
};

class FakeModelRunner : public ModelRunner {
 public:
  explicit FakeModelRunner(FakeRunnerOptions options);
  const ModelConfig& config() const override { return config_; }
  const KvLayout& kv_layout() const override { return layout_; }
  absl::Status Forward(const BatchInput& batch, std::vector<float>* logits) override;
  std::string name() const override { return "fake"; }
  bool SamplesOnDevice() const override { return options_.device_sampling; }
  std::optional<RunnerStepTimes> last_step_times() const override { return options_.step_times; }
  absl::Status ForwardSample(const BatchInput& batch, std::span<const SampleRowParams> rows,
                             std::span<const std::span<const int32_t>> histories,
                             std::vector<int32_t>* tokens) override;
  // ModelRunner's defaults, counted (and fail_wait_of_launch).
  absl::Status LaunchSample(const BatchInput& batch,
                            std::span<const SampleRowParams> rows) override;
  absl::Status WaitSample(std::vector<int32_t>* tokens) override;
  absl::StatusOr<KvSwapSpace> AllocateSwapSpace(int64_t bytes) override;
  absl::Status SwapOut(std::span<const KvBlockCopy> copies) override;
  absl::Status SwapIn(std::span<const KvBlockCopy> copies) override;

  int64_t num_forward_calls() const { return num_forward_calls_; }
  int64_t num_forward_sample_calls() const { return num_forward_sample_calls_; }
  int64_t num_tokens_computed() const { return num_tokens_computed_; }
  size_t max_chunks_in_a_batch() const { return max_chunks_; }
  int64_t num_launches() const { return num_launches_; }
  int64_t num_pending_inputs() const { return num_pending_inputs_; }  // pending tokens launched
  int64_t max_unwaited() const { return max_unwaited_; }  // launched steps not waited for

 private:
  // Forward's work (on_forward, KV writes, logits), shared with ForwardSample.
  absl::Status ComputeLogits(const BatchInput& batch, std::vector<float>* logits);
  absl::Status WriteChunk(const SequenceChunk& chunk);
  absl::Status ReadContext(const SequenceChunk& chunk, std::vector<int32_t>* context) const;

  FakeRunnerOptions options_;
  ModelConfig config_;
  KvLayout layout_;
  std::vector<int32_t> pool_;       // [num_blocks * block_size] token per slot, -1 unwritten
  std::vector<int32_t> host_pool_;  // [swap blocks * block_size]
  int64_t num_forward_calls_ = 0;
  int64_t num_forward_sample_calls_ = 0;
  int64_t num_tokens_computed_ = 0;
  size_t max_chunks_ = 0;
  int64_t num_launches_ = 0;
  int64_t num_waits_ = 0;
  int64_t num_pending_inputs_ = 0;
  int64_t max_unwaited_ = 0;
};

}  // namespace onecard::engine::testing

#endif  // ONECARD_TESTS_ENGINE_RUNTIME_FAKE_MODEL_RUNNER_H_
