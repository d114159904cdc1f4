// Tests services/metrics/metrics_service.h: config defaults and errors, and
// the whole service on 127.0.0.1:0 (gRPC health, registration, /metrics over
// HTTP parsed as Prometheus text, and a shutdown that ends open streams).
#include "services/metrics/metrics_service.h"

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/services/testing/http_get.h"
#include "tests/services/testing/prom_text.h"

namespace onecard::services::metrics {
namespace {

using ::testing::HasSubstr;

void SafetyDeadline(grpc::ClientContext *context) {
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
}

TEST(ResolveOptionsTest, DefaultsAndOverrides) {
  v1::MetricsServiceConfig config;
  absl::StatusOr<MetricsServiceOptions> options = ResolveOptions(config);
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->listen_address, "0.0.0.0:50060");
  EXPECT_EQ(options->metrics_listen_address, "0.0.0.0:9402");
  EXPECT_EQ(options->registry.worker_expiry, absl::Seconds(2));
  EXPECT_EQ(options->registry.report_interval, absl::Milliseconds(250));
  EXPECT_EQ(options->watch_min_interval, absl::Milliseconds(100));
  EXPECT_EQ(options->registry.table_warmup, absl::Seconds(6));

  config.mutable_worker_expiry()->set_seconds(5);
  config.mutable_table_warmup()->set_nanos(300'000'000);
  config.set_listen_address("127.0.0.1:7000");
  options = ResolveOptions(config);
  ASSERT_TRUE(options.ok());
  EXPECT_EQ(options->registry.worker_expiry, absl::Seconds(5));
  EXPECT_EQ(options->registry.table_warmup, absl::Milliseconds(300));
  EXPECT_EQ(options->listen_address, "127.0.0.1:7000");
}

TEST(ResolveOptionsTest, ErrorsNameTheField) {
  v1::MetricsServiceConfig config;
  config.mutable_router_expiry()->set_seconds(-1);
  absl::StatusOr<MetricsServiceOptions> options = ResolveOptions(config);
  EXPECT_EQ(options.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(options.status().message(), HasSubstr("metrics.router_expiry"));

  // Issue 22: report_interval 1ns made idle workers spin; the intervals of
  // the service's own loops have the same floor.
  config.Clear();
  config.mutable_report_interval()->set_nanos(1);
  options = ResolveOptions(config);
  EXPECT_EQ(options.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(options.status().message(), "metrics.report_interval: 1ns is outside [10ms, 1m]");
  config.Clear();
  config.mutable_watch_min_interval()->set_nanos(1);
  EXPECT_THAT(ResolveOptions(config).status().message(), HasSubstr("metrics.watch_min_interval"));
  config.Clear();
  config.mutable_worker_expiry()->set_seconds(100000);
  EXPECT_THAT(ResolveOptions(config).status().message(), HasSubstr("metrics.worker_expiry"));

  config.Clear();
  config.set_listen_address("no-port-here");
  options = ResolveOptions(config);
  EXPECT_FALSE(options.ok());
  EXPECT_THAT(options.status().message(), HasSubstr("no-port-here"));
}

class MetricsServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    v1::MetricsServiceConfig config;
    config.set_listen_address("127.0.0.1:0");
    config.set_metrics_listen_address("127.0.0.1:0");
    absl::StatusOr<MetricsServiceOptions> options = ResolveOptions(config);
    ASSERT_TRUE(options.ok()) << options.status();
    absl::StatusOr<std::unique_ptr<MetricsService>> service = MetricsService::Start(*options);
    ASSERT_TRUE(service.ok()) << service.status();
    service_ = std::move(*service);
    channel_ = grpc::CreateChannel(service_->grpc_address(), grpc::InsecureChannelCredentials());
    stub_ = v1::ControlPlane::NewStub(channel_);
  }

  grpc::health::v1::HealthCheckResponse::ServingStatus Health(const std::string &name) {
    auto health = grpc::health::v1::Health::NewStub(channel_);
    grpc::health::v1::HealthCheckRequest request;
    request.set_service(name);
    grpc::health::v1::HealthCheckResponse response;
    grpc::ClientContext context;
    SafetyDeadline(&context);
    const grpc::Status status = health->Check(&context, request, &response);
    if (!status.ok()) return grpc::health::v1::HealthCheckResponse::UNKNOWN;
    return response.status();
  }

  // Waits (listening to the registry, bounded by 60 s) until its worker
  // table satisfies `ok`.
  bool WaitForTable(const std::function<bool(const v1::WorkerTable &)> &ok) {
    absl::Mutex mu;
    bool done = false;
    Registry &registry = service_->registry();
    const int64_t id = registry.Subscribe([&] {
      const bool now_ok = ok(registry.WorkerTable(""));
      absl::MutexLock lock(&mu);
      done = done || now_ok;
    });
    {
      absl::MutexLock lock(&mu);
      done = done || ok(registry.WorkerTable(""));
      mu.AwaitWithTimeout(absl::Condition(&done), absl::Seconds(60));
    }
    registry.Unsubscribe(id);
    absl::MutexLock lock(&mu);
    return done;
  }

  std::unique_ptr<MetricsService> service_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::ControlPlane::Stub> stub_;
};

TEST_F(MetricsServiceTest, ServesHealthAndRegistrationAndMetrics) {
  EXPECT_EQ(Health(""), grpc::health::v1::HealthCheckResponse::SERVING);
  EXPECT_EQ(Health("onecard.v1.ControlPlane"), grpc::health::v1::HealthCheckResponse::SERVING);

  v1::RegisterWorkerRequest request;
  request.set_worker_id("w1");
  request.set_address("127.0.0.1:1");
  request.mutable_info()->set_max_num_seqs(8);
  v1::RegisterWorkerResponse response;
  grpc::ClientContext context;
  SafetyDeadline(&context);
  ASSERT_TRUE(stub_->RegisterWorker(&context, request, &response).ok());

  grpc::ClientContext stream_context;
  SafetyDeadline(&stream_context);
  v1::ReportLoadResponse done;
  auto writer = stub_->ReportWorkerLoad(&stream_context, &done);
  v1::WorkerLoadReport report;
  report.set_worker_id("w1");
  report.set_address("127.0.0.1:1");
  report.set_sequence(1);
  report.set_running(3);
  report.set_waiting(1);
  ASSERT_TRUE(writer->Write(report));
  // The stream stays open (a worker that closes it has left the table)
  // until the report shows in the registry.
  ASSERT_TRUE(WaitForTable([](const v1::WorkerTable &t) {
    return t.workers_size() == 1 && t.workers(0).load().running() == 3;
  }));

  // The registry publishes the report before the service counts it, so a
  // scrape may briefly see the table without the count: scrape until the
  // count shows (bounded by 60 s).
  absl::StatusOr<testing::PromText> text;
  for (int attempt = 0; attempt < 600; ++attempt) {
    absl::StatusOr<testing::HttpResponse> http =
        testing::HttpGet(service_->metrics_address(), "/metrics");
    ASSERT_TRUE(http.ok()) << http.status();
    ASSERT_EQ(http->status_code, 200);
    text = testing::ParsePromText(http->body);
    ASSERT_TRUE(text.ok()) << text.status();
    if (text->Value("onecard_metrics_load_reports_total", {{"kind", "worker"}}) == 1.0) break;
    absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_EQ(text->Value("onecard_cluster_workers", {{"state", "healthy"}}), 1.0);
  EXPECT_EQ(text->Value("onecard_cluster_requests_running"), 3.0);
  EXPECT_EQ(text->Value("onecard_cluster_queue_depth"), 1.0);
  EXPECT_DOUBLE_EQ(*text->Value("onecard_cluster_saturation_ratio"),
                   0.5);  // (3 + 1) / 8
  EXPECT_EQ(text->Value("onecard_metrics_load_reports_total", {{"kind", "worker"}}), 1.0);
  writer->WritesDone();
  EXPECT_TRUE(writer->Finish().ok());
}

TEST_F(MetricsServiceTest, ShutdownEndsOpenStreamsAndHealth) {
  grpc::ClientContext watch_context;
  SafetyDeadline(&watch_context);
  auto reader = stub_->WatchWorkers(&watch_context, v1::WatchWorkersRequest());
  v1::WorkerTable table;
  ASSERT_TRUE(reader->Read(&table));

  service_->Shutdown();
  while (reader->Read(&table)) {
  }
  const grpc::Status status = reader->Finish();
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.error_code(),
            grpc::StatusCode::DEADLINE_EXCEEDED);  // ended, not hung
  EXPECT_EQ(Health(""),
            grpc::health::v1::HealthCheckResponse::UNKNOWN);  // nobody answers
  service_->Shutdown();                                       // idempotent
}

}  // namespace
}  // namespace onecard::services::metrics
