// The router on loopback with real processes: two onecard-worker processes
// (CPU backend, SmolLM2) behind one onecard-router. Chat requests spread over
// both workers and return exactly the tokens a worker gives directly (greedy);
// a client cancel reaches the worker and frees its KV blocks (seen in the
// worker's /metrics); bad input gets the right code and names the field.
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "router/api_keys.h"
#include "tests/integration/router_testing.h"
#include "tests/testing/time_scale.h"

namespace onecard::router::testing {
namespace {

using onecard::v1::GenerateRequest;
using onecard::v1::GenerateResponse;

constexpr char kKey[] = "integration-key";

struct Answer {
  grpc::Status status;
  std::vector<int32_t> tokens;
  std::string text;
};

Answer Generate(onecard::v1::Generation::Stub* stub, const GenerateRequest& r, bool with_key) {
  grpc::ClientContext context;
  if (with_key) context.AddMetadata("authorization", std::string("Bearer ") + kKey);
  context.set_deadline(
      absl::ToChronoTime(absl::Now() + onecard::testing::ScaledTime(absl::Minutes(3))));
  auto reader = stub->Generate(&context, r);
  Answer a;
  GenerateResponse chunk;
  while (reader->Read(&chunk)) {
    a.tokens.insert(a.tokens.end(), chunk.token_ids().begin(), chunk.token_ids().end());
    a.text += chunk.text();
  }
  a.status = reader->Finish();
  return a;
}

GenerateRequest Chat(const std::string& question, int max_tokens) {
  GenerateRequest r;
  onecard::v1::ChatMessage* m = r.mutable_messages()->add_messages();
  m->set_role("user");
  m->set_content(question);
  r.mutable_sampling()->set_temperature(0);
  r.mutable_stopping()->set_max_tokens(max_tokens);
  return r;
}

class RouterClusterTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string config = LogDir() + "/router-cluster.yaml";
    std::ofstream(config) << "router:\n  tenants:\n    - name: acme\n      api_key_sha256: ["
                          << Sha256Hex(kKey) << "]\n";
    for (const char* name : {"cluster-worker-a", "cluster-worker-b"}) {
      auto w = StartWorker(name);
      ASSERT_TRUE(w.ok()) << w.status();
      workers_.push_back(std::move(*w).release());
    }
    auto r = StartRouter("cluster-router", {workers_[0], workers_[1]},
                         {"--config", config, "--max-in-flight-per-worker", "4"});
    ASSERT_TRUE(r.ok()) << r.status();
    router_ = std::move(*r).release();
  }
  static void TearDownTestSuite() {
    EXPECT_EQ(router_->Terminate(onecard::testing::ScaledTime(absl::Seconds(30))), 0);
    delete router_;
    for (ChildProcess* w : workers_) delete w;
    workers_.clear();
  }
  static std::vector<ChildProcess*> workers_;
  static ChildProcess* router_;
};
std::vector<ChildProcess*> RouterClusterTest::workers_;
ChildProcess* RouterClusterTest::router_ = nullptr;

TEST_F(RouterClusterTest, ChatSpreadsOverWorkersAndMatchesDirectAnswers) {
  const std::vector<std::string> questions = {"What is 2+2?",    "Name a color.",
                                              "Say hello.",      "What is the capital of France?",
                                              "Count to three.", "Name an animal."};
  auto stub = Connect(router_->grpc_address());
  std::vector<Answer> routed(questions.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < questions.size(); ++i) {
    threads.emplace_back([&, i] { routed[i] = Generate(stub.get(), Chat(questions[i], 6), true); });
  }
  for (std::thread& t : threads) t.join();
  auto direct = Connect(workers_[0]->grpc_address());
  for (size_t i = 0; i < questions.size(); ++i) {
    ASSERT_TRUE(routed[i].status.ok()) << routed[i].status.error_message();
    EXPECT_EQ(routed[i].tokens.size(), 6u);
    Answer d = Generate(direct.get(), Chat(questions[i], 6), false);
    ASSERT_TRUE(d.status.ok()) << d.status.error_message();
    EXPECT_EQ(routed[i].tokens, d.tokens) << questions[i];
    EXPECT_EQ(routed[i].text, d.text);
  }
  // Both workers served some of the routed requests.
  for (ChildProcess* w : workers_) {
    absl::StatusOr<onecard::testing::PromText> text = Scrape(w->metrics_address());
    ASSERT_TRUE(text.ok()) << text.status();
    EXPECT_GE(text->Sum("onecard_worker_requests_total"), 1) << w->grpc_address();
  }
}

TEST_F(RouterClusterTest, ClientCancelReachesTheWorkerAndFreesItsBlocks) {
  auto stub = Connect(router_->grpc_address());
  GenerateRequest r = Chat("Tell me a very long story about a dragon.", 400);
  r.mutable_stopping()->set_ignore_eos(true);
  std::vector<double> cancelled_before;
  for (ChildProcess* w : workers_) {
    cancelled_before.push_back(
        Scrape(w->metrics_address())
            ->Value("onecard_worker_requests_total", {{"outcome", "cancelled"}})
            .value_or(0));
  }
  grpc::ClientContext context;
  context.AddMetadata("authorization", std::string("Bearer ") + kKey);
  auto reader = stub->Generate(&context, r);
  GenerateResponse chunk;
  do {  // until it is generating at a worker, holding KV blocks
    ASSERT_TRUE(reader->Read(&chunk));
  } while (chunk.token_ids_size() == 0);
  context.TryCancel();
  while (reader->Read(&chunk)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  // One worker records the cancel; every worker ends with no KV block in use.
  bool one_cancelled = false;
  for (size_t i = 0; i < workers_.size(); ++i) {
    // No stream open either: the worker counts a request's outcome when its
    // stream closes, a moment after the engine frees the blocks.
    bool freed = AwaitMetrics(workers_[i]->metrics_address(), [](const auto& t) {
      return t.Value("onecard_worker_kv_cache_blocks_used") == 0 &&
             t.Value("onecard_worker_requests_running") == 0 &&
             t.Value("onecard_worker_streams_active") == 0;
    });
    EXPECT_TRUE(freed) << workers_[i]->grpc_address();
    auto text = Scrape(workers_[i]->metrics_address());
    ASSERT_TRUE(text.ok());
    one_cancelled |=
        text->Value("onecard_worker_requests_total", {{"outcome", "cancelled"}}).value_or(0) ==
        cancelled_before[i] + 1;
  }
  EXPECT_TRUE(one_cancelled);
}

TEST_F(RouterClusterTest, BadInputGetsTheRightCodeNamingTheField) {
  auto stub = Connect(router_->grpc_address());
  Answer a = Generate(stub.get(), Chat("hi", 2), false);
  EXPECT_EQ(a.status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_NE(a.status.error_message().find("authorization"), std::string::npos);
  GenerateRequest high = Chat("hi", 2);
  high.set_priority(onecard::v1::PRIORITY_INTERACTIVE);
  a = Generate(stub.get(), high, true);
  EXPECT_EQ(a.status.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(a.status.error_message().rfind("priority:", 0), 0u) << a.status.error_message();
  GenerateRequest bad_chat = Chat("hi", 2);
  bad_chat.mutable_messages()->mutable_messages(0)->set_role("narrator");
  a = Generate(stub.get(), bad_chat, true);
  EXPECT_EQ(a.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(a.status.error_message().rfind("messages[0].role:", 0), 0u);
  GenerateRequest too_long;
  for (int i = 0; i < 9000; ++i) too_long.mutable_token_ids()->add_ids(300);
  a = Generate(stub.get(), too_long, true);
  EXPECT_EQ(a.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(a.status.error_message().rfind("token_ids.ids:", 0), 0u) << a.status.error_message();
  GenerateRequest bad_param = Chat("hi", 2);
  bad_param.mutable_sampling()->set_top_p(2);
  a = Generate(stub.get(), bad_param, true);
  EXPECT_EQ(a.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(a.status.error_message().rfind("sampling.top_p:", 0), 0u);
}

}  // namespace
}  // namespace onecard::router::testing
