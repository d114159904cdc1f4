// GenerateStream: one Generate call (Worker or Generation service) as a gRPC
// callback-API write reactor around one engine request. The methods are raw
// (services/common/wire_message.h): chunks are written encoded.
//
// Backpressure: the engine's callback (engine thread) appends each output to
// a pending chunk under a mutex and returns at once; the reactor has at most
// one write in flight, and when it completes the next write takes everything
// pending, so a slow client gets coalesced chunks and never stalls the
// engine (chunks are capped near 1 MiB; past that a new chunk starts). The
// last chunk carries the finish reason; then Finish(status).
//
// Cancellation: OnCancel (client cancel, broken connection, or the gRPC
// deadline passing) and failed writes call Engine::Cancel, which ends the
// request within one step and frees its KV blocks; the engine's deadline is
// the call's deadline too. The stream finishes only after the engine's final
// output, so the engine never calls back into a deleted stream.
//
// Threading rule: after releasing mu_, a thread touches the stream only if
// it owns the one write in flight or the Finish call (OnDone may delete the
// stream at any other moment).
// Tested by tests/services/worker/generate_stream_test.cc (fake engine).
#ifndef ONECARD_SERVICES_WORKER_GENERATE_STREAM_H_
#define ONECARD_SERVICES_WORKER_GENERATE_STREAM_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "engine/runtime/engine.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/server_callback.h"
#include "onecard/v1/generation.pb.h"
#include "services/worker/worker_metrics.h"

namespace onecard::services {

class GenerateStream : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  struct Hooks {
    WorkerMetrics* metrics = nullptr;                      // optional
    std::function<void()> on_change;                       // load changed (request ended); optional
    std::function<void()> on_done;                         // the stream is gone; optional
    absl::Duration retry_after = absl::Milliseconds(100);  // hint on RESOURCE_EXHAUSTED
  };

  // Submits `request` (its deadline and callback are set here) and streams
  // its outputs. A refused submission ends the stream with the engine's
  // status. `arrival` starts the worker-side TTFT and latency clocks.
  static GenerateStream* Start(grpc::CallbackServerContext* context, engine::Engine* engine,
                               engine::GenerationRequest request, Hooks hooks, absl::Time arrival);
  // Ends a stream at once with `status` (validation or admission refusal).
  static GenerateStream* Reject(grpc::CallbackServerContext* context, absl::Status status,
                                Hooks hooks, absl::Time arrival);

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  enum class Kind { kNone, kWrite, kFinish };
  struct Action {
    Kind kind = Kind::kNone;
    grpc::Status status;  // kFinish
  };

  GenerateStream(grpc::CallbackServerContext* context, engine::Engine* engine, Hooks hooks,
                 absl::Time arrival);
  void OnEngineOutput(const engine::StreamOutput& output);
  void SetEngineId(uint64_t id);
  void EndNow(absl::Status status, const std::string& outcome);
  void RecordFinal(const engine::StreamOutput& output, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Action NextActionLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The pending chunk that takes an output of about `bytes`.
  v1::GenerateResponse& ChunkForLocked(int64_t bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Starts the action's write or Finish; kNone does not touch `stream`.
  static void Perform(GenerateStream* stream, Action action);

  grpc::CallbackServerContext* const context_;
  engine::Engine* const engine_;  // null for rejected streams
  const Hooks hooks_;
  const absl::Time arrival_;
  const absl::Time deadline_;
  std::string request_id_;

  absl::Mutex mu_;
  std::optional<uint64_t> engine_id_ ABSL_GUARDED_BY(mu_);
  // Chunks waiting for the write in flight; outputs coalesce into the last
  // one until it holds about kMaxChunkBytes (clients refuse messages past
  // 4 MiB by default).
  std::deque<v1::GenerateResponse> pending_ ABSL_GUARDED_BY(mu_);
  int64_t last_chunk_bytes_ ABSL_GUARDED_BY(mu_) = 0;  // estimate
  bool first_chunk_made_ ABSL_GUARDED_BY(mu_) = false;
  grpc::ByteBuffer in_flight_;  // an encoded chunk, owned by the write in flight
  bool write_in_flight_ ABSL_GUARDED_BY(mu_) = false;
  bool engine_done_ ABSL_GUARDED_BY(mu_) = false;
  bool client_gone_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_by_client_ ABSL_GUARDED_BY(mu_) = false;
  bool finish_called_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status final_status_ ABSL_GUARDED_BY(mu_);
  std::optional<absl::Time> first_token_time_ ABSL_GUARDED_BY(mu_);
  absl::Time last_token_time_ ABSL_GUARDED_BY(mu_);
  int64_t num_tokens_ ABSL_GUARDED_BY(mu_) = 0;
  RequestRecord record_ ABSL_GUARDED_BY(mu_);
};

}  // namespace onecard::services

#endif  // ONECARD_SERVICES_WORKER_GENERATE_STREAM_H_
