// Integration tests of the worker (issue 4's acceptance) on loopback with the
// real engine on the CPU backend and SmolLM2: the same tokens as the engine
// in process; 64 concurrent streams each ending once; a cancel or a passed
// deadline freeing the KV blocks (seen in the load reports received by a
// control plane inside the test, and in /metrics); invalid requests refused
// with the field named while valid streams run on unchanged; /metrics
// parsing as Prometheus text and agreeing with the load reports.
// Reference values come from the engine itself, run directly (no gRPC),
// and from the engine's stats as reported.
#include <functional>
#include <thread>

#include "gmock/gmock.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "services/common/request_convert.h"
#include "tests/services/testing/fake_control_plane.h"
#include "tests/services/testing/http_get.h"
#include "tests/services/testing/prom_text.h"
#include "tests/services/worker/smol_worker.h"

namespace onecard::services {
namespace {

using ::onecard::testing::FakeControlPlane;
using ::testing::HasSubstr;
using ::testing::StartsWith;

struct Stream {
  std::vector<int32_t> tokens;
  int finals = 0;          // chunks with a finish reason
  bool final_last = true;  // ... and it was the last chunk
  v1::FinishReason reason = v1::FINISH_REASON_UNSPECIFIED;
  grpc::Status status;
};

Stream Drain(grpc::ClientReader<v1::GenerateResponse>* reader) {
  Stream out;
  v1::GenerateResponse chunk;
  while (reader->Read(&chunk)) {
    if (out.finals > 0) out.final_last = false;
    out.tokens.insert(out.tokens.end(), chunk.token_ids().begin(), chunk.token_ids().end());
    if (chunk.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) {
      ++out.finals;
      out.reason = chunk.finish_reason();
    }
  }
  out.status = reader->Finish();
  return out;
}

class WorkerIntegrationTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!testing::SmolModelPresent()) return;
    plane_ = FakeControlPlane::Start().release();
    absl::StatusOr<std::unique_ptr<WorkerServer>> server = testing::StartSmolWorker(
        [](v1::WorkerConfig* c) { c->set_control_plane_address(plane_->address()); });
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = server->release();
    auto channel = grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials());
    worker_ = v1::Worker::NewStub(channel).release();
    generation_ = v1::Generation::NewStub(channel).release();
  }
  static void TearDownTestSuite() {
    delete worker_;
    delete generation_;
    delete server_;
    delete plane_;
  }
  void SetUp() override {
    if (server_ == nullptr)
      GTEST_SKIP() << testing::kSmolModel << " is missing: scripts/fetch-model.sh";
    // The previous test's streams are counted in the metrics once done.
    ASSERT_TRUE(server_->core().WaitForStreams(absl::Seconds(60)));
  }

  static std::vector<int32_t> Encode(const std::string& text) {
    return server_->engine()->tokenizer().Encode(text, /*add_special_tokens=*/true);
  }
  static v1::WorkerGenerateRequest Request(const std::string& prompt, int max_tokens) {
    v1::WorkerGenerateRequest r;
    for (int32_t id : Encode(prompt)) r.add_prompt_token_ids(id);
    r.mutable_sampling()->set_temperature(0);
    r.mutable_stopping()->set_max_tokens(max_tokens);
    r.mutable_stopping()->set_ignore_eos(true);
    return r;
  }
  static Stream Run(const v1::WorkerGenerateRequest& request) {
    grpc::ClientContext context;
    return Drain(worker_->Generate(&context, request).get());
  }
  // The first report, from now on, of an idle worker.
  static v1::WorkerLoadReport IdleReport() {
    std::optional<v1::WorkerLoadReport> r = plane_->WaitForNextReport(
        [](const v1::WorkerLoadReport& r) { return r.running() == 0 && r.waiting() == 0; });
    EXPECT_TRUE(r.has_value());
    return r.value_or(v1::WorkerLoadReport());
  }
  static testing::PromText Scrape() {
    absl::StatusOr<testing::HttpResponse> http =
        testing::HttpGet(server_->metrics_address(), "/metrics");
    EXPECT_TRUE(http.ok()) << http.status();
    if (!http.ok()) return {};
    EXPECT_EQ(http->status_code, 200);
    absl::StatusOr<testing::PromText> text = testing::ParsePromText(http->body);
    EXPECT_TRUE(text.ok()) << text.status() << "\n" << http->body;
    return text.ok() ? *text : testing::PromText();
  }
  static double Outcomes(const std::string& outcome) {
    return Scrape().Value("onecard_worker_requests_total", {{"outcome", outcome}}).value_or(-1);
  }

  static FakeControlPlane* plane_;
  static WorkerServer* server_;
  static v1::Worker::Stub* worker_;
  static v1::Generation::Stub* generation_;
};

FakeControlPlane* WorkerIntegrationTest::plane_ = nullptr;
WorkerServer* WorkerIntegrationTest::server_ = nullptr;
v1::Worker::Stub* WorkerIntegrationTest::worker_ = nullptr;
v1::Generation::Stub* WorkerIntegrationTest::generation_ = nullptr;

TEST_F(WorkerIntegrationTest, StreamsTheEngineTokensForTheSameSeed) {
  v1::WorkerGenerateRequest request = Request("The capital of France is", 12);
  request.mutable_sampling()->set_temperature(0.9f);
  request.mutable_sampling()->set_top_k(40);
  request.mutable_sampling()->set_seed(1234);
  const engine::RequestLimits limits{.max_context = server_->engine()->max_context(),
                                     .vocab_size = server_->engine()->config().vocab_size};
  absl::StatusOr<engine::GenerationRequest> direct = ToEngineRequest(request, limits);
  ASSERT_TRUE(direct.ok()) << direct.status();
  absl::StatusOr<std::vector<int32_t>> expected =
      testing::GenerateInProcess(*server_->engine(), *direct);
  ASSERT_TRUE(expected.ok()) << expected.status();
  ASSERT_EQ(expected->size(), 12u);

  const Stream via_worker = Run(request);
  ASSERT_TRUE(via_worker.status.ok()) << via_worker.status.error_message();
  EXPECT_EQ(via_worker.tokens, *expected);

  v1::GenerateRequest text;
  text.set_prompt("The capital of France is");
  *text.mutable_sampling() = request.sampling();
  *text.mutable_stopping() = request.stopping();
  grpc::ClientContext context;
  const Stream via_public = Drain(generation_->Generate(&context, text).get());
  ASSERT_TRUE(via_public.status.ok()) << via_public.status.error_message();
  EXPECT_EQ(via_public.tokens, *expected);
}

TEST_F(WorkerIntegrationTest, SixtyFourConcurrentStreamsEachEndOnce) {
  const double before = Outcomes("length");
  constexpr int kStreams = 64;
  std::vector<Stream> results(kStreams);
  std::vector<std::thread> threads;
  for (int i = 0; i < kStreams; ++i) {
    threads.emplace_back(
        [i, &results] { results[i] = Run(Request("Count to " + std::to_string(i) + ":", 4)); });
  }
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < kStreams; ++i) {
    SCOPED_TRACE(i);
    EXPECT_TRUE(results[i].status.ok()) << results[i].status.error_message();
    EXPECT_EQ(results[i].finals, 1);
    EXPECT_TRUE(results[i].final_last);
    EXPECT_EQ(results[i].reason, v1::FINISH_REASON_LENGTH);
    EXPECT_EQ(results[i].tokens.size(), 4u);
  }
  ASSERT_TRUE(server_->core().WaitForStreams(absl::Seconds(60)));
  EXPECT_EQ(Outcomes("length") - before, kStreams);
}

TEST_F(WorkerIntegrationTest, CancelMidStreamFreesTheKvBlocks) {
  const int64_t idle_used = IdleReport().kv_blocks_used();
  const double before = Outcomes("cancelled");
  grpc::ClientContext context;
  auto reader = worker_->Generate(&context, Request("Tell me a long story.", 1000));
  v1::GenerateResponse chunk;
  ASSERT_TRUE(reader->Read(&chunk));
  ASSERT_TRUE(plane_
                  ->WaitForNextReport([&](const v1::WorkerLoadReport& r) {
                    return r.running() == 1 && r.kv_blocks_used() > idle_used;
                  })
                  .has_value());
  context.TryCancel();
  EXPECT_EQ(Drain(reader.get()).status.error_code(), grpc::StatusCode::CANCELLED);
  const v1::WorkerLoadReport after = IdleReport();
  EXPECT_EQ(after.kv_blocks_used(), idle_used);
  ASSERT_TRUE(server_->core().WaitForStreams(absl::Seconds(60)));
  const testing::PromText metrics = Scrape();
  EXPECT_EQ(metrics.Value("onecard_worker_kv_cache_blocks_used"), idle_used);
  EXPECT_EQ(metrics.Value("onecard_worker_requests_running"), 0);
  EXPECT_EQ(metrics.Value("onecard_worker_requests_total", {{"outcome", "cancelled"}}), before + 1);
}

TEST_F(WorkerIntegrationTest, PassedDeadlineEndsTheStreamAndFreesTheBlocks) {
  const int64_t idle_used = IdleReport().kv_blocks_used();
  const double before = Outcomes("deadline");
  grpc::ClientContext context;
  // 2000 tokens take far longer than 1.5 s on a CPU: the deadline ends it.
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Milliseconds(1500)));
  const Stream stream = Drain(worker_->Generate(&context, Request("Write an essay.", 2000)).get());
  EXPECT_EQ(stream.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_EQ(IdleReport().kv_blocks_used(), idle_used);
  ASSERT_TRUE(server_->core().WaitForStreams(absl::Seconds(60)));
  const testing::PromText metrics = Scrape();
  EXPECT_EQ(metrics.Value("onecard_worker_kv_cache_blocks_used"), idle_used);
  EXPECT_EQ(metrics.Value("onecard_worker_requests_total", {{"outcome", "deadline"}}), before + 1);
}

struct Invalid {
  std::string name;
  std::function<void(v1::WorkerGenerateRequest*)> edit;
  std::string field;
  grpc::StatusCode code = grpc::StatusCode::INVALID_ARGUMENT;
};

TEST_F(WorkerIntegrationTest, InvalidRequestsNameTheFieldWhileValidStreamsRunOn) {
  const v1::WorkerGenerateRequest valid = Request("Hello, my name is", 8);
  const Stream alone = Run(valid);
  ASSERT_TRUE(alone.status.ok());
  const int32_t context = server_->engine()->max_context();
  const std::vector<Invalid> invalid = {
      {"empty input", [](auto* r) { r->clear_prompt_token_ids(); }, "prompt:"},
      {"max_tokens 0", [](auto* r) { r->mutable_stopping()->set_max_tokens(0); },
       "stopping.max_tokens"},
      {"max_tokens past the context",
       [context](auto* r) { r->mutable_stopping()->set_max_tokens(context); },
       "stopping.max_tokens"},
      {"negative temperature", [](auto* r) { r->mutable_sampling()->set_temperature(-1); },
       "sampling.temperature"},
      {"top_p 0", [](auto* r) { r->mutable_sampling()->set_top_p(0); }, "sampling.top_p"},
      {"top_p 1.5", [](auto* r) { r->mutable_sampling()->set_top_p(1.5f); }, "sampling.top_p"},
      {"unknown model", [](auto* r) { r->set_model("gpt-5"); }, "model",
       grpc::StatusCode::NOT_FOUND},
      {"token past the vocabulary",
       [vocab = static_cast<int32_t>(server_->engine()->config().vocab_size)](auto* r) {
         r->add_prompt_token_ids(vocab);
       },
       "prompt["},
      {"oversized message",
       [](auto* r) { r->mutable_stopping()->add_stop_strings(std::string(5 << 20, 'x')); },
       "stopping"},
  };
  std::vector<Stream> concurrent(4);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) threads.emplace_back([&, i] { concurrent[i] = Run(valid); });
  for (const Invalid& c : invalid) {
    v1::WorkerGenerateRequest bad = valid;
    c.edit(&bad);
    const Stream refused = Run(bad);
    EXPECT_EQ(refused.status.error_code(), c.code) << c.name;
    EXPECT_THAT(refused.status.error_message(), StartsWith(c.field)) << c.name;
    EXPECT_TRUE(refused.tokens.empty()) << c.name;
  }
  for (std::thread& t : threads) t.join();
  for (const Stream& s : concurrent) {
    EXPECT_TRUE(s.status.ok()) << s.status.error_message();
    EXPECT_EQ(s.tokens, alone.tokens) << "greedy tokens changed next to invalid requests";
  }
}

TEST_F(WorkerIntegrationTest, MetricsParseAndAgreeWithTheLoadReports) {
  ASSERT_EQ(Run(Request("One, two,", 3)).status.error_code(), grpc::StatusCode::OK);
  ASSERT_TRUE(server_->core().WaitForStreams(absl::Seconds(60)));
  const v1::WorkerLoadReport report = IdleReport();
  const testing::PromText metrics = Scrape();
  EXPECT_EQ(metrics.Value("onecard_worker_requests_waiting"), report.waiting());
  EXPECT_EQ(metrics.Value("onecard_worker_requests_running"), report.running());
  EXPECT_EQ(metrics.Value("onecard_worker_kv_cache_blocks_used"), report.kv_blocks_used());
  EXPECT_EQ(metrics.Value("onecard_worker_kv_cache_blocks_total"), report.kv_blocks_total());
  EXPECT_GT(report.kv_blocks_total(), 0);
  EXPECT_EQ(metrics.Value("onecard_worker_kv_cache_usage_ratio"),
            static_cast<double>(report.kv_blocks_used()) / report.kv_blocks_total());
  EXPECT_EQ(metrics.Value("onecard_worker_generation_tokens_total"),
            report.generation_tokens_total());
  EXPECT_EQ(metrics.Value("onecard_worker_preemptions_total"), report.preemptions_total());
  EXPECT_EQ(metrics.Value("onecard_worker_draining"), report.draining() ? 1 : 0);
  EXPECT_GE(metrics.Value("onecard_worker_time_to_first_token_seconds_count").value_or(0), 1);
  EXPECT_GE(metrics.Value("onecard_worker_time_per_output_token_seconds_count").value_or(0), 1);
  EXPECT_GE(metrics.Value("onecard_worker_prompt_tokens_total").value_or(0), 1);
}

TEST_F(WorkerIntegrationTest, EveryEngineStepIsTimed) {
  ASSERT_EQ(Run(Request("Five, six,", 3)).status.error_code(), grpc::StatusCode::OK);
  IdleReport();  // the engine is idle: no step in flight
  const testing::PromText metrics = Scrape();
  const double steps = metrics.Value("onecard_worker_engine_steps_total").value_or(0);
  EXPECT_GE(steps, 3);
  EXPECT_EQ(metrics.Value("onecard_worker_step_duration_seconds_count").value_or(0), steps)
      << "the engine must call EngineOptions::on_step after every step";
}

}  // namespace
}  // namespace onecard::services
