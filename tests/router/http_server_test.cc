// Tests the router's OpenAI-compatible HTTP API (router/http_server.h,
// http_exchange.h) in process, against FakeWorkers (their behaviour is the
// prompt's first token id: tests/router/testing/fake_worker.h), with
// cpp-httplib's client: completions with and without streaming (the SSE
// framing byte for byte), a chat request tokenized at the router, the
// models list, and every refusal as an OpenAI error body with its HTTP
// status (401, 404, 413, 400, 429 with Retry-After, 503 draining or no
// worker, 504, a worker's error renamed to the client's field, a failure
// after the first token as an error event); a client that leaves mid-stream
// cancels its worker call; the per-API metrics; a Stop right after Start
// ends (it once joined a thread that never left accept()).
// Integration label: it starts servers on loopback (port 0).
#include "router/http_server.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <memory>
#include <string>

#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "router/api_keys.h"
#include "router/router_config.h"
#include "router/router_server.h"
#include "services/common/proto_time.h"
#include "services/common/server_main.h"
#include "tests/router/testing/fake_worker.h"
#include "tests/router/testing/router_under_test.h"
#include "tests/testing/time_scale.h"

namespace onecard::router {
namespace {

using nlohmann::json;
using ::onecard::router::testing::FakeWorker;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr char kKey[] = "test-key-standard";
constexpr char kLimitedKey[] = "test-key-limited";

class HttpServerTest : public ::testing::Test {
 protected:
  void StartRouter(std::vector<FakeWorker*> workers,
                   std::function<void(onecard::v1::RouterConfig&)> tweak = {}) {
    onecard::v1::RouterConfig c = testing::ConfigForFakeWorkers(workers, 4);
    onecard::v1::TenantConfig* t = c.add_tenants();
    t->set_name("acme");
    t->add_api_key_sha256(Sha256Hex(kKey));
    t = c.add_tenants();
    t->set_name("limited");
    t->add_api_key_sha256(Sha256Hex(kLimitedKey));
    t->set_requests_per_second(0.001);
    t->set_request_burst(1);
    if (tweak) tweak(c);
    absl::StatusOr<std::unique_ptr<RouterServer>> r = RouterServer::Start(c);
    ASSERT_TRUE(r.ok()) << r.status();
    router_ = std::move(*r);
    absl::StatusOr<services::HostPort> hp = services::ParseHostPort(router_->http_address());
    ASSERT_TRUE(hp.ok()) << hp.status();
    client_ = std::make_unique<httplib::Client>(hp->host, hp->port);
    client_->set_read_timeout(30, 0);
  }

  httplib::Result Post(const std::string& path, const std::string& body,
                       const std::string& key = kKey) {
    httplib::Headers headers;
    if (!key.empty()) headers.emplace("Authorization", "Bearer " + key);
    return client_->Post(path.c_str(), headers, body, "application/json");
  }

  // The response's OpenAI error, checking its status and `param`.
  json Error(const httplib::Result& r, int status, const std::string& param = "") {
    EXPECT_TRUE(r) << httplib::to_string(r.error());
    if (!r) return json();
    EXPECT_EQ(r->status, status) << r->body;
    EXPECT_EQ(r->get_header_value("Content-Type"), "application/json");
    json body = json::parse(r->body, nullptr, false);
    EXPECT_TRUE(body.contains("error")) << r->body;
    if (!param.empty()) EXPECT_EQ(body["error"]["param"], param) << r->body;
    return body["error"];
  }

  onecard::testing::PromText Scrape() { return testing::ScrapeMetrics(router_->metrics_address()); }

  std::unique_ptr<RouterServer> router_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(HttpServerTest, CompletionWithUsage) {
  auto worker = FakeWorker::Start();
  StartRouter({worker.get()});
  httplib::Result r = Post("/v1/completions", R"({"model": "smol", "prompt": [1003, 5]})");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json body = json::parse(r->body);
  EXPECT_THAT(body["id"].get<std::string>(), StartsWith("cmpl-"));
  EXPECT_EQ(body["object"], "text_completion");
  EXPECT_EQ(body["model"], "smol");
  EXPECT_EQ(body["choices"][0]["text"], "aaa");  // the fake worker's three tokens
  EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(body["usage"]["completion_tokens"], 3);
  EXPECT_EQ(worker->first_tokens(), (std::vector<int32_t>{1003}));
}

TEST_F(HttpServerTest, StreamIsServerSentEvents) {
  auto worker = FakeWorker::Start();
  StartRouter({worker.get()});
  httplib::Result r = Post("/v1/completions", R"({"prompt": [1002], "stream": true,
                                                  "stream_options": {"include_usage": true}})");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/event-stream");
  // Three events of data, then the usage chunk and [DONE], each "data: ...\n\n".
  const std::string& text = r->body;
  std::vector<json> events;
  size_t at = 0;
  while (at < text.size()) {
    ASSERT_EQ(text.compare(at, 6, "data: "), 0) << text;
    const size_t end = text.find("\n\n", at);
    ASSERT_NE(end, std::string::npos) << text;
    const std::string data = text.substr(at + 6, end - at - 6);
    events.push_back(data == "[DONE]" ? json("[DONE]") : json::parse(data));
    at = end + 2;
  }
  ASSERT_EQ(events.size(), 4u) << text;
  EXPECT_EQ(events[0]["choices"][0]["text"], "a");
  EXPECT_TRUE(events[0]["choices"][0]["finish_reason"].is_null());
  EXPECT_EQ(events[1]["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(events[2]["usage"]["completion_tokens"], 2);
  EXPECT_EQ(events[3], "[DONE]");
}

// A worker that fails after the first token (not retried): a streaming
// answer has sent its 200 and events, so the failure is an error event (as
// vLLM sends one) before [DONE]; a non-streaming one is a 503.
TEST_F(HttpServerTest, FailureAfterTheFirstTokenIsAnErrorEventOrA503) {
  auto worker = FakeWorker::Start();
  StartRouter({worker.get()});
  httplib::Result r = Post("/v1/completions", R"({"prompt": [2001], "stream": true})");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const std::vector<std::string> events =
      absl::StrSplit(absl::StripSuffix(r->body, "\n\n"), "\n\n");
  ASSERT_EQ(events.size(), 3u) << r->body;
  EXPECT_EQ(json::parse(events[0].substr(6))["choices"][0]["text"], "a") << r->body;
  ASSERT_THAT(events[1], StartsWith("data: {\"error\""));
  const json error = json::parse(events[1].substr(6))["error"];
  EXPECT_EQ(error["code"], "service_unavailable") << error;
  EXPECT_THAT(error["message"].get<std::string>(), HasSubstr("after the first token"));
  EXPECT_EQ(events[2], "data: [DONE]");
  const json e = Error(Post("/v1/completions", R"({"prompt": [2001]})"), 503);
  EXPECT_THAT(e["message"].get<std::string>(), HasSubstr("after the first token"));
  EXPECT_EQ(worker->calls(), 2) << "not retried";
}

TEST_F(HttpServerTest, ChatIsTokenizedAtTheRouterAndWorkerErrorsNameTheClientsField) {
  auto worker = FakeWorker::Start();
  StartRouter({worker.get()});
  // The chat template starts with <|im_start|> (id 1): the fake worker's
  // default behaviour, INVALID_ARGUMENT naming stopping.max_tokens.
  const json e = Error(Post("/v1/chat/completions",
                            R"({"messages": [{"role": "user", "content": "Hi"}],
                                "max_completion_tokens": 5})"),
                       400, "max_completion_tokens");
  EXPECT_THAT(e["message"].get<std::string>(), StartsWith("max_completion_tokens: "));
  EXPECT_EQ(worker->first_tokens(), (std::vector<int32_t>{1}));
}

TEST_F(HttpServerTest, ModelsAndKeys) {
  auto worker = FakeWorker::Start();
  StartRouter({worker.get()});
  httplib::Result r =
      client_->Get("/v1/models", {{"Authorization", std::string("Bearer ") + kKey}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  const json models = json::parse(r->body);
  EXPECT_EQ(models["object"], "list");
  EXPECT_EQ(models["data"][0]["id"], "smol");
  EXPECT_EQ(models["data"][0]["max_model_len"], 8192);
  EXPECT_EQ(
      client_->Get("/v1/models/smol", {{"Authorization", std::string("Bearer ") + kKey}})->status,
      200);
  Error(client_->Get("/v1/models/gpt-9", {{"Authorization", std::string("Bearer ") + kKey}}), 404,
        "model");
  json e = Error(client_->Get("/v1/models"), 401);
  EXPECT_EQ(e["code"], "invalid_api_key");
  Error(Post("/v1/completions", R"({"prompt": [1003]})", "wrong-key"), 401);
  // A bad key is refused before the body is read: 401, not 400.
  Error(Post("/v1/completions", "{not json", "wrong-key"), 401);
  EXPECT_EQ(worker->calls(), 0);
}

TEST_F(HttpServerTest, RefusalsAreOpenAiErrors) {
  auto worker = FakeWorker::Start();
  StartRouter({worker.get()}, [](onecard::v1::RouterConfig& c) {
    c.mutable_http()->set_max_body_bytes(4096);
    c.set_max_request_bytes(2048);
  });
  Error(Post("/v1/completions", "{not json"), 400, "body");
  Error(Post("/v1/completions", R"({"prompt": [1003], "n": 2})"), 400, "n");
  Error(Post("/v1/completions", R"({"prompt": [1003], "max_tokens": -5})"), 400, "max_tokens");
  Error(Post("/v1/completions", R"({"prompt": [1003], "max_tokens": 100000})"), 400, "max_tokens");
  Error(Post("/v1/completions", R"({"prompt": [1003], "temperature": 1e30})"), 400, "temperature");
  Error(Post("/v1/completions", R"({"prompt": [1003], "priority": 99})"), 400, "priority");
  Error(Post("/v1/completions", R"({"prompt": [1003], "model": "gpt-9"})"), 404, "model");
  Error(Post("/v1/chat/completions", R"({"messages": []})"), 400, "messages");
  Error(Post("/v1/chat/completions", R"({"messages": [{"role": "robot", "content": "x"}]})"), 400,
        "messages[0].role");
  Error(
      Post("/v1/chat/completions", "{\"messages\": [{\"role\": \"user\", \"content\": \"\xff\"}]}"),
      400, "messages[0].content");
  // Over max_request_bytes: 400 naming the field; over http.max_body_bytes: 413.
  Error(Post("/v1/completions", json{{"prompt", std::string(3000, 'a')}}.dump()), 400, "prompt");
  json e =
      Error(Post("/v1/completions", json{{"prompt", std::string(5000, 'a')}}.dump()), 413, "body");
  EXPECT_THAT(e["message"].get<std::string>(), HasSubstr("http.max_body_bytes"));
  e = Error(Post("/v1/embeddings", "{}"), 404);
  EXPECT_TRUE(e["param"].is_null());
  EXPECT_EQ(worker->calls(), 0) << "no bad request reached a worker";
  // And the router still serves.
  EXPECT_EQ(Post("/v1/completions", R"({"prompt": [1001]})")->status, 200);
}

TEST_F(HttpServerTest, RateLimitIs429WithRetryAfter) {
  auto worker = FakeWorker::Start();
  StartRouter({worker.get()});
  ASSERT_EQ(Post("/v1/completions", R"({"prompt": [1001]})", kLimitedKey)->status, 200);
  httplib::Result r = Post("/v1/completions", R"({"prompt": [1001]})", kLimitedKey);
  const json e = Error(r, 429);
  EXPECT_EQ(e["type"], "rate_limit_error");
  EXPECT_FALSE(r->get_header_value("Retry-After").empty());
  EXPECT_GE(std::stoi(r->get_header_value("Retry-After")), 1);
}

TEST_F(HttpServerTest, DrainingIs503AndTheDeadlineIs504) {
  auto worker = FakeWorker::Start();
  StartRouter({worker.get()}, [](onecard::v1::RouterConfig& c) {
    c.mutable_timeouts()->mutable_default_deadline()->set_nanos(300'000'000);
  });
  const json e = Error(Post("/v1/completions", R"({"prompt": [2003]})"), 504);  // waits forever
  EXPECT_EQ(e["code"], "timeout");
  router_->core().SetDraining();
  Error(Post("/v1/completions", R"({"prompt": [1001]})"), 503);
}

// With no worker a request waits in the queue up to its timeout, then is
// refused 503; a streaming one too (no event was sent yet, so the status is
// still the HTTP one).
TEST_F(HttpServerTest, NoWorkerIs503) {
  StartRouter({}, [](onecard::v1::RouterConfig& c) {
    services::ToProtoDuration(absl::Milliseconds(200), c.mutable_queue()->mutable_queue_timeout());
  });
  json e = Error(Post("/v1/completions", R"({"prompt": [1001]})"), 503);
  EXPECT_EQ(e["code"], "service_unavailable") << e;
  EXPECT_THAT(e["message"].get<std::string>(), HasSubstr("no healthy worker"));
  e = Error(Post("/v1/chat/completions",
                 R"({"messages": [{"role": "user", "content": "Hi"}], "stream": true})"),
            503);
  EXPECT_THAT(e["message"].get<std::string>(), HasSubstr("no healthy worker"));
  EXPECT_EQ(
      Scrape().Value("onecard_router_requests_total", {{"api", "http"}, {"code", "UNAVAILABLE"}}),
      2);
}

TEST_F(HttpServerTest, ClientLeavingMidStreamCancelsTheWorkerCall) {
  auto worker = FakeWorker::Start();
  StartRouter({worker.get()});
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.headers = {{"Authorization", std::string("Bearer ") + kKey},
                 {"Content-Type", "application/json"}};
  req.body = R"({"prompt": [2002], "stream": true})";  // one token, then waits
  std::string received;
  req.content_receiver = [&received](const char* data, size_t size, uint64_t, uint64_t) {
    received.append(data, size);
    return false;  // leave after the first bytes
  };
  httplib::Response res;
  httplib::Error error;
  EXPECT_FALSE(client_->send(req, res, error));
  EXPECT_THAT(received, StartsWith("data: {"));
  // The router notices at its next write (a keep-alive comment) and cancels.
  EXPECT_TRUE(worker->AwaitCancelled(1, absl::Seconds(30)));
  EXPECT_TRUE(router_->core().WaitIdle(absl::Now() + absl::Seconds(30)));
}

TEST_F(HttpServerTest, MetricsSplitByApi) {
  auto worker = FakeWorker::Start();
  StartRouter({worker.get()});
  ASSERT_EQ(Post("/v1/completions", R"({"prompt": [1001]})")->status, 200);
  Error(Post("/v1/completions", R"({"prompt": [1001], "top_p": 2})"), 400, "top_p");
  const onecard::testing::PromText text = Scrape();
  const std::string requests = "onecard_router_requests_total";
  EXPECT_EQ(text.Value(requests, {{"api", "http"}, {"code", "OK"}}), 1);
  EXPECT_EQ(text.Value(requests, {{"api", "http"}, {"code", "INVALID_ARGUMENT"}}), 1);
  EXPECT_EQ(text.Value(requests, {{"api", "grpc"}, {"code", "OK"}}), 0);
  EXPECT_EQ(text.Value("onecard_router_time_to_first_token_seconds_count",
                       {{"api", "http"}, {"priority", "standard"}}),
            1);
}

// httplib's stop() does nothing until its thread is in the accept loop. A
// Stop issued before that was lost and Stop's join waited for ever on a
// thread in accept(): a router shut down right after it started hung. In a
// tight loop nearly every Stop comes before the new thread runs, so the
// old Start fails here within a few cycles (a watchdog turns the hang into
// a failure instead of ctest's timeout; scaled under sanitizers).
TEST_F(HttpServerTest, StopRightAfterStartEnds) {
  auto worker = FakeWorker::Start();
  StartRouter({worker.get()});
  ASSERT_NE(router_, nullptr);
  onecard::v1::RouterConfig config = testing::ConfigForFakeWorkers({worker.get()}, 4);
  ApplyRouterDefaults(&config);
  config.mutable_http()->set_max_connections(2);  // each start makes its pool's threads
  constexpr int kCycles = 200;
  std::future<int> cycles = std::async(std::launch::async, [&] {
    for (int i = 0; i < kCycles; ++i) {
      absl::StatusOr<std::unique_ptr<HttpServer>> http =
          HttpServer::Start(&router_->core(), config);
      if (!http.ok()) return -1;
      (*http)->Stop();
    }
    return kCycles;
  });
  const std::chrono::seconds watchdog = onecard::testing::ScaledTime(std::chrono::seconds(60));
  if (cycles.wait_for(watchdog) != std::future_status::ready) {
    std::fprintf(stderr, "HttpServer::Stop right after Start did not return within %lld s\n",
                 static_cast<long long>(watchdog.count()));
    std::fflush(stderr);
    std::_Exit(1);  // the cycle's thread cannot be joined
  }
  EXPECT_EQ(cycles.get(), kCycles);
}

}  // namespace
}  // namespace onecard::router
