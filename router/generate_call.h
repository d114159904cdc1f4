// GenerateCall: one Generate call at the router, whichever door it came
// through (the gRPC API: router_service.cc; the OpenAI HTTP API:
// http_server.cc), and the worker call(s) it proxies (client read reactors).
// The door is a ClientStream: where chunks go, how the call ends.
//
// Start: draining? -> API key -> validation and tokenization -> deadline ->
// the tenant's token buckets -> the dispatcher's queue. A refusal finishes
// the call at once: UNAVAILABLE (draining), UNAUTHENTICATED,
// INVALID_ARGUMENT / NOT_FOUND / PERMISSION_DENIED (naming the field),
// RESOURCE_EXHAUSTED with a retry-after hint (rate limit, full queue). A
// request that finds no healthy worker waits in the queue; UNAVAILABLE when
// none came within the queue timeout. A client that leaves ends the call
// CANCELLED, or DEADLINE_EXCEEDED when its deadline passed.
//
// Proxy: one worker chunk is read, sent to the client, and only when the
// stream reports it sent (OnWriteDone) is the next one read, so a slow
// client slows its worker stream and nothing piles up in the router. The
// last chunk's timing is rewritten to the client's view (router queue +
// worker queue, TTFT and total from arrival).
//
// Failures: a worker call that fails before any token reached the client is
// retried on a worker the call has not tried yet, up to dispatch.max_attempts
// attempts within the deadline; after the first token the call ends with
// UNAVAILABLE naming the worker and its error. A client cancel (or a failed
// write) cancels the worker call, whose stream the worker then ends, freeing
// the sequence's KV blocks; the deadline travels on the worker call.
//
// Lifetime: reference counted (the door until Release, the pending dispatch
// callback, each worker call until its OnDone); worker calls are owned by
// the GenerateCall, so a pointer to one stays valid while the call lives.
// No stream or gRPC operation is started while mu_ is held (gRPC may run
// reactions inline), and the stream is not used after its End.
// Tested by tests/router/router_service_test.cc and http_server_test.cc
// (fake workers in process) and the integration tests (real workers).
#ifndef ONECARD_ROUTER_GENERATE_CALL_H_
#define ONECARD_ROUTER_GENERATE_CALL_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/client_callback.h"
#include "onecard/v1/generation.pb.h"
#include "router/router_core.h"

namespace onecard::router {

// The client's side of a GenerateCall.
class ClientStream {
 public:
  virtual ~ClientStream() = default;
  // Sends one chunk; the stream then calls the call's OnWriteDone(ok) (false:
  // the client is gone), possibly from inside Send. One send at a time.
  virtual void Send(const onecard::v1::GenerateResponse& chunk) = 0;
  // Ends the call with `status`; called once, with no send in flight.
  virtual void End(const absl::Status& status) = 0;
};

// What the door knows about the client when the call starts.
struct ClientInfo {
  FrontDoor door = FrontDoor::kGrpc;
  std::string authorization;                     // "Bearer <key>", as sent
  absl::Time deadline = absl::InfiniteFuture();  // the client's own, if any
};

class GenerateCall {
 public:
  // `request` did not parse when `parsed` is an error: the call is refused
  // with it (INVALID_ARGUMENT naming the field) once the API key has been
  // checked. `stream` must stay valid until its End returns.
  GenerateCall(RouterCore* core, ClientStream* stream, ClientInfo client,
               onecard::v1::GenerateRequest request, absl::Status parsed);
  GenerateCall(const GenerateCall&) = delete;
  GenerateCall& operator=(const GenerateCall&) = delete;

  // Admission; the call may be ended (or streaming) when it returns.
  void Start();
  // The door's events: the last send finished; the client left.
  void OnWriteDone(bool ok);
  void OnClientCancel();
  // The door's reference, dropped once it needs the call no more.
  void Release() { Unref(); }

 private:
  class Attempt;
  struct Refusal {
    absl::Status status;
    RejectReason reason;
  };
  ~GenerateCall();
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
  // deadline has passed (a gRPC client cancels the call then), else
  // CANCELLED.
  absl::Status ClientGone() const;
  void RewriteTiming(onecard::v1::GenerateResponse* chunk);
  void Ref();
  void Unref();

  RouterCore* const core_;
  ClientStream* const stream_;
  const ClientInfo client_;
  onecard::v1::GenerateRequest request_;
  const absl::Status parsed_;
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
  onecard::v1::GenerateResponse out_;  // the chunk being sent: owned by the one send in flight
};

}  // namespace onecard::router

#endif  // ONECARD_ROUTER_GENERATE_CALL_H_
