// Tests services/metrics/control_service.h over real gRPC: an in-process
// server on 127.0.0.1:0, real stubs, and a fake clock that the test moves
// (the watch rate limit reads it), so no sleeps and no timing assertions.
// Client deadlines are only a safety net against a hang.
#include "services/metrics/control_service.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "services/common/service_auth.h"
#include "tests/services/testing/service_credentials.h"

namespace onecard::services::metrics {
namespace {

using ::testing::HasSubstr;

class ControlServiceTest : public ::testing::Test {
 protected:
  explicit ControlServiceTest(RegistryOptions options = {},
                              std::shared_ptr<const ServiceAuth> auth = nullptr)
      : registry_(options, [this] { return absl::FromUnixNanos(now_nanos_.load()); }),
        metrics_(&registry_),
        service_(&registry_, &metrics_, absl::Milliseconds(100), std::move(auth)) {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                       grpc::InsecureChannelCredentials());
    stub_ = v1::ControlPlane::NewStub(channel);
  }
  ~ControlServiceTest() override {
    server_->Shutdown(std::chrono::system_clock::now());
    server_->Wait();
  }

  static void SafetyDeadline(grpc::ClientContext *context) {
    context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  }

  grpc::Status Register(const std::string &id, const std::string &model = "m",
                        const std::string &token = "", const std::string &address = "") {
    v1::RegisterWorkerRequest request;
    request.set_worker_id(id);
    request.set_address(address.empty() ? id + ":50051" : address);
    request.mutable_info()->mutable_model()->set_id(model);
    v1::RegisterWorkerResponse response;
    grpc::ClientContext context;
    SafetyDeadline(&context);
    if (!token.empty()) context.AddMetadata(kServiceTokenKey, token);
    return stub_->RegisterWorker(&context, request, &response);
  }

  // Sends `reports` on one stream, then half-closes; returns the status.
  grpc::Status SendReports(const std::vector<v1::WorkerLoadReport> &reports) {
    grpc::ClientContext context;
    SafetyDeadline(&context);
    v1::ReportLoadResponse response;
    auto writer = stub_->ReportWorkerLoad(&context, &response);
    for (const auto &report : reports) {
      if (!writer->Write(report)) break;
    }
    writer->WritesDone();
    return writer->Finish();
  }

  static v1::WorkerLoadReport Load(const std::string &id, int64_t seq, int64_t running) {
    v1::WorkerLoadReport report;
    report.set_worker_id(id);
    report.set_address(id + ":50051");
    report.set_sequence(seq);
    report.set_running(running);
    return report;
  }

  void Advance(absl::Duration d) { now_nanos_ += absl::ToInt64Nanoseconds(d); }

  std::atomic<int64_t> now_nanos_{1700000000ll * 1000000000ll};
  Registry registry_;
  ClusterMetrics metrics_;
  ControlService service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::ControlPlane::Stub> stub_;
};

TEST_F(ControlServiceTest, RegisterAnswersReportIntervalAndRejectsBadRequests) {
  v1::RegisterWorkerRequest request;
  request.set_worker_id("w1");
  request.set_address("w1:1");
  v1::RegisterWorkerResponse response;
  grpc::ClientContext context;
  SafetyDeadline(&context);
  ASSERT_TRUE(stub_->RegisterWorker(&context, request, &response).ok());
  EXPECT_EQ(response.report_interval().nanos(), 250000000);

  request.clear_address();
  grpc::ClientContext bad_context;
  SafetyDeadline(&bad_context);
  const grpc::Status status = stub_->RegisterWorker(&bad_context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("address"));
}

// Each report updates the table as it arrives; when the stream ends the
// worker has left and is forgotten at once (not after the expiry).
TEST_F(ControlServiceTest, ReportStreamUpdatesTheTableUntilTheWorkerLeaves) {
  ASSERT_TRUE(Register("w1").ok());
  std::vector<int64_t> running;  // the listener runs on the thread of each change
  absl::Mutex mu;
  const int64_t id = registry_.Subscribe([&] {
    const v1::WorkerTable table = registry_.WorkerTable("");
    absl::MutexLock lock(&mu);
    running.push_back(table.workers_size() == 0 ? -1 : table.workers(0).load().running());
  });
  ASSERT_TRUE(SendReports({Load("w1", 1, 2), Load("w1", 2, 5)}).ok());
  registry_.Unsubscribe(id);
  EXPECT_EQ(running, (std::vector<int64_t>{2, 5, -1}));
  EXPECT_EQ(registry_.WorkerTable("").workers_size(), 0);
}

TEST_F(ControlServiceTest, UnknownWorkerStreamEndsWithNotFound) {
  const grpc::Status status = SendReports({Load("ghost", 1, 0)});
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(status.error_message(), HasSubstr("ghost"));
}

TEST_F(ControlServiceTest, RouterRegistersAndReports) {
  v1::RegisterRouterRequest request;
  request.set_router_id("r1");
  request.set_address("r1:50050");
  v1::RegisterRouterResponse response;
  grpc::ClientContext context;
  SafetyDeadline(&context);
  ASSERT_TRUE(stub_->RegisterRouter(&context, request, &response).ok());

  grpc::ClientContext stream_context;
  SafetyDeadline(&stream_context);
  v1::ReportLoadResponse done;
  auto writer = stub_->ReportRouterLoad(&stream_context, &done);
  v1::RouterLoadReport report;
  report.set_router_id("r1");
  report.set_sequence(1);
  report.set_in_flight(4);
  ASSERT_TRUE(writer->Write(report));
  writer->WritesDone();
  ASSERT_TRUE(writer->Finish().ok());
  const RegistrySnapshot snapshot = registry_.Snapshot();
  ASSERT_EQ(snapshot.routers.size(), 1u);
  EXPECT_EQ(snapshot.routers[0].load->in_flight(), 4);
}

TEST_F(ControlServiceTest, WatchSendsTableThenChangesAfterTheInterval) {
  ASSERT_TRUE(Register("w1").ok());
  grpc::ClientContext context;
  SafetyDeadline(&context);
  v1::WatchWorkersRequest request;
  request.set_router_id("r1");
  auto reader = stub_->WatchWorkers(&context, request);
  v1::WorkerTable table;
  ASSERT_TRUE(reader->Read(&table));
  ASSERT_EQ(table.workers_size(), 1);
  EXPECT_FALSE(table.workers(0).has_load());
  const int64_t first_version = table.version();

  ASSERT_TRUE(registry_.ReportWorkerLoad(Load("w1", 1, 7)).ok());
  Advance(absl::Milliseconds(100));  // the rate limit has passed
  service_.Tick();
  ASSERT_TRUE(reader->Read(&table));
  EXPECT_GT(table.version(), first_version);
  EXPECT_EQ(table.workers(0).load().running(), 7);

  // A worker silent past the expiry shows up unhealthy on the next tick.
  Advance(absl::Seconds(3));
  service_.Tick();
  ASSERT_TRUE(reader->Read(&table));
  EXPECT_FALSE(table.workers(0).healthy());

  context.TryCancel();
  while (reader->Read(&table)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
}

// A control plane that has just (re)started holds the table back for the
// warm-up: a router watching it keeps its last table until the workers that
// outlived the restart have registered again, instead of applying the empty
// table the new process starts with.
class ControlServiceWarmupTest : public ControlServiceTest {
 protected:
  static RegistryOptions WarmupOptions() {
    RegistryOptions options;
    options.table_warmup = absl::Seconds(2);
    return options;
  }
  ControlServiceWarmupTest() : ControlServiceTest(WarmupOptions()) {}
};

TEST_F(ControlServiceWarmupTest, FirstTableWaitsForTheWarmup) {
  grpc::ClientContext context;
  SafetyDeadline(&context);
  v1::WatchWorkersRequest request;
  request.set_router_id("r1");
  auto reader = stub_->WatchWorkers(&context, request);  // opened with no worker known
  Advance(absl::Milliseconds(500));
  ASSERT_TRUE(Register("w1").ok());
  service_.Tick();
  Advance(absl::Seconds(1));
  ASSERT_TRUE(Register("w2").ok());
  service_.Tick();
  Advance(absl::Milliseconds(500));  // the warm-up is over
  service_.Tick();
  // The first table the router sees already holds both workers.
  v1::WorkerTable table;
  ASSERT_TRUE(reader->Read(&table));
  ASSERT_EQ(table.workers_size(), 2);
  EXPECT_EQ(table.workers(0).worker_id(), "w1");
  EXPECT_EQ(table.workers(1).worker_id(), "w2");
  context.TryCancel();
  while (reader->Read(&table)) {
  }
  reader->Finish();
}

TEST_F(ControlServiceTest, WatchFiltersByModel) {
  ASSERT_TRUE(Register("a", "smollm2").ok());
  ASSERT_TRUE(Register("b", "qwen2").ok());
  grpc::ClientContext context;
  SafetyDeadline(&context);
  v1::WatchWorkersRequest request;
  request.set_model("qwen2");
  auto reader = stub_->WatchWorkers(&context, request);
  v1::WorkerTable table;
  ASSERT_TRUE(reader->Read(&table));
  ASSERT_EQ(table.workers_size(), 1);
  EXPECT_EQ(table.workers(0).worker_id(), "b");
  context.TryCancel();
  while (reader->Read(&table)) {
  }
  reader->Finish();
}

// Token mode: each method wants its role's token.
class ControlServiceTokenTest : public ControlServiceTest {
 protected:
  ControlServiceTokenTest()
      : ControlServiceTokenTest(testing::WriteTestTokens(testing::MakeTestDir("control"))) {}
  explicit ControlServiceTokenTest(testing::TestTokens tokens)
      : ControlServiceTest({}, Auth(tokens)), tokens_(std::move(tokens)) {}

  static std::shared_ptr<const ServiceAuth> Auth(const testing::TestTokens &tokens) {
    absl::StatusOr<std::shared_ptr<const ServiceAuth>> auth =
        ServiceAuth::Create({testing::TokenAuth(tokens), "metrics", {}});
    EXPECT_TRUE(auth.ok()) << auth.status();
    return *auth;
  }

  // WatchWorkers with `token`: the status of a stream that is refused at once.
  grpc::Status Watch(const std::string &token) {
    grpc::ClientContext context;
    SafetyDeadline(&context);
    context.AddMetadata(kServiceTokenKey, token);
    auto reader = stub_->WatchWorkers(&context, v1::WatchWorkersRequest());
    v1::WorkerTable table;
    while (reader->Read(&table)) context.TryCancel();  // a table: the watch was allowed
    return reader->Finish();
  }

  const testing::TestTokens tokens_;
};

// Issue 22: anyone who reached the metrics service could register a worker
// and watch the worker table.
TEST_F(ControlServiceTokenTest, OnlyWorkersRegisterAndOnlyRoutersWatch) {
  EXPECT_EQ(Register("w1").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Register("w1", "m", tokens_.router).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Register("w1", "m", "not-a-token-of-ours").error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(Register("w1", "m", tokens_.worker).ok());
  EXPECT_EQ(Watch(tokens_.worker).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Watch("").error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Watch(tokens_.router).error_code(), grpc::StatusCode::CANCELLED);  // it got a table
  grpc::ClientContext context;
  SafetyDeadline(&context);
  context.AddMetadata(kServiceTokenKey, tokens_.worker);
  v1::RegisterRouterRequest router;
  router.set_router_id("r1");
  router.set_address("r1:1");
  v1::RegisterRouterResponse response;
  EXPECT_EQ(stub_->RegisterRouter(&context, router, &response).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
}

// Issue 22: a second registration of a live id from elsewhere took over its
// traffic; it is refused, and the table keeps the real worker.
TEST_F(ControlServiceTokenTest, TakeoverOfALiveIdIsRefused) {
  ASSERT_TRUE(Register("w1", "m", tokens_.worker, "10.0.0.1:50051").ok());
  const grpc::Status takeover = Register("w1", "m", tokens_.worker, "10.6.6.6:50051");
  EXPECT_EQ(takeover.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(takeover.error_message(), HasSubstr("registered by 'token:worker' at 10.0.0.1"));
  EXPECT_EQ(registry_.WorkerTable("").workers(0).address(), "10.0.0.1:50051");
}

}  // namespace
}  // namespace onecard::services::metrics
