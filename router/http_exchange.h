// HttpExchange: the HTTP door of one GenerateCall (router/generate_call.h).
// The call sends chunks and ends from gRPC threads; the HTTP connection's
// thread takes them with Next, writes them, and says so with Sent, so the
// call reads the worker's next chunk only once the client took the last
// (the same backpressure as the gRPC door). Cancel ends the call from the
// client's side (a failed write, the server stopping).
//
// Lifetime: shared; the exchange also keeps itself alive until the call's
// End, so the call's stream pointer stays valid. The call's door reference
// is released once the call ended and no door call into it is running.
// Tested by tests/router/http_server_test.cc.
#ifndef ONECARD_ROUTER_HTTP_EXCHANGE_H_
#define ONECARD_ROUTER_HTTP_EXCHANGE_H_

#include <memory>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "onecard/v1/generation.pb.h"
#include "router/generate_call.h"

namespace onecard::router {

class HttpExchange final : public ClientStream {
 public:
  // Creates the GenerateCall for `request` and starts its admission.
  static std::shared_ptr<HttpExchange> Start(RouterCore* core, ClientInfo client,
                                             onecard::v1::GenerateRequest request,
                                             absl::Status parsed);

  // What the call sent next: a chunk (Sent must follow) or its end.
  struct Event {
    std::optional<onecard::v1::GenerateResponse> chunk;
    absl::Status end;
  };
  // Blocks until the call sends a chunk or ends.
  Event Next();
  // The same, waiting at most `timeout`: nullopt when nothing came.
  std::optional<Event> NextFor(absl::Duration timeout);
  // The chunk Next gave is out (ok), or could not be written (the client
  // is gone: the call is cancelled).
  void Sent(bool ok);
  // The client is gone, or the server stops: the call ends CANCELLED. Any
  // thread; nothing once the call ended.
  void Cancel();

  // ClientStream (the call's side).
  void Send(const onecard::v1::GenerateResponse& chunk) override;
  void End(const absl::Status& status) override;

 private:
  HttpExchange() = default;
  // Runs a door call into call_ unless the call ended; releases the door's
  // reference once it ended and nothing runs.
  template <typename Fn>
  void CallIn(Fn fn);
  bool TakeRelease() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  GenerateCall* call_ = nullptr;
  absl::Mutex mu_;
  std::optional<onecard::v1::GenerateResponse> chunk_ ABSL_GUARDED_BY(mu_);
  std::optional<absl::Status> end_ ABSL_GUARDED_BY(mu_);
  int busy_ ABSL_GUARDED_BY(mu_) = 0;  // door calls into call_ running
  bool released_ ABSL_GUARDED_BY(mu_) = false;
  std::shared_ptr<HttpExchange> self_ ABSL_GUARDED_BY(mu_);  // until End
};

}  // namespace onecard::router

#endif  // ONECARD_ROUTER_HTTP_EXCHANGE_H_
