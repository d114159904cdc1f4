// GenerateCall: one public Generate call at the router, as a gRPC callback
// write reactor, and the worker call(s) it proxies (client read reactors).
//
// Start: draining? -> API key -> validation and tokenization -> deadline ->
// the tenant's token buckets -> the dispatcher's queue. A refusal finishes
// the call at once: UNAVAILABLE (draining), UNAUTHENTICATED,
// INVALID_ARGUMENT / PERMISSION_DENIED (naming the field), RESOURCE_EXHAUSTED
// with a `retry-after-ms` trailer (rate limit, full queue). A request that
// finds no healthy worker waits in the queue; UNAVAILABLE when none came
// within the queue timeout. A client that leaves ends the call CANCELLED, or
// DEADLINE_EXCEEDED when its deadline passed.
//
// Proxy: one worker chunk is read, written to the client, and only then is
// the next one read, so a slow client slows its worker stream and nothing
// piles up in the router. The last chunk's timing is rewritten to the
// client's view (router queue + worker queue, TTFT and total from arrival).
//
// Failures: a worker call that fails before any token reached the client is
// retried once on another worker; after the first token the call ends with
// UNAVAILABLE naming the worker and its error. A client cancel (or a failed
// write) cancels the worker call, whose stream the worker then ends, freeing
// the sequence's KV blocks; the deadline travels on the worker call.
//
// Lifetime: reference counted (the server reactor until OnDone, the pending
// dispatch callback, each worker call until its OnDone); worker calls are
// owned by the GenerateCall, so a pointer to one stays valid while the call
// lives. No gRPC operation is started while mu_ is held (gRPC may run
// reactions inline).
// Tested by tests/router/router_service_test.cc (fake workers in process)
// and the integration tests (real workers).
#ifndef ONECARD_ROUTER_GENERATE_CALL_H_
#define ONECARD_ROUTER_GENERATE_CALL_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/client_callback.h"
#include "grpcpp/support/server_callback.h"
#include "onecard/v1/generation.pb.h"
#include "router/router_core.h"

namespace onecard::router {

class GenerateCall : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  // `request` is the call's encoded request (the method is raw: see
  // services/common/wire_message.h); one that does not parse is refused with
  // INVALID_ARGUMENT naming the field, once the API key has been checked.
  GenerateCall(RouterCore* core, grpc::CallbackServerContext* context,
               const grpc::ByteBuffer& request);
  ~GenerateCall() override;
  // Admission; the call may be finished (or streaming) when it returns.
  void Start();

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  class Attempt;
  struct Refusal {
    absl::Status status;
    RejectReason reason;
  };
  std::optional<Refusal> Admit();
  std::optional<Refusal> Prepare();  // API key, validation, tokens, deadline
  std::optional<Refusal> Enqueue();  // into the dispatcher's queue
  absl::Time Deadline() const;
  void OnDispatched(absl::StatusOr<Assignment> assignment);
  void StartAttempt(Attempt* attempt);
  void OnChunk(Attempt* attempt, bool ok);
  void OnAttemptDone(Attempt* attempt, const grpc::Status& status);
  void Retry(const Attempt& failed, const grpc::Status& status);
  void End(absl::Status status);
  void FinishNow(const absl::Status& status);
  // What a call the client has left ends with: DEADLINE_EXCEEDED when its
  // deadline has passed (gRPC cancels the call then), else CANCELLED.
  absl::Status ClientGone() const;
  void RewriteTiming(onecard::v1::GenerateResponse* chunk);
  void Ref();
  void Unref();

  RouterCore* const core_;
  grpc::CallbackServerContext* const context_;
  onecard::v1::GenerateRequest request_;
  absl::Status parsed_;  // ParseWireMessage's status for request_
  const absl::Time arrived_;
  const uint64_t id_;

  // Set by Admit, read-only afterwards.
  const Tenant* tenant_ = nullptr;
  PreparedRequest prepared_;
  absl::Time deadline_ = absl::InfiniteFuture();
  bool reserved_ = false;  // tokens reserved in the tenant's bucket

  absl::Mutex mu_;
  int refs_ ABSL_GUARDED_BY(mu_) = 1;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;  // by the client (or its write failed)
  bool queued_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  bool write_in_flight_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<absl::Status> pending_finish_ ABSL_GUARDED_BY(mu_);
  Attempt* current_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::vector<std::unique_ptr<Attempt>> attempts_ ABSL_GUARDED_BY(mu_);
  absl::Duration router_queue_wait_ ABSL_GUARDED_BY(mu_);
  absl::Time first_token_at_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  int64_t tokens_sent_ ABSL_GUARDED_BY(mu_) = 0;
  onecard::v1::GenerateResponse out_;  // the chunk being forwarded
  grpc::ByteBuffer out_bytes_;         // out_ encoded: owned by the one write in flight
};

}  // namespace onecard::router

#endif  // ONECARD_ROUTER_GENERATE_CALL_H_
