// The Generate write reactor. See generate_stream.h for the backpressure,
// cancellation and threading rules this file keeps.
#include "services/worker/generate_stream.h"

#include <utility>

#include "absl/time/clock.h"
#include "engine/common/log.h"
#include "services/common/status.h"
#include "services/common/wire_message.h"
#include "services/worker/response_convert.h"

namespace onecard::services {
namespace {

// Coalesced chunks stay well below gRPC's default 4 MiB receive limit.
constexpr int64_t kMaxChunkBytes = 1 << 20;

// An upper bound of the encoded size of one output in a chunk.
int64_t EstimatedBytes(const engine::StreamOutput& output) {
  int64_t bytes = static_cast<int64_t>(output.text_delta.size()) + 8;
  bytes += 6 * static_cast<int64_t>(output.token_ids.size());
  for (const engine::TokenLogprob& lp : output.logprobs) {
    bytes += 16 + 16 * static_cast<int64_t>(lp.top.size());
  }
  return bytes + (output.finished ? 64 : 0);
}

}  // namespace

GenerateStream::GenerateStream(grpc::CallbackServerContext* context, engine::Engine* engine,
                               Hooks hooks, absl::Time arrival)
    : context_(context),
      engine_(engine),
      hooks_(std::move(hooks)),
      arrival_(arrival),
      deadline_(DeadlineFromChrono(context->deadline())) {}

GenerateStream* GenerateStream::Start(grpc::CallbackServerContext* context, engine::Engine* engine,
                                      engine::GenerationRequest request, Hooks hooks,
                                      absl::Time arrival) {
  auto* stream = new GenerateStream(context, engine, std::move(hooks), arrival);
  stream->request_id_ = request.request_id;
  request.deadline = stream->deadline_;
  request.on_output = [stream](const engine::StreamOutput& out) { stream->OnEngineOutput(out); };
  absl::StatusOr<uint64_t> id = engine->Submit(std::move(request));
  if (!id.ok()) {
    absl::Status status = id.status();
    if (status.code() == absl::StatusCode::kResourceExhausted) {
      status = WithRetryAfter(std::move(status), stream->hooks_.retry_after);
    }
    stream->EndNow(status, RejectionLabel(status.code()));
    return stream;
  }
  stream->SetEngineId(*id);
  return stream;
}

GenerateStream* GenerateStream::Reject(grpc::CallbackServerContext* context, absl::Status status,
                                       Hooks hooks, absl::Time arrival) {
  auto* stream = new GenerateStream(context, /*engine=*/nullptr, std::move(hooks), arrival);
  const std::string outcome = RejectionLabel(status.code());
  stream->EndNow(std::move(status), outcome);
  return stream;
}

void GenerateStream::EndNow(absl::Status status, const std::string& outcome) {
  AddStatusTrailers(status, context_);
  Action action;
  {
    absl::MutexLock lock(&mu_);
    engine_done_ = true;
    final_status_ = ToGrpcStatus(status);
    record_.outcome = outcome;
    record_.e2e_latency = absl::Now() - arrival_;
    action = NextActionLocked();
  }
  Perform(this, std::move(action));
}

void GenerateStream::SetEngineId(uint64_t id) {
  bool cancel = false;
  {
    absl::MutexLock lock(&mu_);
    engine_id_ = id;
    cancel = client_gone_ && !engine_done_;
  }
  // Still alive: this runs in the handler, before gRPC binds the reactor,
  // so a Finish requested meanwhile is only queued and OnDone cannot run.
  if (cancel) engine_->Cancel(id);
}

void GenerateStream::OnEngineOutput(const engine::StreamOutput& output) {
  const absl::Time now = absl::Now();
  Action action;
  std::function<void()> on_change;
  {
    absl::MutexLock lock(&mu_);
    if (!output.token_ids.empty()) {
      if (!first_token_time_.has_value()) first_token_time_ = now;
      last_token_time_ = now;
      num_tokens_ += static_cast<int64_t>(output.token_ids.size());
    }
    if (!client_gone_) {
      v1::GenerateResponse& chunk = ChunkForLocked(EstimatedBytes(output));
      if (!first_chunk_made_ || output.finished) chunk.set_request_id(request_id_);
      first_chunk_made_ = true;
      AppendOutput(output, now - arrival_, &chunk);
    }
    if (output.finished) {
      RecordFinal(output, now);
      on_change = hooks_.on_change;
    }
    action = NextActionLocked();
  }
  if (on_change) on_change();
  Perform(this, std::move(action));
}

void GenerateStream::RecordFinal(const engine::StreamOutput& output, absl::Time now) {
  engine_done_ = true;
  final_status_ = ToGrpcStatus(TerminalStatus(output, cancelled_by_client_));
  record_.outcome = OutcomeLabel(output.finish_reason);
  // A passed gRPC deadline reaches us as a cancel, often the client's own
  // (its deadline comes before ours by the request's transit time); count
  // a cancel that close to the deadline as the deadline it was.
  constexpr absl::Duration kDeadlineSlack = absl::Seconds(1);
  if (output.finish_reason == engine::FinishReason::kCancelled && cancelled_by_client_ &&
      now >= deadline_ - kDeadlineSlack) {
    record_.outcome = OutcomeLabel(engine::FinishReason::kDeadline);
  }
  record_.e2e_latency = now - arrival_;
  record_.prompt_tokens = output.usage.prompt_tokens;
  record_.cached_tokens = output.usage.cached_tokens;
  if (first_token_time_.has_value()) {
    record_.time_to_first_token = *first_token_time_ - arrival_;
    if (num_tokens_ >= 2) {
      record_.time_per_output_token = (last_token_time_ - *first_token_time_) / (num_tokens_ - 1);
    }
  }
  if (output.finish_reason == engine::FinishReason::kError) {
    Log(LogLevel::kWarn, "worker", "request %s failed: %s", request_id_,
        std::string(output.error.message()));
  }
}

void GenerateStream::OnWriteDone(bool ok) {
  Action action;
  std::optional<uint64_t> cancel;
  engine::Engine* engine = engine_;
  {
    absl::MutexLock lock(&mu_);
    write_in_flight_ = false;
    if (!ok && !client_gone_) {
      client_gone_ = true;
      cancelled_by_client_ = true;
      if (!engine_done_) cancel = engine_id_;
    }
    action = NextActionLocked();
  }
  if (cancel.has_value()) engine->Cancel(*cancel);
  Perform(this, std::move(action));
}

void GenerateStream::OnCancel() {
  Action action;
  std::optional<uint64_t> cancel;
  engine::Engine* engine = engine_;
  {
    absl::MutexLock lock(&mu_);
    client_gone_ = true;
    if (!engine_done_) {
      cancelled_by_client_ = true;
      cancel = engine_id_;  // unset: SetEngineId cancels when it comes
    }
    action = NextActionLocked();
  }
  if (cancel.has_value()) engine->Cancel(*cancel);
  Perform(this, std::move(action));
}

void GenerateStream::OnDone() {
  RequestRecord record;
  {
    absl::MutexLock lock(&mu_);
    record = record_;
  }
  if (hooks_.metrics != nullptr) hooks_.metrics->ObserveRequest(record);
  Log(LogLevel::kDebug, "worker", "request=%s outcome=%s e2e_ms=%d", request_id_, record.outcome,
      absl::ToInt64Milliseconds(record.e2e_latency));
  if (hooks_.on_done) hooks_.on_done();
  delete this;
}

v1::GenerateResponse& GenerateStream::ChunkForLocked(int64_t bytes) {
  if (pending_.empty() || (last_chunk_bytes_ > 0 && last_chunk_bytes_ + bytes > kMaxChunkBytes)) {
    pending_.emplace_back();
    last_chunk_bytes_ = 0;
  }
  last_chunk_bytes_ += bytes;
  return pending_.back();
}

GenerateStream::Action GenerateStream::NextActionLocked() {
  if (write_in_flight_ || finish_called_) return {};
  if (client_gone_) pending_.clear();
  if (!pending_.empty()) {
    in_flight_ = ToByteBuffer(pending_.front());
    pending_.pop_front();
    write_in_flight_ = true;
    return {Kind::kWrite, grpc::Status::OK};
  }
  if (engine_done_) {
    finish_called_ = true;
    return {Kind::kFinish, final_status_};
  }
  return {};
}

void GenerateStream::Perform(GenerateStream* stream, Action action) {
  // kNone must not touch the stream: another thread may be finishing it.
  switch (action.kind) {
    case Kind::kNone:
      return;
    case Kind::kWrite:
      stream->StartWrite(&stream->in_flight_);
      return;
    case Kind::kFinish:
      stream->Finish(std::move(action.status));
      return;
  }
}

}  // namespace onecard::services
