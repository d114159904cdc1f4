// HttpServer: the router's OpenAI-compatible HTTP API (config `http`), on
// its own port beside the gRPC API and over the same RouterCore, so a
// request takes the same path: API key (Authorization: Bearer) -> the
// request's checks -> the tenant's token buckets -> the priority queue ->
// a worker (router/generate_call.h). Served by cpp-httplib (Debian's
// libcpp-httplib-dev): a small, maintained server whose chunked responses
// are written from the connection's own thread, which is what server-sent
// events with backpressure need; its TLS server takes public_tls.
//
// Routes: GET /v1/models, GET /v1/models/{id}, POST /v1/completions and
// /v1/chat/completions (router/openai_request.h, openai_response.h). With
// "stream": true the answer is server-sent events, sent from the first
// token on, so that refusals before it (401, 429, 503 no worker or
// draining, 504 deadline) keep their HTTP status; an error after it is an
// error event. Every other route is 404, a body over http.max_body_bytes
// is 413, both with OpenAI's error body.
//
// A client that disconnects mid-stream is noticed by the write of the next
// chunk, or of the ": keep-alive" comment sent every second while no token
// comes, which cancels the request (its worker stream ends and frees its KV
// within a step). A client that leaves while its request is queued, or
// while a non-streaming answer is produced, is noticed only at the first
// write (cpp-httplib 0.11 gives a handler no way to watch its socket).
//
// Each connection holds one of http.max_connections threads while its
// request runs. Stop cancels the requests still open and joins the threads.
// Tested by tests/router/http_server_test.cc (fake workers in process) and
// tests/integration/router_http_test.cc (real worker, the openai client,
// curl).
#ifndef ONECARD_ROUTER_HTTP_SERVER_H_
#define ONECARD_ROUTER_HTTP_SERVER_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "onecard/v1/config.pb.h"
#include "router/http_exchange.h"
#include "router/openai_request.h"
#include "router/openai_response.h"
#include "router/router_core.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace onecard::router {

class HttpServer {
 public:
  // Binds config.http().listen_address (port 0: any) and serves. `core`
  // must outlive the server. `config` has its defaults applied.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(RouterCore* core,
                                                           const onecard::v1::RouterConfig& config);
  ~HttpServer();  // Stop

  // Stops accepting, cancels the open requests, waits for the connections'
  // threads. Idempotent.
  void Stop();
  const std::string& address() const { return address_; }  // host:bound port

 private:
  explicit HttpServer(RouterCore* core);
  void Route();
  void Models(const httplib::Request& req, httplib::Response& res) const;
  void Model(const httplib::Request& req, httplib::Response& res) const;
  void Completion(const httplib::Request& req, httplib::Response& res, OpenAiEndpoint endpoint);
  // Answers with server-sent events from `first` on.
  void Stream(std::shared_ptr<HttpExchange> exchange, uint64_t tracked, OpenAiRequest request,
              OpenAiResponder responder, onecard::v1::GenerateResponse first,
              httplib::Response& res);
  // Answers with one body once the call ended.
  void Collect(HttpExchange& exchange, const OpenAiRequest& request, OpenAiResponder responder,
               onecard::v1::GenerateResponse first, httplib::Response& res);
  uint64_t Track(std::shared_ptr<HttpExchange> exchange);
  void Untrack(uint64_t id);

  RouterCore* const core_;
  std::unique_ptr<httplib::Server> server_;
  std::string address_;
  std::thread thread_;
  std::atomic<bool> listen_returned_{false};  // the thread's listen_after_bind returned
  const int64_t started_ = 0;                 // Unix seconds: the models' `created`

  absl::Mutex mu_;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<uint64_t, std::weak_ptr<HttpExchange>> open_ ABSL_GUARDED_BY(mu_);
};

}  // namespace onecard::router

#endif  // ONECARD_ROUTER_HTTP_SERVER_H_
