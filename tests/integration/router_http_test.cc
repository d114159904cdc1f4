// The router's OpenAI-compatible HTTP API with real clients over loopback,
// against a real onecard-router and onecard-worker (CPU backend, SmolLM2):
// - the official `openai` Python client (tests/integration/openai_client.py,
//   from .deps/python: scripts/install-openai.sh): chat and completions,
//   streaming and not, usage and logprobs, and 401 / 400 / 404 / 429 parsed
//   as OpenAI errors; the greedy chat text equals the gRPC API's for the same
//   messages;
// - curl: the server-sent events' framing;
// - bad input (malformed JSON, wrong types, negative or huge max_tokens, a
//   10 MB body, invalid UTF-8, unknown roles, an empty `messages`) gets a 400
//   naming the field, reaches no worker, and the next request is served;
// - a client that disconnects mid-stream: the worker's open streams and KV
//   blocks return to 0;
// - the context the router enforces is the one the worker serves;
// - min_tokens over both APIs holds off the end-of-sequence token, the same
//   answer over HTTP as over gRPC;
// - README.md's quick start (curl and Python) runs as written.
#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "router/api_keys.h"
#include "tests/integration/router_testing.h"

namespace onecard::router::testing {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

constexpr char kKey[] = "http-test-key";
constexpr char kLimitedKey[] = "http-test-limited-key";
constexpr int kWorkerContext = 1024;  // the worker's --max-context, below the model's 8192

// Runs `command`; its stdout, or the exit status in the error.
absl::StatusOr<std::string> Output(const std::string& command) {
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return absl::InternalError("popen failed");
  std::string out;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) out.append(buffer, n);
  const int status = pclose(pipe);
  if (status != 0) return absl::UnknownError(absl::StrCat(command, " exited ", status, ":\n", out));
  return out;
}

class RouterHttpTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // f32 weights: the greedy answers are Hugging Face's ("Paris"; SmolLM2's
    // first answer token is a near tie, "The" 25.325 against "L" 25.243,
    // that the native weights' 8-bit activations flip).
    auto worker = StartWorker(
        "http-worker", {"--max-context", std::to_string(kWorkerContext), "--cpu-weights", "f32"});
    ASSERT_TRUE(worker.ok()) << worker.status();
    worker_ = worker->release();
    const std::string config = LogDir() + "/http-router.yaml";
    std::ofstream(config) << "router:\n  tenants:\n"
                          << "    - {name: acme, api_key_sha256: [" << Sha256Hex(kKey) << "]}\n"
                          << "    - {name: limited, api_key_sha256: [" << Sha256Hex(kLimitedKey)
                          << "], requests_per_second: 0.001, request_burst: 1}\n";
    auto router = StartRouter(
        "http-router", {worker_},
        {"--config", config, "--http-max-body-bytes", "12582912", "--http-max-connections", "64"});
    ASSERT_TRUE(router.ok()) << router.status();
    router_ = router->release();
  }
  static void TearDownTestSuite() {
    delete router_;
    delete worker_;
  }

  static httplib::Client Client() {
    const std::string& address = router_->http_address();
    const size_t colon = address.rfind(':');
    httplib::Client client(address.substr(0, colon), std::stoi(address.substr(colon + 1)));
    client.set_read_timeout(600, 0);
    client.set_bearer_token_auth(kKey);
    return client;
  }

  static std::string Model() { return "SmolLM2-135M-Instruct.Q4_1"; }

  static ChildProcess* worker_;
  static ChildProcess* router_;
};
ChildProcess* RouterHttpTest::worker_ = nullptr;
ChildProcess* RouterHttpTest::router_ = nullptr;

constexpr char kQuestion[] = "What is the capital of France?";  // openai_client.py's

// A greedy chat answer through the gRPC API.
struct GrpcAnswer {
  std::string text;
  onecard::v1::FinishReason finish_reason = onecard::v1::FINISH_REASON_UNSPECIFIED;
  int completion_tokens = 0;
};

GrpcAnswer GrpcChat(const std::string& address, const std::string& content, int max_tokens,
                    int min_tokens = 0) {
  auto stub = Connect(address);
  onecard::v1::GenerateRequest request;
  onecard::v1::ChatMessage* m = request.mutable_messages()->add_messages();
  m->set_role("user");
  m->set_content(content);
  request.mutable_sampling()->set_temperature(0);
  request.mutable_stopping()->set_max_tokens(max_tokens);
  request.mutable_stopping()->set_min_tokens(min_tokens);
  grpc::ClientContext context;
  context.AddMetadata("authorization", std::string("Bearer ") + kKey);
  auto reader = stub->Generate(&context, request);
  GrpcAnswer answer;
  onecard::v1::GenerateResponse chunk;
  while (reader->Read(&chunk)) {
    answer.text += chunk.text();
    if (chunk.finish_reason() != onecard::v1::FINISH_REASON_UNSPECIFIED) {
      answer.finish_reason = chunk.finish_reason();
      answer.completion_tokens = chunk.usage().completion_tokens();
    }
  }
  const grpc::Status status = reader->Finish();
  EXPECT_TRUE(status.ok()) << status.error_message();
  return answer;
}

TEST_F(RouterHttpTest, OpenAiPythonClient) {
  absl::StatusOr<std::string> out =
      Output(absl::StrCat("PYTHONPATH=.deps/python python3 tests/integration/openai_client.py ",
                          router_->http_address(), " ", kKey, " ", kLimitedKey, " ", Model()));
  ASSERT_TRUE(out.ok()) << out.status() << "\n(scripts/install-openai.sh installs the client)";
  const json r = json::parse(*out);
  const std::string grpc_text = GrpcChat(router_->grpc_address(), kQuestion, 12).text;
  EXPECT_THAT(grpc_text, HasSubstr("Paris"));
  EXPECT_EQ(r["chat"]["text"], grpc_text) << "the greedy text over HTTP and gRPC";
  EXPECT_EQ(r["chat_stream"]["text"], grpc_text);
  EXPECT_EQ(r["chat"]["usage"], r["chat_stream"]["usage"]);
  EXPECT_GT(r["chat_stream"]["chunks"].get<int>(), 3);
  EXPECT_THAT(r["completions"]["text"].get<std::string>(), HasSubstr("Paris"));
  EXPECT_EQ(r["chat_logprobs"], 3);
  const json& e = r["errors"];
  EXPECT_EQ(e["401"]["status"], 401);
  EXPECT_EQ(e["401"]["code"], "invalid_api_key");
  EXPECT_EQ(e["400_n"]["status"], 400);
  EXPECT_EQ(e["400_n"]["param"], "n");
  EXPECT_EQ(e["400_max_tokens"]["param"], "max_tokens");
  EXPECT_THAT(e["400_max_tokens"]["message"].get<std::string>(), HasSubstr("max_tokens: "));
  EXPECT_EQ(e["404"]["status"], 404);
  EXPECT_EQ(e["404"]["code"], "model_not_found");
  EXPECT_EQ(e["429"]["status"], 429);
  EXPECT_EQ(e["429"]["type"], "rate_limit_error");
  EXPECT_FALSE(e["429"]["retry_after"].is_null());
}

// min_tokens in both APIs: the greedy answer that ends with the
// end-of-sequence token goes on while fewer than min_tokens exist, the tokens
// before that point unchanged; HTTP (an extra field, as vLLM takes it) and
// gRPC give the same answer.
TEST_F(RouterHttpTest, MinTokensHoldsOffTheEndInBothApis) {
  const GrpcAnswer free = GrpcChat(router_->grpc_address(), kQuestion, 64);
  ASSERT_EQ(free.finish_reason, onecard::v1::FINISH_REASON_EOS) << free.text;
  const int min_tokens = free.completion_tokens + 4;
  const GrpcAnswer held = GrpcChat(router_->grpc_address(), kQuestion, min_tokens + 8, min_tokens);
  EXPECT_GE(held.completion_tokens, min_tokens) << held.text;
  EXPECT_TRUE(absl::StartsWith(held.text, free.text)) << held.text << "\nvs\n" << free.text;
  EXPECT_GT(held.text.size(), free.text.size());

  httplib::Client client = Client();
  const json body = {{"messages", {{{"role", "user"}, {"content", kQuestion}}}},
                     {"max_tokens", min_tokens + 8},
                     {"min_tokens", min_tokens},
                     {"temperature", 0}};
  httplib::Result r = client.Post("/v1/chat/completions", body.dump(), "application/json");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json answer = json::parse(r->body);
  EXPECT_EQ(answer["choices"][0]["message"]["content"], held.text);
  EXPECT_EQ(answer["usage"]["completion_tokens"], held.completion_tokens);
}

// The fenced block of `markdown` after `heading` that opens with `fence`
// ("```" or "```python"), or "" when there is none.
std::string CodeBlock(const std::string& markdown, const std::string& heading,
                      const std::string& fence) {
  const size_t section = markdown.find(heading);
  if (section == std::string::npos) return "";
  const size_t open = markdown.find("\n" + fence + "\n", section);
  if (open == std::string::npos) return "";
  const size_t start = open + fence.size() + 2;
  const size_t close = markdown.find("\n```\n", start);
  if (close == std::string::npos) return "";
  return markdown.substr(start, close + 1 - start);
}

// README.md's quick start of the HTTP API, its curl commands and its Python
// example as written, against this cluster: only the address and the key
// differ from scripts/run.sh's.
TEST_F(RouterHttpTest, ReadmeQuickStartRuns) {
  std::ifstream file("README.md");
  ASSERT_TRUE(file.good());
  const std::string readme((std::istreambuf_iterator<char>(file)),
                           std::istreambuf_iterator<char>());
  const std::string heading = "## The OpenAI-compatible API";
  const auto local = [this](std::string code) {
    return absl::StrReplaceAll(
        code, {{"127.0.0.1:8000", router_->http_address()}, {"local-dev-key", kKey}});
  };
  const std::string curl = local(CodeBlock(readme, heading, "```"));
  const std::string python = local(CodeBlock(readme, heading, "```python"));
  ASSERT_THAT(curl, HasSubstr("curl ")) << "README.md has no curl block after " << heading;
  ASSERT_THAT(python, HasSubstr("OpenAI(")) << "README.md has no Python block after " << heading;
  const std::string script = LogDir() + "/readme_quick_start";
  std::ofstream(script + ".sh") << "set -e\n" << curl;
  std::ofstream(script + ".py") << python;

  absl::StatusOr<std::string> out = Output(absl::StrCat("bash ", script, ".sh"));
  ASSERT_TRUE(out.ok()) << out.status();
  const size_t stream = out->find("data: ");
  ASSERT_NE(stream, std::string::npos) << *out;
  const json chat = json::parse(out->substr(0, stream), nullptr, false);
  ASSERT_FALSE(chat.is_discarded()) << *out;
  EXPECT_THAT(chat["choices"][0]["message"]["content"].get<std::string>(), HasSubstr("Paris"));
  EXPECT_TRUE(absl::EndsWith(*out, "data: [DONE]\n\n")) << *out;

  out = Output(absl::StrCat("PYTHONPATH=.deps/python python3 ", script, ".py"));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(*out, HasSubstr("Paris"));
  EXPECT_THAT(*out, HasSubstr("CompletionUsage(")) << "the usage the example prints";
}

TEST_F(RouterHttpTest, CurlSeesServerSentEvents) {
  const std::string body =
      R"({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 6, "stream": true})";
  absl::StatusOr<std::string> out = Output(absl::StrCat(
      "curl -sS -N -H 'Authorization: Bearer ", kKey, "' -H 'Content-Type: application/json' -d '",
      body, "' http://", router_->http_address(), "/v1/chat/completions"));
  ASSERT_TRUE(out.ok()) << out.status();
  // Events of one "data:" line each, a blank line after each, [DONE] last;
  // each other event's data is one chat.completion.chunk object.
  ASSERT_TRUE(absl::EndsWith(*out, "\n\ndata: [DONE]\n\n")) << *out;
  const std::vector<std::string> events = absl::StrSplit(out->substr(0, out->size() - 2), "\n\n");
  ASSERT_GE(events.size(), 3u) << *out;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    ASSERT_TRUE(absl::StartsWith(events[i], "data: {")) << events[i];
    EXPECT_EQ(events[i].find('\n'), std::string::npos) << events[i];
    const json chunk = json::parse(events[i].substr(6), nullptr, false);
    EXPECT_EQ(chunk["object"], "chat.completion.chunk") << events[i];
  }
  EXPECT_EQ(events.back(), "data: [DONE]");
}

TEST_F(RouterHttpTest, BadInputGets400NamingTheFieldAndHarmsNothing) {
  httplib::Client client = Client();
  const std::string ok_chat = R"("messages": [{"role": "user", "content": "Hi"}])";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{\"messages\": [", "messages[0]"},
      {"{" + ok_chat + R"(, "temperature": "warm"})", "temperature"},
      {"{" + ok_chat + R"(, "max_tokens": -1})", "max_tokens"},
      {"{" + ok_chat + R"(, "max_tokens": 99999999999})", "max_tokens"},
      {"{" + ok_chat + R"(, "max_tokens": 2000000})", "max_tokens"},
      {R"({"messages": [{"role": "user", "content": ")" + std::string(10 << 20, 'a') + "\"}]}",
       "messages"},
      {"{\"messages\": [{\"role\": \"user\", \"content\": \"caf\xe9\"}]}", "messages[0].content"},
      {R"({"messages": [{"role": "wizard", "content": "Hi"}]})", "messages[0].role"},
      {R"({"messages": []})", "messages"},
  };
  for (const auto& [body, param] : cases) {
    httplib::Result r = client.Post("/v1/chat/completions", body, "application/json");
    ASSERT_TRUE(r) << httplib::to_string(r.error());
    EXPECT_EQ(r->status, 400) << param << ": " << r->body.substr(0, 300);
    const json error = json::parse(r->body)["error"];
    EXPECT_EQ(error["param"], param) << error;
    EXPECT_EQ(error["type"], "invalid_request_error");
  }
  // Over --http-max-body-bytes (12 MiB): 413, the body unread.
  httplib::Result big = client.Post(
      "/v1/chat/completions",
      R"({"messages": [{"role": "user", "content": ")" + std::string(13 << 20, 'a') + "\"}]}",
      "application/json");
  ASSERT_TRUE(big);
  EXPECT_EQ(big->status, 413);
  EXPECT_EQ(json::parse(big->body)["error"]["param"], "body");
  httplib::Result r = client.Post("/v1/chat/completions", "{" + ok_chat + R"(, "max_tokens": 2})",
                                  "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  absl::StatusOr<onecard::testing::PromText> metrics = Scrape(worker_->metrics_address());
  ASSERT_TRUE(metrics.ok());
  EXPECT_EQ(metrics->Value("onecard_worker_requests_total", {{"outcome", "invalid_argument"}}), 0)
      << "no bad request reached the worker";
}

TEST_F(RouterHttpTest, ClientLeavingMidStreamFreesTheWorker) {
  httplib::Client client = Client();
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.headers = {{"Content-Type", "application/json"},
                 {"Authorization", std::string("Bearer ") + kKey}};
  req.body = R"({"prompt": "Once upon a time", "max_tokens": 500, "ignore_eos": true,
                 "stream": true})";
  int events = 0;
  req.content_receiver = [&events](const char* data, size_t size, uint64_t, uint64_t) {
    events += std::string(data, size).find("\"text\"") != std::string::npos;
    return events < 3;  // leave after a few tokens
  };
  absl::StatusOr<onecard::testing::PromText> before = Scrape(worker_->metrics_address());
  ASSERT_TRUE(before.ok());
  httplib::Response res;
  httplib::Error error;
  EXPECT_FALSE(client.send(req, res, error));
  EXPECT_EQ(events, 3);
  EXPECT_TRUE(AwaitMetrics(worker_->metrics_address(), [](const onecard::testing::PromText& t) {
    return t.Value("onecard_worker_streams_active") == 0 &&
           t.Value("onecard_worker_kv_cache_blocks_used") == 0 &&
           t.Value("onecard_worker_requests_total", {{"outcome", "cancelled"}}) >= 1;
  })) << "the worker still holds the stream or its KV blocks";
  absl::StatusOr<onecard::testing::PromText> t = Scrape(worker_->metrics_address());
  ASSERT_TRUE(t.ok());
  EXPECT_LT(t->Value("onecard_worker_generation_tokens_total").value_or(0) -
                before->Value("onecard_worker_generation_tokens_total").value_or(0),
            500)
      << "the request ran to its end";
}

TEST_F(RouterHttpTest, TheContextIsTheWorkers) {
  httplib::Client client = Client();
  httplib::Result models = client.Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(json::parse(models->body)["data"][0]["max_model_len"], kWorkerContext);
  std::vector<int> ids(kWorkerContext + 100, 100);
  httplib::Result r =
      client.Post("/v1/completions", json{{"prompt", ids}}.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  const json error = json::parse(r->body)["error"];
  EXPECT_EQ(error["param"], "prompt");
  EXPECT_THAT(error["message"].get<std::string>(),
              HasSubstr(absl::StrCat("context of ", kWorkerContext)));
}

}  // namespace
}  // namespace onecard::router::testing
