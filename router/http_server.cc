// HttpServer: the OpenAI-compatible HTTP API (see http_server.h).
// Tested by tests/router/http_server_test.cc and
// tests/integration/router_http_test.cc.
#include "router/http_server.h"

#include <optional>
#include <utility>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "engine/common/status_macros.h"
#include "httplib.h"
#include "router/openai_response.h"
#include "services/common/server_main.h"

namespace onecard::router {
namespace {

using nlohmann::json;

constexpr char kJson[] = "application/json";
// While no token comes, a stream gets an SSE comment this often: proxies keep
// it open, and a client that left is noticed by the write.
constexpr absl::Duration kKeepAlive = absl::Seconds(1);
constexpr char kKeepAliveEvent[] = ": keep-alive\n\n";

void WriteError(httplib::Response& res, const absl::Status& status) {
  res.status = HttpStatus(status.code());
  if (std::optional<std::string> retry = RetryAfterHeader(status)) {
    res.set_header("Retry-After", *retry);
  }
  res.set_content(ErrorBody(status), kJson);
}

// The status of routes and limits httplib answers itself (no content yet).
absl::Status LibraryError(const httplib::Request& req, int http_status, int64_t max_body_bytes) {
  if (http_status == 413) {
    return absl::InvalidArgumentError(absl::StrCat("body: ", req.get_header_value("Content-Length"),
                                                   " bytes, over the limit of ", max_body_bytes,
                                                   " (http.max_body_bytes)"));
  }
  if (http_status == 404) {
    return absl::NotFoundError(
        absl::StrCat("no route ", req.method, " ", req.path,
                     " (served: GET /v1/models, POST /v1/completions, POST /v1/chat/completions)"));
  }
  return absl::UnknownError(absl::StrCat("HTTP ", http_status));
}

std::string RandomHex() {
  thread_local absl::BitGen gen;
  return absl::StrFormat("%016x%08x", absl::Uniform<uint64_t>(gen), absl::Uniform<uint32_t>(gen));
}

json ModelJson(const ModelSpec& model, int64_t created) {
  return {{"id", model.name},
          {"object", "model"},
          {"created", created},
          {"owned_by", "onecard"},
          {"max_model_len", model.context_length}};
}

// The state of one server-sent event stream, across the provider's calls.
struct SseStream {
  std::shared_ptr<HttpExchange> exchange;
  OpenAiRequest request;
  OpenAiResponder responder;
  std::optional<onecard::v1::GenerateResponse> first;

  // Writes the next events; false when the client is gone.
  bool Pump(httplib::DataSink& sink) {
    onecard::v1::GenerateResponse chunk;
    if (first.has_value()) {
      chunk = std::move(*first);
      first.reset();
    } else {
      std::optional<HttpExchange::Event> next = exchange->NextFor(kKeepAlive);
      if (!next.has_value()) {
        if (sink.write(kKeepAliveEvent, sizeof(kKeepAliveEvent) - 1)) return true;
        exchange->Cancel();
        return false;
      }
      HttpExchange::Event& event = *next;
      if (!event.chunk.has_value()) {
        const std::string tail =
            event.end.ok()
                ? responder.Done()
                : SseEvent(ErrorBody(InOpenAiTerms(event.end, request))) + SseEvent("[DONE]");
        if (!sink.write(tail.data(), tail.size())) return false;
        sink.done();
        return true;
      }
      chunk = std::move(*event.chunk);
    }
    const std::string events = responder.Events(chunk);
    const bool ok = events.empty() || sink.write(events.data(), events.size());
    exchange->Sent(ok);
    return ok;
  }
};

}  // namespace

HttpServer::HttpServer(RouterCore* core)
    : core_(core), started_(absl::ToUnixSeconds(absl::Now())) {}

HttpServer::~HttpServer() { Stop(); }

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(
    RouterCore* core, const onecard::v1::RouterConfig& config) {
  std::unique_ptr<HttpServer> s(new HttpServer(core));
  const onecard::v1::TlsConfig& tls = config.public_tls();
  if (tls.cert_file().empty()) {
    s->server_ = std::make_unique<httplib::Server>();
  } else {
    s->server_ =
        std::make_unique<httplib::SSLServer>(tls.cert_file().c_str(), tls.key_file().c_str());
  }
  if (!s->server_->is_valid()) {
    return absl::InvalidArgumentError(absl::StrCat("public_tls: cannot use ", tls.cert_file(),
                                                   " and ", tls.key_file(), " for the HTTP API"));
  }
  const int threads = config.http().max_connections();
  s->server_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  s->server_->set_payload_max_length(config.http().max_body_bytes());
  const int64_t max_body = config.http().max_body_bytes();
  s->server_->set_error_handler(httplib::Server::HandlerWithResponse(
      [max_body](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;  // ours
        const int http_status = res.status;
        WriteError(res, LibraryError(req, http_status, max_body));
        res.status = http_status;
        return httplib::Server::HandlerResponse::Handled;
      }));
  s->Route();
  ASSIGN_OR_RETURN(services::HostPort hp, services::ParseHostPort(config.http().listen_address()));
  const int port = hp.port == 0 ? s->server_->bind_to_any_port(hp.host)
                                : (s->server_->bind_to_port(hp.host, hp.port) ? hp.port : -1);
  if (port <= 0) {
    return absl::UnavailableError(
        absl::StrCat("http.listen_address: cannot listen on ", config.http().listen_address()));
  }
  s->address_ = services::JoinHostPort(hp.host, port);
  s->thread_ = std::thread([server = s->server_.get(), returned = &s->listen_returned_] {
    server->listen_after_bind();
    returned->store(true);
  });
  // httplib's stop() does nothing until the thread is in its accept loop
  // (is_running()): a Stop() before that would leave the thread in accept()
  // for ever, and Stop()'s join with it. So Start returns once it listens.
  while (!s->server_->is_running() && !s->listen_returned_.load()) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  return s;
}

void HttpServer::Route() {
  server_->Get("/v1/models",
               [this](const httplib::Request& req, httplib::Response& res) { Models(req, res); });
  server_->Get(R"(/v1/models/(.+))",
               [this](const httplib::Request& req, httplib::Response& res) { Model(req, res); });
  server_->Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    Completion(req, res, OpenAiEndpoint::kCompletions);
  });
  server_->Post("/v1/chat/completions",
                [this](const httplib::Request& req, httplib::Response& res) {
                  Completion(req, res, OpenAiEndpoint::kChat);
                });
}

void HttpServer::Models(const httplib::Request& req, httplib::Response& res) const {
  absl::StatusOr<const Tenant*> tenant =
      core_->keys().Authenticate(req.get_header_value("Authorization"));
  if (!tenant.ok()) return WriteError(res, tenant.status());
  const json body = {{"object", "list"},
                     {"data", json::array({ModelJson(core_->preparer().model(), started_)})}};
  res.set_content(DumpJson(body), kJson);
}

void HttpServer::Model(const httplib::Request& req, httplib::Response& res) const {
  absl::StatusOr<const Tenant*> tenant =
      core_->keys().Authenticate(req.get_header_value("Authorization"));
  if (!tenant.ok()) return WriteError(res, tenant.status());
  const ModelSpec model = core_->preparer().model();
  if (req.matches[1] != model.name) {
    return WriteError(res, absl::NotFoundError(absl::StrCat("model: unknown model \"",
                                                            req.matches[1].str(), "\"")));
  }
  res.set_content(DumpJson(ModelJson(model, started_)), kJson);
}

void HttpServer::Completion(const httplib::Request& req, httplib::Response& res,
                            OpenAiEndpoint endpoint) {
  OpenAiRequest request;
  absl::Status parsed = ParseOpenAiRequest(req.body, endpoint, &request);
  request.request.set_request_id(RandomHex());
  std::shared_ptr<HttpExchange> exchange = HttpExchange::Start(
      core_, ClientInfo{FrontDoor::kHttp, req.get_header_value("Authorization")}, request.request,
      std::move(parsed));
  const uint64_t tracked = Track(exchange);
  HttpExchange::Event first = exchange->Next();
  if (!first.chunk.has_value()) {
    Untrack(tracked);
    const absl::Status end =
        first.end.ok() ? absl::InternalError("the request ended with no answer") : first.end;
    return WriteError(res, InOpenAiTerms(end, request));
  }
  OpenAiResponder responder(request,
                            absl::StrCat(endpoint == OpenAiEndpoint::kChat ? "chatcmpl-" : "cmpl-",
                                         request.request.request_id()),
                            core_->preparer().model().name, absl::ToUnixSeconds(absl::Now()),
                            &core_->preparer().tokenizer());
  if (request.stream) {
    return Stream(std::move(exchange), tracked, std::move(request), std::move(responder),
                  *std::move(first.chunk), res);
  }
  Collect(*exchange, request, std::move(responder), *std::move(first.chunk), res);
  Untrack(tracked);
}

void HttpServer::Collect(HttpExchange& exchange, const OpenAiRequest& request,
                         OpenAiResponder responder, onecard::v1::GenerateResponse first,
                         httplib::Response& res) {
  std::optional<onecard::v1::GenerateResponse> chunk = std::move(first);
  absl::Status end;
  while (chunk.has_value()) {
    responder.Add(*chunk);
    exchange.Sent(true);
    HttpExchange::Event event = exchange.Next();
    chunk = std::move(event.chunk);
    end = std::move(event.end);
  }
  if (!end.ok()) return WriteError(res, InOpenAiTerms(end, request));
  res.set_content(responder.Body(), kJson);
}

void HttpServer::Stream(std::shared_ptr<HttpExchange> exchange, uint64_t tracked,
                        OpenAiRequest request, OpenAiResponder responder,
                        onecard::v1::GenerateResponse first, httplib::Response& res) {
  auto stream = std::make_shared<SseStream>(
      SseStream{exchange, std::move(request), std::move(responder), std::move(first)});
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [stream](size_t /*offset*/, httplib::DataSink& sink) { return stream->Pump(sink); },
      [this, exchange, tracked](bool success) {
        if (!success) exchange->Cancel();  // the client left mid-stream
        Untrack(tracked);
      });
}

uint64_t HttpServer::Track(std::shared_ptr<HttpExchange> exchange) {
  bool stopped;
  uint64_t id;
  {
    absl::MutexLock lock(&mu_);
    stopped = stopped_;
    id = ++next_id_;
    open_[id] = exchange;
  }
  if (stopped) exchange->Cancel();
  return id;
}

void HttpServer::Untrack(uint64_t id) {
  absl::MutexLock lock(&mu_);
  open_.erase(id);
}

void HttpServer::Stop() {
  std::vector<std::shared_ptr<HttpExchange>> open;
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
    stopped_ = true;
    for (const auto& [id, weak] : open_) {
      if (std::shared_ptr<HttpExchange> exchange = weak.lock()) open.push_back(exchange);
    }
  }
  for (const std::shared_ptr<HttpExchange>& exchange : open) exchange->Cancel();
  if (server_ != nullptr) server_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace onecard::router
