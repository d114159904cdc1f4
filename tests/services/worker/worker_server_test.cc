// Tests of the WorkerServer life cycle with a fake engine: health through
// loading, serving and draining; the drain finishing open streams and
// refusing new ones; what outlives the grace period being cancelled; load
// reports to a fake control plane; /metrics over HTTP; a failed load.
#include "services/worker/worker_server.h"

#include <thread>

#include "gmock/gmock.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "tests/services/testing/fake_control_plane.h"
#include "tests/services/testing/http_get.h"
#include "tests/services/testing/prom_text.h"
#include "tests/services/worker/fake_worker.h"

namespace onecard::services {
namespace {

using ::grpc::health::v1::HealthCheckResponse;
using ::onecard::testing::FakeControlPlane;
using ::onecard::testing::FakeWorker;
using ::onecard::testing::SmallWorkerRequest;

grpc::Status Drink(grpc::ClientReader<v1::GenerateResponse>* reader, int* tokens = nullptr) {
  v1::GenerateResponse chunk;
  while (reader->Read(&chunk)) {
    if (tokens != nullptr) *tokens += chunk.token_ids_size();
  }
  return reader->Finish();
}

TEST(WorkerServerTest, HealthFollowsLoading) {
  FakeWorker w({.load = false});
  EXPECT_EQ(w.Health(), HealthCheckResponse::NOT_SERVING);
  EXPECT_EQ(w.Health("onecard.v1.Worker"), HealthCheckResponse::NOT_SERVING);
  EXPECT_EQ(w.Health("onecard.v1.Generation"), HealthCheckResponse::NOT_SERVING);
  ASSERT_TRUE(w.server().LoadEngine().ok());
  EXPECT_EQ(w.Health(), HealthCheckResponse::SERVING);
  EXPECT_EQ(w.Health("onecard.v1.Worker"), HealthCheckResponse::SERVING);
  EXPECT_EQ(w.Health("onecard.v1.Generation"), HealthCheckResponse::SERVING);
}

TEST(WorkerServerTest, DrainFinishesOpenStreamsAndRefusesNewOnes) {
  FakeWorker w;
  grpc::ClientContext context;
  auto open = w.worker().Generate(&context, SmallWorkerRequest());
  ASSERT_TRUE(w.engine().WaitForSubmitted(1));
  const uint64_t id = w.engine().ids()[0];
  std::thread drain([&] { EXPECT_TRUE(w.server().Drain(absl::Seconds(60)).ok()); });
  // While the drain waits for the open stream:
  ASSERT_TRUE(w.WaitForHealth(HealthCheckResponse::NOT_SERVING));
  grpc::ClientContext late;
  EXPECT_EQ(Drink(w.worker().Generate(&late, SmallWorkerRequest()).get()).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  w.engine().Emit(id, {'a', 'b'}, "ab");
  w.engine().Finish(id, engine::FinishReason::kLength);
  int tokens = 0;
  EXPECT_TRUE(Drink(open.get(), &tokens).ok());
  EXPECT_EQ(tokens, 2);
  drain.join();
  EXPECT_EQ(w.Health(), HealthCheckResponse::UNKNOWN) << "the server is gone";
}

TEST(WorkerServerTest, DrainCancelsWhatOutlivesTheGracePeriod) {
  FakeWorker w;
  grpc::ClientContext context;
  auto open = w.worker().Generate(&context, SmallWorkerRequest());
  ASSERT_TRUE(w.engine().WaitForSubmitted(1));
  EXPECT_FALSE(w.server().Drain(absl::Milliseconds(50)).ok());
  // UNAVAILABLE, not CANCELLED: the engine ended it (kCancelled by the
  // worker), not the client. (The engine is gone after the drain.)
  EXPECT_EQ(Drink(open.get()).error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST(WorkerServerTest, ReportsLoadToTheControlPlane) {
  std::unique_ptr<FakeControlPlane> plane = FakeControlPlane::Start();
  FakeWorker w({.kv_blocks_total = 100, .edit_config = [&](v1::WorkerConfig* c) {
                  c->set_control_plane_address(plane->address());
                  c->set_worker_id("worker-a");
                }});
  ASSERT_TRUE(plane->WaitForRegistrations(1));
  const v1::RegisterWorkerRequest reg = plane->registrations()[0];
  EXPECT_EQ(reg.worker_id(), "worker-a");
  EXPECT_EQ(reg.address(), w.server().advertised_address());
  EXPECT_EQ(reg.info().model().id(), "fake");
  EXPECT_EQ(reg.info().kv_blocks_total(), 100);
  w.engine().SetKvBlocksUsed(42);
  EXPECT_TRUE(plane
                  ->WaitForReport([](const v1::WorkerLoadReport& r) {
                    return r.kv_blocks_used() == 42 && r.kv_blocks_total() == 100 &&
                           r.worker_id() == "worker-a";
                  })
                  .has_value());
  grpc::ClientContext context;
  auto open = w.worker().Generate(&context, SmallWorkerRequest());
  ASSERT_TRUE(w.engine().WaitForSubmitted(1));
  EXPECT_TRUE(plane->WaitForReport([](const v1::WorkerLoadReport& r) { return r.waiting() == 1; })
                  .has_value());
  std::thread drain([&] { w.server().Drain(absl::Seconds(60)).IgnoreError(); });
  EXPECT_TRUE(
      plane->WaitForReport([](const v1::WorkerLoadReport& r) { return r.draining(); }).has_value());
  w.engine().Finish(w.engine().ids()[0], engine::FinishReason::kStop);
  EXPECT_TRUE(Drink(open.get()).ok());
  drain.join();
}

TEST(WorkerServerTest, ServesWhileTheControlPlaneIsAway) {
  std::string nobody;
  {
    std::unique_ptr<FakeControlPlane> probe = FakeControlPlane::Start();
    nobody = probe->address();  // bound, then closed: nothing listens there
  }
  FakeWorker w({.edit_config = [&](v1::WorkerConfig* c) { c->set_control_plane_address(nobody); }});
  EXPECT_EQ(w.Health(), HealthCheckResponse::SERVING);
  grpc::ClientContext context;
  auto open = w.worker().Generate(&context, SmallWorkerRequest());
  ASSERT_TRUE(w.engine().WaitForSubmitted(1));
  w.engine().Emit(w.engine().ids()[0], {'a'}, "a");
  w.engine().Finish(w.engine().ids()[0], engine::FinishReason::kStop);
  int tokens = 0;
  EXPECT_TRUE(Drink(open.get(), &tokens).ok());
  EXPECT_EQ(tokens, 1);
  EXPECT_EQ(w.server().reporter()->reports_sent(), 0);
}

TEST(WorkerServerTest, ServesMetrics) {
  FakeWorker w({.kv_blocks_total = 100, .serve_metrics = true});
  grpc::ClientContext context;
  auto open = w.worker().Generate(&context, SmallWorkerRequest());
  ASSERT_TRUE(w.engine().WaitForSubmitted(1));
  w.engine().Emit(w.engine().ids()[0], {'a'}, "a");
  w.engine().Finish(w.engine().ids()[0], engine::FinishReason::kStop);
  ASSERT_TRUE(Drink(open.get()).ok());
  ASSERT_TRUE(w.server().core().WaitForStreams(absl::Seconds(30)));  // OnDone counted it
  absl::StatusOr<testing::HttpResponse> http =
      testing::HttpGet(w.server().metrics_address(), "/metrics");
  ASSERT_TRUE(http.ok()) << http.status();
  ASSERT_EQ(http->status_code, 200);
  absl::StatusOr<testing::PromText> text = testing::ParsePromText(http->body);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(text->Value("onecard_worker_requests_total", {{"outcome", "stop"}}), 1);
  EXPECT_EQ(text->Value("onecard_worker_kv_cache_blocks_total"), 100);
  EXPECT_EQ(text->Value("onecard_worker_ready"), 1);
  EXPECT_EQ(text->Value("onecard_worker_time_to_first_token_seconds_count"), 1);
}

TEST(WorkerServerTest, FailedLoadKeepsNotServing) {
  WorkerServerOptions options;
  options.config.set_model_path("missing.gguf");
  options.config.set_listen_address("127.0.0.1:0");
  options.config.set_metrics_listen_address("none");
  options.engine_factory =
      [](const engine::EngineOptions&) -> absl::StatusOr<std::unique_ptr<engine::Engine>> {
    return absl::NotFoundError("missing.gguf: no such file");
  };
  absl::StatusOr<std::unique_ptr<WorkerServer>> server = WorkerServer::Create(std::move(options));
  ASSERT_TRUE(server.ok());
  const absl::Status loaded = (*server)->LoadEngine();
  EXPECT_EQ(loaded.code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE((*server)->core().Snapshot().ready);
}

TEST(WorkerServerTest, BadConfigIsRefused) {
  WorkerServerOptions options;
  options.config.set_model_path("m.gguf");
  options.config.mutable_admission()->set_kv_watermark(2);
  const absl::Status s = WorkerServer::Create(std::move(options)).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("admission.kv_watermark"));
}

}  // namespace
}  // namespace onecard::services
