// CudaRunnerImpl::LaunchSample and WaitSample (model_runner.h: look-ahead).
// A launched step is the same work as ForwardSample's, enqueued on the one
// stream without waiting:
//
//   host:    pack N+1 -> enqueue N+1 ------------> wait N -> tokens of N
//   stream:  ... step N ... | meta copy, FillPendingTokens, step N+1, token copy | ...
//
// The step's metadata and its tokens' copy alternate between two pinned
// slots (N+1 is packed while N's copy may still be queued; N's tokens are
// read while N+1's copy is queued). A pending token is packed as -(row + 1)
// and replaced on the device by row `row` of buf_.out_tokens, which still
// holds the previous step's tokens: every step writes it at its end, in
// stream order. Forward and ForwardSample use slot 0 and only with nothing
// in flight; they break the chain (the next launch may hold no pending
// token).
// Tested by tests/gpu/cuda_lookahead_test.cc (against ForwardSample).
#include <algorithm>
#include <chrono>

#include "engine/common/status_macros.h"
#include "engine/kernels/cuda_check.h"
#include "engine/runtime/cuda/cuda_runner_impl.h"
#include "engine/runtime/cuda/runner_kernels.h"

namespace onecard::engine {
namespace {

double MicrosSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

absl::Status CudaRunnerImpl::LaunchSample(const BatchInput& batch,
                                          std::span<const SampleRowParams> rows) {
  if (cpu_layers_ != nullptr || weight_stream_ != nullptr) {
    return ModelRunner::LaunchSample(batch, rows);
  }
  if (launched_.size() >= 2) {
    return absl::FailedPreconditionError("LaunchSample: two launched steps are not waited for");
  }
  const auto t0 = std::chrono::steady_clock::now();
  const SampleInputs sample{rows, {}};
  RETURN_IF_ERROR(CheckBatch(batch, &sample, /*pending_allowed=*/true));
  ASSIGN_OR_RETURN(const std::vector<int32_t> pending_rows, PendingRows(batch, last_launch_seqs_));
  const bool any_pending =
      std::any_of(pending_rows.begin(), pending_rows.end(), [](int32_t r) { return r >= 0; });
  const StepShape shape = ShapeStep(batch, &sample);
  Launched step{.slot = static_cast<int>(launches_made_ % 2),
                .rows = static_cast<int32_t>(rows.size()),
                .index = launches_made_,
                .graph = shape.graph,
                .follows_launch = launch_chain_};
  char* meta = (step.slot == 0 ? meta_host_ : meta_host_ahead_)->data();
  const int64_t bytes = PackStep(batch, &sample, shape, meta, pending_rows);
  cudaStream_t stream = ctx_->stream();
  CUDA_RETURN_IF_ERROR(cudaEventRecord(ahead_starts_[step.index % 4], stream));
  CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(buf_.meta, meta, bytes, cudaMemcpyHostToDevice, stream));
  if (any_pending) {
    RETURN_IF_ERROR(
        FillPendingTokens(reinterpret_cast<int32_t*>(buf_.meta + shape.layout.token_ids),
                          shape.tokens, buf_.out_tokens, stream));
  }
  RETURN_IF_ERROR(Launch(shape));
  char* out = (step.slot == 0 ? out_host_ : out_host_ahead_)->data();
  CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(out, buf_.out_tokens, int64_t{step.rows} * 4,
                                       cudaMemcpyDeviceToHost, stream));
  CUDA_RETURN_IF_ERROR(cudaEventRecord(ahead_ends_[step.index % 4], stream));
  step.enqueue_us = MicrosSince(t0);
  launched_.push_back(step);
  ++launches_made_;
  launch_chain_ = true;
  previous_end_ = false;  // the next Forward / ForwardSample has no previous end to measure from
  last_launch_seqs_.clear();
  for (const SequenceChunk& c : batch.chunks) {
    if (c.want_logits) last_launch_seqs_.push_back(c.seq_id);
  }
  return absl::OkStatus();
}

absl::Status CudaRunnerImpl::WaitSample(std::vector<int32_t>* tokens) {
  if (cpu_layers_ != nullptr || weight_stream_ != nullptr) return ModelRunner::WaitSample(tokens);
  if (launched_.empty()) return absl::FailedPreconditionError("WaitSample: no launched step");
  const Launched step = launched_.front();
  launched_.erase(launched_.begin());
  const auto wait_start = std::chrono::steady_clock::now();
  CUDA_RETURN_IF_ERROR(cudaEventSynchronize(ahead_ends_[step.index % 4]));
  const double wait_us = MicrosSince(wait_start);
  const auto read_start = std::chrono::steady_clock::now();
  const int32_t* t =
      reinterpret_cast<const int32_t*>((step.slot == 0 ? out_host_ : out_host_ahead_)->data());
  tokens->assign(t, t + step.rows);
  std::optional<absl::Duration> device_gap;
  if (step.follows_launch) {  // a failed query only loses the figure
    float gap_ms = 0.0f;
    if (cudaEventElapsedTime(&gap_ms, ahead_ends_[(step.index - 1) % 4],
                             ahead_starts_[step.index % 4]) == cudaSuccess) {
      device_gap = absl::Microseconds(static_cast<int64_t>(1e3 * gap_ms));
    }
  }
  timing_ = CudaStepTiming{.enqueue_us = step.enqueue_us,
                           .total_us = step.enqueue_us + wait_us + MicrosSince(read_start),
                           .graph = step.graph};
  if (options_.time_steps) {
    float gpu_ms = 0.0f;
    CUDA_RETURN_IF_ERROR(
        cudaEventElapsedTime(&gpu_ms, ahead_starts_[step.index % 4], ahead_ends_[step.index % 4]));
    timing_.gpu_us = 1e3 * gpu_ms;
  }
  step_times_ =
      RunnerStepTimes{.host = absl::Microseconds(static_cast<int64_t>(timing_.total_us - wait_us)),
                      .device_gap = device_gap};
  return absl::OkStatus();
}

}  // namespace onecard::engine
